//! CPU reference for the heavy computation, and the error bound the GPU result must meet.
//!
//! # Error analysis (f32 kernel)
//!
//! The kernel evaluates, in f32 with unit roundoff `u = 2^-24`,
//! `t1 = x·x`, `t3' = t1·x`, `(s, c) = sincosf(x)`, `t2 = t3'·(s·c)`, `t3 = s/c` (hardware
//! reciprocal division, documented to 2 ulp for divisors in `[2^-126, 2^126]`; `|cos x|` of an
//! f32 `x` is above 1e-9), `y = (t1 + t2) + t3`.
//! libdevice documents `sinf`/`cosf`/`sincosf` to at most 2 ulp over the whole range (its
//! reduction is Cody-Waite with a 3-part π/2 below 105615 and Payne-Hanek above, both accurate to
//! well under one ulp of the reduced argument, including next to the poles of tan), and
//! 2 ulp ≤ 4u relative. Each rounding adds at most `u` relative. First-order relative errors:
//! `t1`: u; `x³`: 2u; `s·c`: 4u + 4u + u = 9u; `t2`: 2u + 9u + u = 12u; `t3 = s/c`:
//! 4u + 4u + 4u = 12u. The two additions add at most `u·(|t1| + |t2| + |t3|)` each. So
//! `|ŷ − y| ≤ u·(3|t1| + 14|t2| + 14|t3|)` to first order; second-order terms are below
//! `200·u²` relative to that, covered by a factor `1 + 1e-5`. Near subnormal results every
//! operation's absolute error is at most 2 ulp of the smallest subnormal (2^-148), and at most
//! five operations contribute: an absolute floor of `2^-145`.
//!
//! The bound is relative to the *terms*, not to `y`: where terms cancel (`x² + x³ sin x cos x ≈
//! −tan x`) the result's relative error is unbounded for any f32 method, and next to the poles of
//! tan (`|tan x|` huge) the bound grows with `|tan x|` itself, which is the conditioning of the
//! division `s/c` when `c` carries a few-ulp relative error. A comparison relative to `|y|`
//! would fail there for a correct kernel; this one does not excuse any error elsewhere.
//!
//! Overflow follows the f32 program: `x²` and `x³` become ±inf when they exceed the f32 range
//! (|x| > 1.8e19 and |x| > 6.98e12), so the reference models those two intermediates the same
//! way, and `inf − inf` gives NaN as in f32.
//!
//! # f16 kernel
//!
//! Inputs are exact in f32; |x| ≤ 65504 keeps every intermediate finite in f32. The f32 result
//! obeys the bound above and is rounded once to f16 (round to nearest even), adding at most half
//! an f16 ulp of the result: `B16 = B32 + ulp16(|y| + B32)/2`.
//!
//! # bf16 kernel
//!
//! bf16 has f32's exponent range, so its inputs reach the f32 kernel's overflows, which the
//! reference models as for f32. The f32 result obeys the f32 bound and is rounded once to bf16
//! (8 significant bits), adding at most half a bf16 ulp: `B = B32 + ulpbf16(|y| + B32)/2`.

use half::{bf16, f16};
use rayon::prelude::*;

/// Unit roundoff of f32.
const U32: f64 = 1.0 / (1u64 << 24) as f64;
/// Absolute error floor for subnormal results (see the module docs).
const FLOOR32: f64 = 2.2420775429197073e-44; // 2^-145
/// Smallest magnitude that rounds to infinity in f32 (round to nearest): 2^128 − 2^103.
const OVERFLOW32: f64 = 3.402_823_567_797_337e38;
/// Smallest magnitude that rounds to infinity in f16: 65520.
const OVERFLOW16: f64 = 65520.0;
/// Smallest magnitude that rounds to infinity in bf16: 2^128 − 2^119.
const OVERFLOW_BF16: f64 = 3.396_110_258_300_049_5e38;

/// The three terms of the expression, in f64, with `x²` and `x³` overflowing like f32.
fn terms(x: f64, f32_intermediates: bool) -> (f64, f64, f64) {
    let like_f32 = |v: f64| {
        if f32_intermediates && (v as f32).is_infinite() {
            v.signum() * f64::INFINITY
        } else {
            v
        }
    };
    let sq = like_f32(x * x);
    let cube = like_f32(x * x * x);
    let (s, c) = (x.sin(), x.cos());
    (sq, cube * (s * c), x.tan())
}

/// The value the f32 kernel approximates for input `x`.
pub fn heavy_f32(x: f32) -> f64 {
    let (a, b, c) = terms(x as f64, true);
    a + b + c
}

/// The value the f16 kernel approximates for input `x` (before its final rounding).
pub fn heavy_f16(x: f16) -> f64 {
    let (a, b, c) = terms(x.to_f64(), false);
    a + b + c
}

/// Error bound of the f32 kernel at `x` (module docs).
pub fn bound_f32(x: f32) -> f64 {
    let (a, b, c) = terms(x as f64, true);
    U32 * (3.0 * a.abs() + 14.0 * b.abs() + 14.0 * c.abs()) * (1.0 + 1e-5) + FLOOR32
}

fn half_ulp16(v: f64) -> f64 {
    let v = v.abs();
    // Normal f16 numbers have 10 fraction bits; below 2^-14 the spacing is 2^-24.
    let exp = if v < 2f64.powi(-14) {
        -14
    } else {
        v.log2().floor() as i32
    };
    2f64.powi(exp - 10) / 2.0
}

/// The value the bf16 kernel approximates for input `x` (before its final rounding).
pub fn heavy_bf16(x: bf16) -> f64 {
    let (a, b, c) = terms(x.to_f64(), true);
    a + b + c
}

/// Error bound of the bf16 kernel at `x` (module docs).
pub fn bound_bf16(x: bf16) -> f64 {
    let (a, b, c) = terms(x.to_f64(), true);
    let b32 = U32 * (3.0 * a.abs() + 14.0 * b.abs() + 14.0 * c.abs()) * (1.0 + 1e-5) + FLOOR32;
    let v = (a + b + c).abs() + b32;
    // 7 fraction bits; below 2^-126 the spacing is 2^-133.
    let exp = if v < 2f64.powi(-126) {
        -126
    } else {
        v.log2().floor() as i32
    };
    b32 + 2f64.powi(exp - 8)
}

/// Error bound of the f16 kernel at `x` (module docs).
pub fn bound_f16(x: f16) -> f64 {
    let (a, b, c) = terms(x.to_f64(), false);
    let b32 = U32 * (3.0 * a.abs() + 14.0 * b.abs() + 14.0 * c.abs()) * (1.0 + 1e-5) + FLOOR32;
    b32 + half_ulp16((a + b + c).abs() + b32)
}

/// Whether `got` is within `bound` of `want`, with IEEE special values handled: NaN only where
/// the reference is NaN, infinities only where the reference is that infinity or within `bound`
/// of the overflow threshold `overflow`.
pub fn within(got: f64, want: f64, bound: f64, overflow: f64) -> bool {
    if want.is_nan() || got.is_nan() {
        return want.is_nan() && got.is_nan();
    }
    if want.is_infinite() {
        return got == want;
    }
    if got.is_infinite() {
        return got.signum() == want.signum() && want.abs() + bound >= overflow;
    }
    (got - want).abs() <= bound
}

/// Outcome of comparing a whole output with the reference.
#[derive(Clone, Debug, Default)]
pub struct Comparison {
    /// Elements compared.
    pub count: usize,
    /// Elements outside their bound.
    pub failures: usize,
    /// Largest `|got − want|` among finite pairs.
    pub max_abs_error: f64,
    /// Largest `|got − want| / bound` among finite pairs (≤ 1 passes).
    pub max_error_over_bound: f64,
    /// First failing index, input, output and reference.
    pub first_failure: Option<(usize, f64, f64, f64)>,
}

fn compare<X: Sync, Y: Sync>(
    x: &[X],
    y: &[Y],
    f: impl Fn(&X, &Y) -> (f64, f64, f64, f64, f64) + Sync,
) -> Comparison {
    assert_eq!(x.len(), y.len(), "input and output lengths differ");
    const CHUNK: usize = 1 << 16;
    x.par_chunks(CHUNK)
        .zip(y.par_chunks(CHUNK))
        .enumerate()
        .map(|(ci, (xs, ys))| {
            let mut c = Comparison {
                count: xs.len(),
                ..Default::default()
            };
            for (i, (xv, yv)) in xs.iter().zip(ys).enumerate() {
                let (input, got, want, bound, overflow) = f(xv, yv);
                if !within(got, want, bound, overflow) {
                    c.failures += 1;
                    if c.first_failure.is_none() {
                        c.first_failure = Some((ci * CHUNK + i, input, got, want));
                    }
                }
                if got.is_finite() && want.is_finite() {
                    let e = (got - want).abs();
                    c.max_abs_error = c.max_abs_error.max(e);
                    c.max_error_over_bound = c.max_error_over_bound.max(e / bound);
                }
            }
            c
        })
        .reduce(Comparison::default, |a, b| Comparison {
            count: a.count + b.count,
            failures: a.failures + b.failures,
            max_abs_error: a.max_abs_error.max(b.max_abs_error),
            max_error_over_bound: a.max_error_over_bound.max(b.max_error_over_bound),
            first_failure: match (a.first_failure, b.first_failure) {
                (Some(p), Some(q)) => Some(if p.0 <= q.0 { p } else { q }),
                (p, q) => p.or(q),
            },
        })
}

/// Compares an f32 kernel output with the reference, element by element.
pub fn compare_f32(x: &[f32], y: &[f32]) -> Comparison {
    compare(x, y, |&xv, &yv| {
        (
            xv as f64,
            yv as f64,
            heavy_f32(xv),
            bound_f32(xv),
            OVERFLOW32,
        )
    })
}

/// Compares an f16 kernel output with the reference, element by element.
pub fn compare_f16(x: &[f16], y: &[f16]) -> Comparison {
    compare(x, y, |&xv, &yv| {
        (
            xv.to_f64(),
            yv.to_f64(),
            heavy_f16(xv),
            bound_f16(xv),
            OVERFLOW16,
        )
    })
}

/// Compares a bf16 kernel output with the reference, element by element.
pub fn compare_bf16(x: &[bf16], y: &[bf16]) -> Comparison {
    compare(x, y, |&xv, &yv| {
        (
            xv.to_f64(),
            yv.to_f64(),
            heavy_bf16(xv),
            bound_bf16(xv),
            OVERFLOW_BF16,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        assert_eq!(heavy_f32(0.0), 0.0);
        // 1 + sin(1)cos(1) + tan(1), from the definition with constants to 17 digits.
        let want =
            1.0 + 0.841_470_984_807_896_5 * 0.540_302_305_868_139_8 + 1.557_407_724_654_902_3;
        assert!((heavy_f32(1.0) - want).abs() < 1e-15);
        assert!(heavy_f32(f32::NAN).is_nan());
        assert!(heavy_f32(f32::INFINITY).is_nan());
        // x^3 overflows f32 at 1e13: the f32 program gives ±inf, and so does the reference.
        assert!(heavy_f32(1e13).is_infinite());
        // x^2 = +inf, x^3·sin·cos = ±inf: NaN or +inf, following the sign of sin·cos.
        let x = 1e20f32;
        let sc = (x as f64).sin() * (x as f64).cos();
        let r = heavy_f32(x);
        assert!(if sc < 0.0 {
            r.is_nan()
        } else {
            r == f64::INFINITY
        });
    }

    #[test]
    fn within_handles_specials() {
        assert!(within(f64::NAN, f64::NAN, 0.0, OVERFLOW32));
        assert!(!within(1.0, f64::NAN, 1.0, OVERFLOW32));
        assert!(!within(f64::NAN, 1.0, 1.0, OVERFLOW32));
        assert!(within(f64::INFINITY, f64::INFINITY, 0.0, OVERFLOW32));
        assert!(!within(f64::NEG_INFINITY, f64::INFINITY, 0.0, OVERFLOW32));
        assert!(within(f64::INFINITY, 65519.0, 2.0, OVERFLOW16));
        assert!(!within(f64::INFINITY, 60000.0, 2.0, OVERFLOW16));
        assert!(within(1.0 + 1e-7, 1.0, 2e-7, OVERFLOW32));
        assert!(!within(1.0 + 3e-7, 1.0, 2e-7, OVERFLOW32));
    }

    #[test]
    fn f16_half_ulp() {
        assert_eq!(half_ulp16(1.0), 2f64.powi(-11));
        assert_eq!(half_ulp16(1024.0), 0.5);
        assert_eq!(half_ulp16(1e-6), 2f64.powi(-25));
    }

    /// The bound is what the analysis says, not what a run happened to need: a plain f32
    /// evaluation on the CPU (correctly rounded f32 sin/cos/tan come close to libdevice) must
    /// meet it, and an error of a few ulp more must not.
    #[test]
    fn cpu_f32_evaluation_meets_the_bound() {
        let mut x = 0.37f32;
        for _ in 0..20000 {
            x = (x * 1.618_034 + 0.1) % 300.0 - 150.0;
            let (s, c) = (x.sin(), x.cos());
            let y = x * x + (x * x * x) * (s * c) + s / c;
            assert!(
                within(y as f64, heavy_f32(x), bound_f32(x), OVERFLOW32),
                "x = {x}"
            );
            let off = y as f64 + 40.0 * bound_f32(x);
            assert!(!within(off, heavy_f32(x), bound_f32(x), OVERFLOW32));
        }
    }
}
