//! Every launch is checked before anything is queued: against the kernel's declared launch
//! bounds, the block size its compiled function allows, and the device's block, grid and
//! shared-memory limits; the error names the kernel and the limit. GPU tests (they need the
//! loaded module), skipped without a driver.

use streamline::{Error, LaunchConfig};
use streamline_abi::heavy::HEAVY_F32;
use streamline_abi::image::ROI_ALIGN;
use streamline_tests::gpu;

fn refused<P>(kernel: streamline::Kernel<P>, cfg: LaunchConfig) -> String {
    let gpu = gpu().unwrap();
    match gpu.kernels().unwrap().check_config(kernel, &cfg) {
        Err(e @ Error::LaunchConfig { .. }) => e.to_string(),
        other => panic!("{cfg:?} for `{}` gave {other:?}", kernel.name()),
    }
}

#[test]
fn configurations_outside_the_limits_are_refused_naming_kernel_and_limit() {
    let Some(gpu) = gpu() else { return };
    let limits = gpu.info().limits;

    let e = refused(ROI_ALIGN, LaunchConfig::new((1, 1, 1), (512, 1, 1)));
    assert!(
        e.contains("`roi_align`")
            && e.contains("512 threads per block")
            && e.contains("at most 256"),
        "{e}"
    );
    let e = refused(HEAVY_F32, LaunchConfig::new((1, 1, 1), (1024, 2, 1)));
    assert!(
        e.contains("`heavy_f32`") && e.contains("2048 threads per block") && e.contains("at most"),
        "{e}"
    );
    let e = refused(
        HEAVY_F32,
        LaunchConfig::new((1, 1, 1), (1, 1, limits.max_block.2 + 1)),
    );
    assert!(e.contains("block dimensions"), "{e}");
    let e = refused(HEAVY_F32, LaunchConfig::new((0, 1, 1), (256, 1, 1)));
    assert!(e.contains("no zero dimension"), "{e}");
    let e = refused(
        HEAVY_F32,
        LaunchConfig::new((1, limits.max_grid.1 + 1, 1), (256, 1, 1)),
    );
    assert!(e.contains("grid dimensions"), "{e}");
    let e = refused(
        HEAVY_F32,
        LaunchConfig::new((1, 1, 1), (256, 1, 1)).with_shared(limits.max_shared_per_block + 1),
    );
    assert!(
        e.contains("shared memory") && e.contains("`heavy_f32`"),
        "{e}"
    );

    // The largest configurations the limits allow pass.
    let most = LaunchConfig::new((limits.max_grid.0, 1, 1), (256, 1, 1));
    gpu.kernels()
        .unwrap()
        .check_config(ROI_ALIGN, &most)
        .unwrap();
    gpu.kernels()
        .unwrap()
        .check_config(
            HEAVY_F32,
            &LaunchConfig::new((1, 1, 1), (256, 1, 1)).with_shared(limits.max_shared_per_block),
        )
        .unwrap();
}

#[test]
fn element_grids_are_checked_and_capped() {
    let e = LaunchConfig::for_elements(10, 0).unwrap_err().to_string();
    assert!(e.contains("`block`") && e.contains("1..=1024"), "{e}");
    let c = LaunchConfig::for_elements(0, 256).unwrap();
    assert_eq!(c.grid, (1, 1, 1));
    let c = LaunchConfig::for_elements(u64::MAX, 1024).unwrap();
    assert_eq!(c.grid.0, i32::MAX as u32);
    let c = LaunchConfig::for_elements(1025, 256).unwrap();
    assert_eq!((c.grid, c.block), ((5, 1, 1), (256, 1, 1)));
}
