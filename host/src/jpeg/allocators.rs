//! The memory nvJPEG takes for itself, given through its stream-ordered allocators
//! (`nvjpegCreateExV2`): device memory allocated and freed in order on the stream nvJPEG names,
//! and page-locked host memory kept in a pool for the handle's life, a block reused once the
//! stream it was freed on has passed the free.
//!
//! Why: with its default allocators, nvJPEG frees through `cudaFree` and `cudaFreeHost`, which
//! wait for the whole device, so a decode waits for every kernel in flight on the GPU (another
//! stream's training step included) and cannot overlap it.

use cudarc::driver::result;
use cudarc::driver::sys::{CUevent, CUevent_flags, CUstream};
use std::ffi::{c_int, c_void};
use std::sync::Mutex;

/// `tDevMallocV2` / `tPinnedMallocV2`: `(ctx, &ptr, size, stream)`, 0 on success.
type Malloc = unsafe extern "C" fn(*mut c_void, *mut *mut c_void, usize, CUstream) -> c_int;
/// `tDevFreeV2` / `tPinnedFreeV2`: `(ctx, ptr, size, stream)`, 0 on success.
type Free = unsafe extern "C" fn(*mut c_void, *mut c_void, usize, CUstream) -> c_int;

/// `nvjpegDevAllocatorV2_t` and `nvjpegPinnedAllocatorV2_t` (the same three fields).
#[repr(C)]
pub(crate) struct AllocatorV2 {
    malloc: Malloc,
    free: Free,
    ctx: *mut c_void,
}

/// A page-locked block nvJPEG gave back: reusable once `freed` (recorded on the stream it was
/// freed on) has completed.
struct Block {
    ptr: *mut c_void,
    size: usize,
    freed: CUevent,
}

/// The page-locked blocks of one handle: every block made, with its size (freed when the
/// handle is gone), and those given back.
#[derive(Default)]
struct Pool {
    made: Vec<(*mut c_void, usize)>,
    idle: Vec<Block>,
}

/// The allocators of one nvJPEG handle. Must outlive the handle.
pub(crate) struct Allocators {
    pub(crate) device: AllocatorV2,
    pub(crate) pinned: AllocatorV2,
    pool: Box<Mutex<Pool>>,
}

// SAFETY: the raw pointers are the pool's own blocks and events, touched only under its mutex
// (the callbacks) or by `Drop` (no handle left to call them).
unsafe impl Send for Allocators {}

impl Allocators {
    pub(crate) fn new() -> Allocators {
        let pool = Box::new(Mutex::new(Pool::default()));
        let ctx = &*pool as *const Mutex<Pool> as *mut c_void;
        Allocators {
            device: AllocatorV2 {
                malloc: device_malloc,
                free: device_free,
                ctx: std::ptr::null_mut(),
            },
            pinned: AllocatorV2 {
                malloc: pinned_malloc,
                free: pinned_free,
                ctx,
            },
            pool,
        }
    }
}

impl Drop for Allocators {
    fn drop(&mut self) {
        let pool = self.pool.get_mut().unwrap_or_else(|e| e.into_inner());
        for b in pool.idle.drain(..) {
            // SAFETY: the pool's own event; waiting for it ends every use of its block.
            unsafe {
                let _ = result::event::synchronize(b.freed);
                let _ = result::event::destroy(b.freed);
            }
        }
        for (p, _) in pool.made.drain(..) {
            // SAFETY: made by `malloc_host`; the handle is gone, and every block given back
            // has had its event waited for above (a block never given back was in use by a
            // handle that no longer exists).
            unsafe {
                let _ = result::free_host(p);
            }
        }
    }
}

/// Device memory in order on `stream`.
unsafe extern "C" fn device_malloc(
    _ctx: *mut c_void,
    ptr: *mut *mut c_void,
    size: usize,
    stream: CUstream,
) -> c_int {
    // SAFETY: nvJPEG calls with its stream (or the null stream) in the context current on
    // its thread, and a place for the pointer.
    match unsafe { result::malloc_async(stream, size.max(1)) } {
        Ok(p) => {
            // SAFETY: `ptr` is nvJPEG's out-parameter.
            unsafe { *ptr = p as *mut c_void };
            0
        }
        Err(_) => 2,
    }
}

/// Device memory freed in order on `stream`.
unsafe extern "C" fn device_free(
    _ctx: *mut c_void,
    ptr: *mut c_void,
    _size: usize,
    stream: CUstream,
) -> c_int {
    if ptr.is_null() {
        return 0;
    }
    // SAFETY: `ptr` came from `device_malloc`; nvJPEG's uses of it are ordered before this
    // point of `stream`.
    match unsafe { result::free_async(ptr as u64, stream) } {
        Ok(()) => 0,
        Err(_) => 1,
    }
}

/// A page-locked block of at least `size` bytes: the smallest idle one whose free has passed,
/// or a new one.
unsafe extern "C" fn pinned_malloc(
    ctx: *mut c_void,
    ptr: *mut *mut c_void,
    size: usize,
    _stream: CUstream,
) -> c_int {
    // SAFETY: `ctx` is the pool `Allocators::new` gave nvJPEG, alive while the handle is.
    let pool = unsafe { &*(ctx as *const Mutex<Pool>) };
    let mut pool = pool.lock().unwrap_or_else(|e| e.into_inner());
    let ready = |b: &Block| {
        // SAFETY: the pool's own event.
        b.size >= size && unsafe { result::event::query(b.freed) }.is_ok()
    };
    let best = (0..pool.idle.len())
        .filter(|&i| ready(&pool.idle[i]))
        .min_by_key(|&i| pool.idle[i].size);
    let p = match best {
        Some(i) => {
            let b = pool.idle.swap_remove(i);
            // SAFETY: completed (queried above), so destroying it waits for nothing.
            unsafe {
                let _ = result::event::destroy(b.freed);
            }
            b.ptr
        }
        None => {
            // SAFETY: a plain page-locked allocation, freed by `Allocators`' `Drop`.
            match unsafe { result::malloc_host(size.max(1), 0) } {
                Ok(p) => {
                    pool.made.push((p, size.max(1)));
                    p
                }
                Err(_) => return 2,
            }
        }
    };
    // SAFETY: `ptr` is nvJPEG's out-parameter.
    unsafe { *ptr = p };
    0
}

/// A page-locked block given back: reusable once `stream` has passed this point.
unsafe extern "C" fn pinned_free(
    ctx: *mut c_void,
    ptr: *mut c_void,
    _size: usize,
    stream: CUstream,
) -> c_int {
    if ptr.is_null() {
        return 0;
    }
    let Ok(freed) = result::event::create(CUevent_flags::CU_EVENT_DISABLE_TIMING) else {
        return 1;
    };
    // SAFETY: a new event, recorded on nvJPEG's stream (or the null stream).
    if unsafe { result::event::record(freed, stream) }.is_err() {
        // SAFETY: never recorded.
        unsafe {
            let _ = result::event::destroy(freed);
        }
        return 1;
    }
    // SAFETY: `ctx` is the pool, as in `pinned_malloc`.
    let pool = unsafe { &*(ctx as *const Mutex<Pool>) };
    let mut pool = pool.lock().unwrap_or_else(|e| e.into_inner());
    // The block's own size (a reused block may be larger than what was asked for it).
    let Some(&(_, size)) = pool.made.iter().find(|(p, _)| *p == ptr) else {
        // SAFETY: never recorded anywhere else.
        unsafe {
            let _ = result::event::destroy(freed);
        }
        return 1;
    };
    pool.idle.push(Block { ptr, size, freed });
    0
}
