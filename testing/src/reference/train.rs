//! CPU references of the training-step kernels and of one step of the two-layer MLP built from
//! them, in f64.
//!
//! # Error analysis
//!
//! With `u = 2^-24` the unit roundoff of f32:
//! - `relu`, `relu_backward` and `transpose` move or select f32 values without arithmetic:
//!   the kernels must match bit for bit.
//! - `mse_grad` computes `scale * (y - t)` with two roundings (the difference, then the
//!   product), so `|d - scale (y - t)| <= (2u + u^2) |scale (y - t)|`, plus `2^-149` for a
//!   product that underflows; the test allows `3u |exact| + 2^-148`.
//! - `sgd` computes `fma(-lr, g, w)` with one rounding: `|w' - (w - lr g)| <= u |w - lr g|`,
//!   plus `2^-150` when the result is subnormal; the test allows `u |exact| + 2^-149`.
//! - `sgd_pair` computes `fma(-lr, (a + b) * 0.5, w)`: the sum of the two (exactly widened)
//!   gradients rounds once, `|s - (a + b)| <= u |a + b|`; halving is exact but for a subnormal
//!   result (`2^-150`); the update rounds once more. So the mean `m` is within
//!   `e = u |m| + 2^-150` and `|w' - (w - lr m)| <= u |w - lr m| + (1 + u) |lr| e + 2^-150`;
//!   the test allows `u |exact| + 1.01 |lr| e + 2^-149`.
//! - A step of one GPU applies `dL/dW1` in the product that computes it (`C = -lr A B + C`):
//!   `t = round(-lr acc)`, then `w' = round(w + t)`: after the product's `k` roundings two
//!   more, where a gradient in memory and `sgd` take one. With `|acc - s| <= gamma_k S + E` (`S` the sum of
//!   absolute products, `E` what the inputs' errors carry), `|w' - (w - lr s)| <= u |w - lr s|
//!   + (1 + u) |lr| ((1 + u)(gamma_k S + E) + u S) + 2^-149`, inside the `gamma_{k+2} S + E`
//!   the step's bound allows for the product while `E <= S / 2` (the propagated errors are of
//!   order `gamma S`); each rounding's subnormal floor is `2^-150`.
//! - A whole step (see [`mlp_step`]) chains products whose bound comes from
//!   [`crate::reference::matmul`]: each product of length `k` is within `gamma_{k+2} S`
//!   (`S` the sum of absolute products). The reference follows the step in f64 and carries a
//!   bound the same way through every operation (ReLU masks where the input is within its
//!   bound of 0 are reported as ambiguous and skipped).

/// `relu(x)`: `x` where `x > 0` or NaN, else `+0`.
pub fn relu(x: f32) -> f32 {
    if x.is_nan() || x > 0.0 {
        x
    } else {
        0.0
    }
}

/// The ReLU's gradient: `dy` where `x > 0`, else `+0`.
pub fn relu_backward(dy: f32, x: f32) -> f32 {
    if x > 0.0 {
        dy
    } else {
        0.0
    }
}

/// `scale * (y - t)` in f64 and the kernel's error bound.
pub fn mse_grad(y: f32, t: f32, scale: f32) -> (f64, f64) {
    let v = scale as f64 * (y as f64 - t as f64);
    (
        v,
        3.0 * f64::powi(2.0, -24) * v.abs() + f64::powi(2.0, -148),
    )
}

/// `w - lr * g` in f64 and the kernel's error bound.
pub fn sgd(w: f32, g: f32, lr: f32) -> (f64, f64) {
    let v = w as f64 - lr as f64 * g as f64;
    (v, f64::powi(2.0, -24) * v.abs() + f64::powi(2.0, -149))
}

/// `w - lr * (a + b) / 2` in f64 and the kernel's error bound.
pub fn sgd_pair(w: f32, (a, b): (f32, f32), lr: f32) -> (f64, f64) {
    let u = f64::powi(2.0, -24);
    let mean = (a as f64 + b as f64) / 2.0;
    let v = w as f64 - lr as f64 * mean;
    let e = u * mean.abs() + f64::powi(2.0, -150);
    (
        v,
        u * v.abs() + 1.01 * (lr as f64).abs() * e + f64::powi(2.0, -149),
    )
}

/// The bits of `x` (not a NaN) rounded to the nearest bf16, ties to even, from its bits alone:
/// the kernel must match bit for bit (overflow gives an infinity, as rounding does).
pub fn round_bf16(x: f32) -> u16 {
    debug_assert!(!x.is_nan(), "round_bf16 of a NaN");
    let b = x.to_bits();
    let keep = b >> 16;
    let rest = b & 0xffff;
    let up = rest > 0x8000 || (rest == 0x8000 && keep & 1 == 1);
    (keep + up as u32) as u16
}

/// A bf16's value (exact in f64).
pub fn bf16_value(bits: u16) -> f64 {
    f32::from_bits((bits as u32) << 16) as f64
}

/// The transpose of the row-major `rows x cols` matrix `x`.
pub fn transpose(x: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut y = vec![0.0; rows * cols];
    for i in 0..rows {
        for j in 0..cols {
            y[j * rows + i] = x[i * cols + j];
        }
    }
    y
}

/// A value and its error bound.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Bounded {
    /// Exact value (f64) of the computation on the given inputs.
    pub value: f64,
    /// How far a correct f32 implementation may be from it; infinite where a ReLU decision
    /// was ambiguous.
    pub bound: f64,
}

/// Sizes of the two-layer MLP: `x` (`batch x inputs`) `-> relu(x W1)` (`hidden`) `-> W2`
/// (`outputs`), trained by SGD on the mean squared error against targets.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Mlp {
    /// Rows of a batch.
    pub batch: usize,
    /// Inputs per row.
    pub inputs: usize,
    /// Hidden units.
    pub hidden: usize,
    /// Outputs per row.
    pub outputs: usize,
    /// Learning rate.
    pub lr: f32,
}

/// The updated second-layer weights (all of them) and the listed rows of the updated
/// first-layer weights after one SGD step on batch `x` with targets `t`, from weights `w1`
/// (`inputs x hidden`) and `w2` (`hidden x outputs`), each with its bound.
///
/// The bound propagates `gamma`-style bounds through the chain (forward product, ReLU, second
/// product, loss gradient, the three backward products, the updates): every f32 operation adds
/// `u` relative to the magnitude it rounds, a product of length `k` adds `gamma_{k+2}` times
/// its sum of absolute terms, and a bound on an input of a product propagates through the
/// absolute values of the other factor.
pub fn mlp_step(
    m: &Mlp,
    x: &[f32],
    t: &[f32],
    w1: &[f32],
    w2: &[f32],
    w1_rows: &[usize],
) -> (Vec<Bounded>, Vec<(usize, Vec<Bounded>)>) {
    mlp_step_exchanged(m, x, t, w1, w2, w1_rows, None)
}

/// How a data-parallel step's `dL/dW1` travelled between GPUs when it was not in f32: each
/// rank's part rounded to a format of unit roundoff `unit` (`2^-8` for bf16), then averaged
/// over `ranks` ranks in that format.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Exchange {
    /// Unit roundoff of the format the gradient travelled in.
    pub unit: f64,
    /// Number of ranks averaged.
    pub ranks: usize,
}

/// [`mlp_step`] where `dL/dW1` travelled as `exchange` says: its update's bound grows by `lr`
/// times `gamma_{ranks+2}` in that format's unit times the sum of the absolute terms of the
/// gradient: the rounding of every rank's part, at most `ranks - 1` roundings of partial sums,
/// and the average as NCCL takes it (each part times `1/ranks` rounded to the format, and that
/// product rounded), each relative to at most that sum.
pub fn mlp_step_exchanged(
    m: &Mlp,
    x: &[f32],
    t: &[f32],
    w1: &[f32],
    w2: &[f32],
    w1_rows: &[usize],
    exchange: Option<Exchange>,
) -> (Vec<Bounded>, Vec<(usize, Vec<Bounded>)>) {
    let trip = exchange.map_or(0.0, |e| {
        let k = (e.ranks + 2) as f64 * e.unit;
        // The absolute terms are summed in f64 from f32 parts a little different from them.
        k / (1.0 - k) * (1.0 + f64::powi(2.0, -10))
    });
    // Each of those roundings may also land among the format's subnormals (bf16 shares f32's
    // exponents: half its smallest step is 2^-134).
    let trip_floor = exchange.map_or(0.0, |e| (e.ranks + 2) as f64 * f64::powi(2.0, -133));
    use crate::reference::matmul::gamma;
    let u = f64::powi(2.0, -24);
    let (b, d, h, o) = (m.batch, m.inputs, m.hidden, m.outputs);
    // Forward: hpre = x W1 (B x H) with bound e_h.
    // Rows on the host's threads (each row summed by one thread, in order): at seed 003's
    // sizes this product is by far the reference's largest.
    let mut hpre = vec![0.0f64; b * h];
    let mut e_h = vec![0.0f64; b * h];
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let per = b.div_ceil(threads).max(1) * h;
    std::thread::scope(|scope| {
        for (i, (hp, eh)) in hpre.chunks_mut(per).zip(e_h.chunks_mut(per)).enumerate() {
            scope.spawn(move || {
                for (q, (hr, er)) in hp.chunks_mut(h).zip(eh.chunks_mut(h)).enumerate() {
                    let r = i * per / h + q;
                    for k in 0..d {
                        let xv = x[r * d + k] as f64;
                        for j in 0..h {
                            let p = xv * w1[k * h + j] as f64;
                            hr[j] += p;
                            er[j] += p.abs();
                        }
                    }
                }
            });
        }
    });
    let g_d = gamma(d + 2);
    for e in e_h.iter_mut() {
        *e *= g_d;
    }
    // a = relu(hpre); where |hpre| <= e_h the mask is ambiguous.
    let ambiguous: Vec<bool> = hpre.iter().zip(&e_h).map(|(v, e)| v.abs() <= *e).collect();
    let a: Vec<f64> = hpre.iter().map(|&v| v.max(0.0)).collect();
    let e_a: Vec<f64> = e_h.clone();
    // y = a W2 (B x O).
    let g_h = gamma(h + 2);
    let mut y = vec![0.0f64; b * o];
    let mut e_y = vec![0.0f64; b * o];
    for r in 0..b {
        for k in 0..h {
            for j in 0..o {
                let w = w2[k * o + j] as f64;
                y[r * o + j] += a[r * h + k] * w;
                e_y[r * o + j] += (a[r * h + k].abs() * g_h + e_a[r * h + k]) * w.abs();
            }
        }
    }
    // dy = scale (y - t).
    let scale = (2.0 / (b * o) as f32) as f64;
    let dy: Vec<f64> = y
        .iter()
        .zip(t)
        .map(|(v, &tv)| scale * (v - tv as f64))
        .collect();
    let e_dy: Vec<f64> = dy
        .iter()
        .zip(&e_y)
        .map(|(v, e)| scale * e + 3.0 * u * v.abs() + f64::powi(2.0, -148))
        .collect();
    // dW2 = a^T dy (H x O), k = B.
    let g_b = gamma(b + 2);
    let mut w2n = Vec::with_capacity(h * o);
    for k in 0..h {
        for j in 0..o {
            let (mut s, mut e) = (0.0, 0.0);
            for r in 0..b {
                let (av, gv) = (a[r * h + k], dy[r * o + j]);
                s += av * gv;
                e += av.abs() * gv.abs() * g_b
                    + e_a[r * h + k] * gv.abs()
                    + av.abs() * e_dy[r * o + j];
            }
            let w = w2[k * o + j] as f64;
            let v = w - m.lr as f64 * s;
            w2n.push(Bounded {
                value: v,
                bound: m.lr as f64 * e + u * v.abs() + f64::powi(2.0, -149),
            });
        }
    }
    // da = dy W2^T (B x H), k = O; dh = da where hpre > 0.
    let g_o = gamma(o + 2);
    let mut dh = vec![0.0f64; b * h];
    let mut e_dh = vec![0.0f64; b * h];
    for r in 0..b {
        for k in 0..h {
            let (mut s, mut e) = (0.0, 0.0);
            for j in 0..o {
                let w = w2[k * o + j] as f64;
                s += dy[r * o + j] * w;
                e += (dy[r * o + j].abs() * g_o + e_dy[r * o + j]) * w.abs();
            }
            let i = r * h + k;
            if ambiguous[i] {
                e_dh[i] = f64::INFINITY;
            } else if hpre[i] > 0.0 {
                dh[i] = s;
                e_dh[i] = e;
            }
        }
    }
    // dW1 rows = x^T dh (D x H), k = B.
    let w1n = w1_rows
        .iter()
        .map(|&k| {
            let row = (0..h)
                .map(|j| {
                    let (mut s, mut e, mut abs) = (0.0, 0.0, 0.0);
                    for r in 0..b {
                        let xv = x[r * d + k] as f64;
                        s += xv * dh[r * h + j];
                        e += xv.abs() * (dh[r * h + j].abs() * g_b + e_dh[r * h + j]);
                        abs += xv.abs() * (dh[r * h + j].abs() + e_dh[r * h + j]);
                    }
                    let v = w1[k * h + j] as f64 - m.lr as f64 * s;
                    Bounded {
                        value: v,
                        bound: m.lr as f64 * (e + trip * abs + trip_floor)
                            + u * v.abs()
                            + f64::powi(2.0, -149),
                    }
                })
                .collect();
            (k, row)
        })
        .collect();
    (w2n, w1n)
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The rounding by bits agrees with the `half` crate's over every kind of f32.
        #[test]
        fn round_bf16_agrees_with_half(bits in proptest::prelude::any::<u32>()) {
            let x = f32::from_bits(bits);
            if !x.is_nan() {
                proptest::prop_assert_eq!(round_bf16(x), half::bf16::from_f32(x).to_bits());
            }
        }
    }

    #[test]
    fn elementwise_definitions() {
        assert_eq!(relu(-1.0), 0.0);
        assert_eq!(relu(-0.0).to_bits(), 0.0f32.to_bits());
        assert_eq!(relu(2.5), 2.5);
        assert!(relu(f32::NAN).is_nan());
        assert_eq!(relu_backward(3.0, 1e-30), 3.0);
        assert_eq!(relu_backward(3.0, 0.0), 0.0);
        assert_eq!(relu_backward(3.0, f32::NAN), 0.0);
        assert_eq!(mse_grad(3.0, 1.0, 0.5).0, 1.0);
        assert_eq!(sgd(1.0, 2.0, 0.25).0, 0.5);
        // Ties to even, both ways; the largest finite f32 rounds to infinity.
        assert_eq!(round_bf16(f32::from_bits(0x3f80_8000)), 0x3f80);
        assert_eq!(round_bf16(f32::from_bits(0x3f81_8000)), 0x3f82);
        assert_eq!(round_bf16(f32::from_bits(0x3f80_8001)), 0x3f81);
        assert_eq!(round_bf16(f32::MAX), 0x7f80);
        assert_eq!(round_bf16(-0.0), 0x8000);
        assert_eq!(bf16_value(0x3f80), 1.0);
        assert_eq!(
            transpose(&[1., 2., 3., 4., 5., 6.], 2, 3),
            [1., 4., 2., 5., 3., 6.]
        );
    }

    /// A step on a tiny hand-checked case: x = [1, 2], W1 = [[1], [-1]] gives hpre = -1, so
    /// the ReLU blocks every gradient into W1; W2's gradient is a * dy = 0.
    #[test]
    fn mlp_step_on_a_tiny_case() {
        let m = Mlp {
            batch: 1,
            inputs: 2,
            hidden: 1,
            outputs: 1,
            lr: 0.5,
        };
        let (w2, w1) = mlp_step(&m, &[1.0, 2.0], &[1.0], &[1.0, -1.0], &[3.0], &[0, 1]);
        assert_eq!(w2[0].value, 3.0);
        assert_eq!(w1[0].1[0].value, 1.0);
        assert_eq!(w1[1].1[0].value, -1.0);
        // With W1 = [[1], [1]]: hpre = 3, a = 3, y = 9, dy = 2 (9 - 1) = 16, dW2 = 48,
        // da = 48, dW1 = [48, 96].
        let (w2, w1) = mlp_step(&m, &[1.0, 2.0], &[1.0], &[1.0, 1.0], &[3.0], &[0, 1]);
        assert_eq!(w2[0].value, 3.0 - 0.5 * 48.0);
        assert_eq!(w1[0].1[0].value, 1.0 - 0.5 * 48.0);
        assert_eq!(w1[1].1[0].value, 1.0 - 0.5 * 96.0);
    }

    /// Rows spread over the host's threads give the values of one plain pass over the batch
    /// (with more rows than threads, and rows that do not divide evenly).
    #[test]
    fn mlp_step_over_threads_equals_one_plain_pass() {
        let (b, d, h, o) = (37, 5, 3, 2);
        let m = Mlp {
            batch: b,
            inputs: d,
            hidden: h,
            outputs: o,
            lr: 0.25,
        };
        let f = |i: usize, s: usize| ((i * 37 + s * 11) % 17) as f32 / 8.0 - 1.0;
        let x: Vec<f32> = (0..b * d).map(|i| f(i, 1)).collect();
        let t: Vec<f32> = (0..b * o).map(|i| f(i, 2)).collect();
        let w1: Vec<f32> = (0..d * h).map(|i| f(i, 3)).collect();
        let w2: Vec<f32> = (0..h * o).map(|i| f(i, 4)).collect();
        let rows: Vec<usize> = (0..d).collect();
        let (w2n, w1n) = mlp_step(&m, &x, &t, &w1, &w2, &rows);
        // The same step, written out once.
        let mut hp = vec![0.0f64; b * h];
        for r in 0..b {
            for k in 0..d {
                for j in 0..h {
                    hp[r * h + j] += x[r * d + k] as f64 * w1[k * h + j] as f64;
                }
            }
        }
        let a: Vec<f64> = hp.iter().map(|v| v.max(0.0)).collect();
        let mut dy = vec![0.0f64; b * o];
        let scale = (2.0 / (b * o) as f32) as f64;
        for r in 0..b {
            for j in 0..o {
                let y: f64 = (0..h).map(|k| a[r * h + k] * w2[k * o + j] as f64).sum();
                dy[r * o + j] = scale * (y - t[r * o + j] as f64);
            }
        }
        for k in 0..h {
            for j in 0..o {
                let g: f64 = (0..b).map(|r| a[r * h + k] * dy[r * o + j]).sum();
                let want = w2[k * o + j] as f64 - 0.25 * g;
                assert!((w2n[k * o + j].value - want).abs() < 1e-12, "W2[{k}][{j}]");
            }
        }
        for (kr, row) in &w1n {
            for (j, got) in row.iter().enumerate() {
                let g: f64 = (0..b)
                    .map(|r| {
                        let da: f64 = (0..o).map(|q| dy[r * o + q] * w2[j * o + q] as f64).sum();
                        let dh = if hp[r * h + j] > 0.0 { da } else { 0.0 };
                        x[r * d + kr] as f64 * dh
                    })
                    .sum();
                let want = w1[kr * h + j] as f64 - 0.25 * g;
                assert!((got.value - want).abs() < 1e-12, "W1[{kr}][{j}]");
            }
        }
    }
}
