//! Shared helpers of the property tests.

use std::sync::OnceLock;
use streamline::Gpu;

/// The GPU for GPU tests, or `None` (after printing why) when this machine has no usable
/// driver or device: GPU tests then skip instead of failing.
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
