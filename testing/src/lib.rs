//! Testing GPU kernels, ours and yours, against the CPU: a dev-dependency beside `streamline`, so
//! that a kernel crate's own build does not compile proptest and rayon.
//!
//! - Property-test helpers (this module): the GPU or a clean skip, poisoned outputs with guard
//!   zones, every-element-written checks, and comparisons against a CPU reference in ULPs or
//!   relative error.
//! - [`reference`]: independent CPU references of Streamline's own kernels and the error bounds
//!   the kernels must meet.
//! - [`data`]: random inputs and output poisoning for tests and benchmarks.
//!
//! A kernel test reads: poison the output ([`poisoned`]), launch, copy back, check the guards
//! and that every element was written ([`check_written`]), compare every element with the f64
//! reference under the bound the kernel's error analysis gives ([`compare`]).
//!
//! [`reference`]: mod@reference

pub mod data;
pub mod reference;

use crate::data::POISON_F32;
use std::sync::OnceLock;
use streamline::Gpu;

/// The GPU for GPU tests, or `None` after printing one line saying why (no driver, no
/// device): GPU tests then skip instead of failing.
pub fn gpu() -> Option<&'static Gpu> {
    static GPU: OnceLock<Result<Gpu, String>> = OnceLock::new();
    match GPU.get_or_init(|| Gpu::new(0, None).map_err(|e| e.to_string())) {
        Ok(g) => Some(g),
        Err(e) => {
            eprintln!("skipping GPU test: {e}");
            None
        }
    }
}

/// Proptest configuration for GPU properties: `PROPTEST_CASES` overrides the case count.
pub fn gpu_config(default_cases: u32) -> proptest::test_runner::Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_cases);
    proptest::test_runner::Config {
        cases,
        failure_persistence: None,
        ..Default::default()
    }
}

/// Runs a GPU property over `strategy`, or skips it (without generating any input) when no GPU
/// is present. A failing case panics with proptest's minimal counterexample.
pub fn gpu_property<S: proptest::strategy::Strategy>(
    default_cases: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), proptest::test_runner::TestCaseError>,
) {
    if gpu().is_none() {
        return;
    }
    let mut runner = proptest::test_runner::TestRunner::new(gpu_config(default_cases));
    if let Err(e) = runner.run(&strategy, test) {
        panic!("{e}");
    }
}

/// `guard + len + guard` f32 holding the poison pattern ([`POISON_F32`], a NaN no arithmetic
/// produces): upload it as the output, let the kernel write the middle `len`.
pub fn poisoned(len: usize, guard: usize) -> Vec<f32> {
    vec![f32::from_bits(POISON_F32); len + 2 * guard]
}

/// Whether `v` still holds the poison pattern.
pub fn is_poison(v: f32) -> bool {
    v.to_bits() == POISON_F32
}

/// Checks a buffer made by [`poisoned`] after the kernel ran: both guard zones untouched and
/// every element between them written. Returns the written elements.
pub fn check_written(buf: &[f32], guard: usize) -> Result<&[f32], String> {
    if buf.len() < 2 * guard {
        return Err(format!(
            "buffer of {} elements is shorter than its two guards of {guard}",
            buf.len()
        ));
    }
    let view = &buf[guard..buf.len() - guard];
    if let Some(i) = buf[..guard]
        .iter()
        .chain(&buf[buf.len() - guard..])
        .position(|v| !is_poison(*v))
    {
        return Err(format!(
            "the kernel wrote outside its output: guard element {i} changed"
        ));
    }
    let unwritten = view.iter().filter(|v| is_poison(**v)).count();
    if unwritten > 0 {
        let first = view.iter().position(|v| is_poison(*v)).unwrap_or(0);
        return Err(format!(
            "{unwritten} of {} outputs unwritten (first at {first})",
            view.len()
        ));
    }
    Ok(view)
}

/// Distance between two f32 in units in the last place: how many representable f32 lie
/// between them (0 for equal values, `+0` and `-0` included; `u32::MAX` if either is NaN).
pub fn ulps(a: f32, b: f32) -> u32 {
    if a.is_nan() || b.is_nan() {
        return u32::MAX;
    }
    // Map the sign-magnitude bit patterns onto one monotonic integer line.
    let key = |v: f32| {
        let bits = v.to_bits() as i64;
        if bits & 0x8000_0000 != 0 {
            -(bits & 0x7fff_ffff)
        } else {
            bits
        }
    };
    (key(a) - key(b)).unsigned_abs().min(u32::MAX as u64) as u32
}

/// How far a GPU result may be from the exact (f64) reference value `want`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Tolerance {
    /// At most this many f32 ULPs from `want` rounded to f32.
    Ulps(u32),
    /// `|got - want| <= abs + rel * |want|`.
    Relative {
        /// Relative part.
        rel: f64,
        /// Absolute part (for values near zero).
        abs: f64,
    },
}

impl Tolerance {
    /// Whether `got` is within this tolerance of `want`.
    pub fn accepts(&self, got: f32, want: f64) -> bool {
        match *self {
            Tolerance::Ulps(n) => (got.is_nan() && want.is_nan()) || ulps(got, want as f32) <= n,
            Tolerance::Relative { rel, abs } => {
                (got.is_nan() && want.is_nan())
                    || (got as f64 - want).abs() <= abs + rel * want.abs()
                    || (got.is_infinite() && got as f64 == want)
            }
        }
    }
}

/// Compares every element of `got` with the reference `want` under `tol`; the error names the
/// number of failures and the first one.
pub fn compare(got: &[f32], want: &[f64], tol: Tolerance) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!(
            "{} results against {} reference values",
            got.len(),
            want.len()
        ));
    }
    let mut failures = 0usize;
    let mut first = None;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        if !tol.accepts(g, w) {
            failures += 1;
            first.get_or_insert((i, g, w));
        }
    }
    match first {
        None => Ok(()),
        Some((i, g, w)) => Err(format!(
            "{failures} of {} outside {tol:?}; first at {i}: got {g:e}, want {w:e} ({} ulp)",
            got.len(),
            ulps(g, w as f32)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ulps_count_representable_steps() {
        assert_eq!(ulps(1.0, 1.0), 0);
        assert_eq!(ulps(0.0, -0.0), 0);
        assert_eq!(ulps(1.0, f32::from_bits(1.0f32.to_bits() + 3)), 3);
        assert_eq!(ulps(-f32::MIN_POSITIVE, f32::MIN_POSITIVE), 2 * 0x0080_0000);
        assert_eq!(ulps(f32::NAN, 1.0), u32::MAX);
    }

    #[test]
    fn written_checks_find_guards_and_gaps() {
        let mut b = poisoned(4, 2);
        assert!(check_written(&b, 2)
            .unwrap_err()
            .contains("4 of 4 outputs unwritten"));
        b[2..6].copy_from_slice(&[1.0, 2.0, 3.0, 4.0]);
        assert_eq!(check_written(&b, 2).unwrap(), &[1.0, 2.0, 3.0, 4.0]);
        b[7] = 0.0;
        assert!(check_written(&b, 2).unwrap_err().contains("guard"));
    }

    #[test]
    fn compare_reports_the_first_failure() {
        let want = [1.0f64, 2.0, 3.0];
        compare(&[1.0, 2.0, 3.0], &want, Tolerance::Ulps(0)).unwrap();
        let e = compare(&[1.0, 2.5, 3.5], &want, Tolerance::Ulps(1)).unwrap_err();
        assert!(e.starts_with("2 of 3") && e.contains("first at 1"), "{e}");
        let rel = Tolerance::Relative { rel: 0.2, abs: 0.0 };
        compare(&[1.1, 2.2, 3.3], &want, rel).unwrap();
    }
}
