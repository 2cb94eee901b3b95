//! Launch configurations and the checks every launch makes before anything is queued: the
//! kernel's declared launch bounds, what its compiled function allows, and the device's limits.

use crate::error::{Error, Result};
use streamline_builder::manifest::BoundsInfo;

/// What the device allows one launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceLimits {
    /// Threads per block.
    pub max_threads_per_block: u32,
    /// Threads per block along x, y and z.
    pub max_block: (u32, u32, u32),
    /// Blocks along x, y and z.
    pub max_grid: (u32, u32, u32),
    /// Shared memory one block may use, static and dynamic together, once a kernel opts in.
    pub max_shared_per_block: u32,
}

/// Where and how a kernel runs: blocks of the grid, threads per block, and bytes of dynamic
/// shared memory per block. Every launch checks it against the kernel's declared bounds and the
/// device's limits before anything is queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks along x, y and z.
    pub grid: (u32, u32, u32),
    /// Threads per block along x, y and z.
    pub block: (u32, u32, u32),
    /// Dynamic shared memory per block, in bytes.
    pub shared_bytes: u32,
}

impl LaunchConfig {
    /// A grid of `grid` blocks of `block` threads, no dynamic shared memory.
    pub fn new(grid: (u32, u32, u32), block: (u32, u32, u32)) -> LaunchConfig {
        LaunchConfig {
            grid,
            block,
            shared_bytes: 0,
        }
    }

    /// One thread per element of `n` in blocks of `block` threads along x, the grid capped at
    /// the device's largest x dimension (2^31 - 1 blocks): a kernel that loops with
    /// `streamline_device::thread::grid_stride` covers every element with any grid.
    pub fn for_elements(n: u64, block: u32) -> Result<LaunchConfig> {
        if block == 0 || block > 1024 {
            return Err(Error::arg(
                "block",
                format!("{block} threads per block; allowed 1..=1024"),
            ));
        }
        let blocks = n.div_ceil(block as u64).clamp(1, i32::MAX as u64) as u32;
        Ok(LaunchConfig::new((blocks, 1, 1), (block, 1, 1)))
    }

    /// A one-dimensional grid over `items` of `block`-thread blocks taking `per_block` items
    /// each: `ceil(items / per_block)` blocks, at least one and at most `max_blocks` (the
    /// kernel strides over what the grid leaves).
    pub fn strided(items: u64, (block, per_block): (u32, u64), max_blocks: u32) -> LaunchConfig {
        let blocks = items
            .div_ceil(per_block.max(1))
            .clamp(1, max_blocks.max(1) as u64) as u32;
        LaunchConfig::new((blocks, 1, 1), (block, 1, 1))
    }

    /// This configuration with `bytes` of dynamic shared memory per block.
    pub fn with_shared(self, bytes: u32) -> LaunchConfig {
        LaunchConfig {
            shared_bytes: bytes,
            ..self
        }
    }

    /// Threads per block.
    pub fn threads(&self) -> u64 {
        self.block.0 as u64 * self.block.1 as u64 * self.block.2 as u64
    }
}

/// What a compiled function allows, as the driver reports it once the function is loaded.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FunctionLimits {
    /// Threads per block the function can run with its register count.
    pub max_threads: u32,
    /// Static shared memory of the function.
    pub static_shared: u32,
}

/// Checks `cfg` for kernel `name` against its recorded launch `bounds` (checked equal to the
/// declaration's for a kernel launched through its declaration), what its compiled function
/// allows and the device's limits; the error names the kernel and the limit.
pub(crate) fn check(
    name: &str,
    bounds: Option<BoundsInfo>,
    function: FunctionLimits,
    limits: &DeviceLimits,
    cfg: &LaunchConfig,
) -> Result<()> {
    let fail = |reason: String| {
        Err(Error::LaunchConfig {
            kernel: name.to_string(),
            reason,
        })
    };
    let l = limits;
    let (g, b) = (cfg.grid, cfg.block);
    if [g.0, g.1, g.2, b.0, b.1, b.2].contains(&0) {
        return fail(format!(
            "grid {g:?} and block {b:?} must have no zero dimension"
        ));
    }
    if b.0 > l.max_block.0 || b.1 > l.max_block.1 || b.2 > l.max_block.2 {
        return fail(format!(
            "block {b:?} exceeds the device's block dimensions {:?}",
            l.max_block
        ));
    }
    if g.0 > l.max_grid.0 || g.1 > l.max_grid.1 || g.2 > l.max_grid.2 {
        return fail(format!(
            "grid {g:?} exceeds the device's grid dimensions {:?}",
            l.max_grid
        ));
    }
    let threads = cfg.threads();
    if let Some(bounds) = bounds {
        if threads > bounds.max_threads as u64 {
            return fail(format!(
                "{threads} threads per block; it was compiled for at most {} (its launch bounds)",
                bounds.max_threads
            ));
        }
    }
    let most = function.max_threads.min(l.max_threads_per_block);
    if threads > most as u64 {
        return fail(format!(
            "{threads} threads per block; the device runs it with at most {most} (its registers and the device's limit)"
        ));
    }
    let shared = function.static_shared as u64 + cfg.shared_bytes as u64;
    if shared > l.max_shared_per_block as u64 {
        return fail(format!(
            "{} bytes of dynamic shared memory plus {} static exceed the device's {} per block",
            cfg.shared_bytes, function.static_shared, l.max_shared_per_block
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::LaunchConfig;

    #[test]
    fn strided_grids_cover_the_items_within_their_cap() {
        let blocks =
            |items, per_block, max| LaunchConfig::strided(items, (128, per_block), max).grid;
        assert_eq!(blocks(0, 128, 10), (1, 1, 1));
        assert_eq!(blocks(128, 128, 10), (1, 1, 1));
        assert_eq!(blocks(129, 128, 10), (2, 1, 1));
        assert_eq!(blocks(1 << 40, 128, 10), (10, 1, 1));
        assert_eq!(blocks(5, 0, 0), (1, 1, 1));
        assert_eq!(
            LaunchConfig::strided(1000, (256, 4096), 8).block,
            (256, 1, 1)
        );
    }
}
