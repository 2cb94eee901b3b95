//! Device memory owned by another library (a PyTorch tensor, a CuPy array, any object with
//! `__cuda_array_interface__`): Streamline's launchers take it like one of their own buffers,
//! while its owner keeps the allocation and orders its uses on its streams.

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, DeviceSlice, SyncOnDrop};
use std::marker::PhantomData;
use std::sync::Arc;

/// `len` elements of `T` at a device address that another library allocated.
///
/// No events are recorded for it: work on it is ordered by the stream it is used on, as the
/// owner's own operations are (PyTorch's current stream, `wait_stream`, `record_stream`).
pub struct External<T> {
    ptr: CUdeviceptr,
    len: usize,
    stream: Arc<CudaStream>,
    _elem: PhantomData<fn() -> T>,
}

impl<T> External<T> {
    /// Wraps `len` elements of `T` at `ptr`, used on `stream`.
    ///
    /// # Safety
    /// `ptr` must address `len` elements of `T` in `stream`'s context, and stay allocated
    /// until the work queued with it on `stream` has completed; any use of it on other streams
    /// must be ordered with `stream` by the caller (or the memory's owner).
    pub unsafe fn new(ptr: CUdeviceptr, len: usize, stream: &Arc<CudaStream>) -> External<T> {
        External {
            ptr,
            len,
            stream: stream.clone(),
            _elem: PhantomData,
        }
    }

    /// The device address.
    pub fn ptr(&self) -> CUdeviceptr {
        self.ptr
    }
}

impl<T> DeviceSlice<T> for External<T> {
    fn len(&self) -> usize {
        self.len
    }

    fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }
}

impl<T> DevicePtr<T> for External<T> {
    fn device_ptr<'a>(&'a self, _stream: &'a CudaStream) -> (CUdeviceptr, SyncOnDrop<'a>) {
        (self.ptr, SyncOnDrop::Sync(None))
    }
}

impl<T> DevicePtrMut<T> for External<T> {
    fn device_ptr_mut<'a>(&'a mut self, _stream: &'a CudaStream) -> (CUdeviceptr, SyncOnDrop<'a>) {
        (self.ptr, SyncOnDrop::Sync(None))
    }
}
