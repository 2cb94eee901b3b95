//! Thread indexing helpers.
use core::arch::nvptx;

/// Global index of this thread along x and the number of threads in the grid along x.
#[inline(always)]
pub fn global_x() -> (u64, u64) {
    // SAFETY: reading the special registers has no side effects; they are always defined
    // inside a kernel.
    unsafe {
        let bid = nvptx::_block_idx_x() as u64;
        let bdim = nvptx::_block_dim_x() as u64;
        let tid = nvptx::_thread_idx_x() as u64;
        let gdim = nvptx::_grid_dim_x() as u64;
        (bid * bdim + tid, bdim * gdim)
    }
}
