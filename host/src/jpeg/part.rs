//! One nvJPEG back end of a [`super::JpegDecoder`]: its handle, its two decoding states used in
//! turn (each reused only once the decode that last used it has finished) and its stream.

use super::headers::OwnedHandle;
use super::library::{check, Image, Nvjpeg, State, BACKEND_HARDWARE, CSS_444, OUTPUT_RGBI};
use crate::error::{DriverContext, Error, Result};
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaContext, CudaEvent, CudaStream};
use std::ffi::c_int;
use std::sync::Arc;

/// One of a back end's decoding states, with the event that marks the end of the last decode
/// that used it (none before its first).
struct Turn {
    state: State,
    done: CudaEvent,
    used: bool,
}

/// One nvJPEG back end: its handle, its two decoding states (used in turn) and its stream.
pub(super) struct Part {
    pub(super) lib: &'static Nvjpeg,
    /// Whether this is the hardware decoders' back end.
    pub(super) hardware: bool,
    pub(super) handle: Arc<OwnedHandle>,
    turns: Vec<Turn>,
    next: usize,
    pub(super) stream: Arc<CudaStream>,
}

/// Decoding states per back end.
const TURNS: usize = 2;

impl Part {
    /// A back end whose calls and stream are in `ctx` (bound to the calling thread).
    pub(super) fn new(
        lib: &'static Nvjpeg,
        ctx: &Arc<CudaContext>,
        backend: c_int,
    ) -> Result<Part> {
        let (_, greatest) = cudarc::driver::result::stream::get_priority_range()
            .op("cuCtxGetStreamPriorityRange")?;
        let stream = ctx
            .new_stream_with_priority(greatest)
            .op("cuStreamCreateWithPriority")?;
        let mut handle = std::ptr::null_mut();
        // SAFETY: null allocators select nvJPEG's own (the CUDA runtime's, in the context
        // current on this thread, which the caller bound); flags must be 0.
        check("nvjpegCreateEx", unsafe {
            (lib.create_ex)(
                backend,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
                &mut handle,
            )
        })?;
        let mut part = Part {
            lib,
            hardware: backend == BACKEND_HARDWARE,
            handle: Arc::new(OwnedHandle {
                lib,
                raw: handle,
                ctx: ctx.clone(),
            }),
            turns: Vec::with_capacity(TURNS),
            next: 0,
            stream,
        };
        for _ in 0..TURNS {
            let done = ctx
                .new_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING))
                .op("cuEventCreate")?;
            let mut state = std::ptr::null_mut();
            // SAFETY: `handle` is live; the output is written on success and freed by `Drop`.
            check("nvjpegJpegStateCreate", unsafe {
                (lib.state_create)(part.handle.raw, &mut state)
            })?;
            part.turns.push(Turn {
                state,
                done,
                used: false,
            });
            if backend == BACKEND_HARDWARE {
                if let Some(pre) = lib.batched_pre_allocate {
                    // Hints of one 1 x 1 image: what matters is that the state then takes its
                    // buffers from a pool that grows and is kept, instead of allocating (and
                    // freeing, which waits for the whole device) as batches change size.
                    // SAFETY: the handle and state are this part's; the format values are
                    // `nvjpeg.h`'s.
                    check("nvjpegDecodeBatchedPreAllocate", unsafe {
                        pre(part.handle.raw, state, 1, 1, 1, CSS_444, OUTPUT_RGBI)
                    })?;
                }
            }
        }
        Ok(part)
    }

    /// Decodes `files` into `images` on this part's stream, with the state whose turn it is
    /// (once the decode that last used it has finished).
    ///
    /// # Safety
    /// Each image's plane must address `height x pitch` writable bytes on this device, not
    /// used by other work until this part's stream has passed the decode.
    pub(super) unsafe fn decode(&mut self, files: &[&[u8]], images: &mut [Image]) -> Result<()> {
        if files.is_empty() {
            return Ok(());
        }
        let lib = self.lib;
        let n = c_int::try_from(files.len())
            .map_err(|_| Error::arg("files", format!("{} images in one batch", files.len())))?;
        let turn = &mut self.turns[self.next];
        self.next = (self.next + 1) % TURNS;
        if turn.used {
            turn.done.synchronize().op("cuEventSynchronize")?;
        }
        // nvJPEG works in the context current on the calling thread: its stream's.
        self.stream
            .context()
            .bind_to_thread()
            .op("cuCtxSetCurrent")?;
        // SAFETY: the handle and state are this part's, the state idle (waited for above); the
        // batch size is `n`.
        check("nvjpegDecodeBatchedInitialize", unsafe {
            (lib.batched_initialize)(self.handle.raw, turn.state, n, 1, OUTPUT_RGBI)
        })?;
        let data: Vec<*const u8> = files.iter().map(|f| f.as_ptr()).collect();
        let lengths: Vec<usize> = files.iter().map(|f| f.len()).collect();
        // SAFETY: `n` inputs readable for their lengths (nvJPEG copies what it needs before
        // returning), `n` destinations by this function's contract, on this part's stream.
        let decoded = check("nvjpegDecodeBatched", unsafe {
            (lib.decode_batched)(
                self.handle.raw,
                turn.state,
                data.as_ptr(),
                lengths.as_ptr(),
                images.as_mut_ptr(),
                self.stream.cu_stream(),
            )
        });
        // Recorded even after a failure: whatever the decode queued must end before the state
        // is used again.
        turn.done.record(&self.stream).op("cuEventRecord")?;
        turn.used = true;
        decoded
    }
}

impl Drop for Part {
    fn drop(&mut self) {
        let lib = self.lib;
        // Work queued on the part's stream may still read its state.
        let _ = self.stream.synchronize();
        // SAFETY: each state was made by this part's handle (alive until the last of its users
        // goes) and is destroyed once.
        unsafe {
            for t in &self.turns {
                (lib.state_destroy)(t.state);
            }
        }
    }
}
