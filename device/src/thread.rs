//! Where a thread is: its indices in the block and grid, the grid-stride loop, block barriers.
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

/// Block index along x.
#[inline(always)]
pub fn block_x() -> u32 {
    // SAFETY: reading a special register has no side effects; it is defined inside a kernel.
    unsafe { nvptx::_block_idx_x() }
}

/// Thread index inside the block along x and y.
#[inline(always)]
pub fn thread_xy() -> (u32, u32) {
    // SAFETY: reading special registers has no side effects; they are defined inside a kernel.
    unsafe { (nvptx::_thread_idx_x(), nvptx::_thread_idx_y()) }
}

/// [`thread_xy`] read afresh at each call: the compiler may neither reuse an earlier read nor
/// move this one, so values derived from it are recomputed where they are used instead of being
/// held in registers (or spilled) across a long loop.
#[inline(always)]
pub fn thread_xy_fresh() -> (u32, u32) {
    let (x, y): (u32, u32);
    // SAFETY: reads two special registers, which are defined inside a kernel; touches no
    // memory.
    unsafe {
        core::arch::asm!(
            "mov.u32 {x}, %tid.x;",
            "mov.u32 {y}, %tid.y;",
            x = out(reg32) x,
            y = out(reg32) y,
            options(nomem, nostack, preserves_flags)
        );
    }
    (x, y)
}

/// Block barrier: every thread of the block waits here until all have arrived, and shared
/// memory written before it is visible to all after it.
///
/// # Safety
/// Every thread of the block must reach the same sequence of barriers (no barrier inside
/// divergent control flow).
#[inline(always)]
pub unsafe fn sync_block() {
    // SAFETY: forwarded from this function's contract.
    unsafe { nvptx::_syncthreads() }
}

/// [`sync_block`] that also tells every thread whether `pred` held in any thread of the block
/// (CUDA's `__syncthreads_or`): a block-wide decision taken at a barrier the block needs anyway.
///
/// # Safety
/// As for [`sync_block`].
#[inline(always)]
pub unsafe fn sync_block_or(pred: bool) -> bool {
    let r: u32;
    // SAFETY: forwarded from this function's contract; the instruction is a barrier (the asm
    // block keeps its default memory clobber, so no shared access moves across it).
    unsafe {
        core::arch::asm!(
            "{{ .reg .pred p; setp.ne.u32 p, {v}, 0; bar.red.or.pred p, 0, p; selp.u32 {r}, 1, 0, p; }}",
            r = out(reg32) r, v = in(reg32) pred as u32,
            options(nostack, preserves_flags)
        )
    };
    r != 0
}

/// Block index along x, y and z.
#[inline(always)]
pub fn block_xyz() -> (u32, u32, u32) {
    // SAFETY: reading special registers has no side effects; they are defined inside a kernel.
    unsafe {
        (
            nvptx::_block_idx_x(),
            nvptx::_block_idx_y(),
            nvptx::_block_idx_z(),
        )
    }
}

/// Number of blocks of the grid along z.
#[inline(always)]
pub fn grid_z() -> u32 {
    // SAFETY: reading a special register has no side effects; it is defined inside a kernel.
    unsafe { nvptx::_grid_dim_z() }
}

/// Thread index inside the block along x, y and z.
#[inline(always)]
pub fn thread_xyz() -> (u32, u32, u32) {
    // SAFETY: reading special registers has no side effects; they are defined inside a kernel.
    unsafe {
        (
            nvptx::_thread_idx_x(),
            nvptx::_thread_idx_y(),
            nvptx::_thread_idx_z(),
        )
    }
}

/// Threads per block along x, y and z.
#[inline(always)]
pub fn block_dim_xyz() -> (u32, u32, u32) {
    // SAFETY: reading special registers has no side effects; they are defined inside a kernel.
    unsafe {
        (
            nvptx::_block_dim_x(),
            nvptx::_block_dim_y(),
            nvptx::_block_dim_z(),
        )
    }
}

/// Blocks of the grid along x, y and z.
#[inline(always)]
pub fn grid_dim_xyz() -> (u32, u32, u32) {
    // SAFETY: reading special registers has no side effects; they are defined inside a kernel.
    unsafe {
        (
            nvptx::_grid_dim_x(),
            nvptx::_grid_dim_y(),
            nvptx::_grid_dim_z(),
        )
    }
}

/// The indices `i < n` this thread handles when the grid's threads along x walk `[0, n)`
/// together: `global_x().0`, then steps of the grid's thread count. Any grid covers every index
/// exactly once, so the host may cap the grid.
#[inline(always)]
pub fn grid_stride(n: u64) -> GridStride {
    let (first, stride) = global_x();
    GridStride {
        next: first,
        stride,
        end: n,
    }
}

/// The iterator of [`grid_stride`].
#[derive(Clone, Copy, Debug)]
pub struct GridStride {
    next: u64,
    stride: u64,
    end: u64,
}

impl Iterator for GridStride {
    type Item = usize;

    #[inline(always)]
    fn next(&mut self) -> Option<usize> {
        if self.next >= self.end {
            return None;
        }
        let i = self.next;
        self.next += self.stride;
        Some(i as usize)
    }
}

/// Barrier `id` (1..=15; 0 is [`sync_block`]'s) for `threads` threads (a multiple of 32): the
/// warps that call it wait until `threads` threads have arrived, and their shared-memory writes
/// before it are visible to each other after it. Lets a group of warps (a warpgroup) synchronise
/// without the rest of the block.
///
/// # Safety
/// Exactly `threads` threads, whole warps, must reach each use of barrier `id`, and no other
/// barrier use with the same `id` may overlap it.
#[inline(always)]
pub unsafe fn sync_named(id: u32, threads: u32) {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        core::arch::asm!(
            "bar.sync {id}, {n};",
            id = in(reg32) id,
            n = in(reg32) threads,
            options(nostack, preserves_flags)
        )
    }
}
