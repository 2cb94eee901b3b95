//! Device buffers and their views.

use super::{byte_len, check_range, d2h, h2d};
use crate::engine::pool::StreamPool;
use crate::engine::tracking::{Allocation, Events, Kind};
use crate::error::{DriverContext, Result};
use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, DeviceRepr, DeviceSlice, SyncOnDrop};
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::Arc;

/// An array of `T` in device memory, allocated from a [`StreamPool`], whose accesses on the
/// pool's streams are ordered by events (see the module docs).
pub struct DeviceBuffer<T> {
    alloc: Arc<Allocation>,
    ptr: u64,
    len: usize,
    owner: Arc<CudaStream>,
    _t: PhantomData<T>,
}

impl<T: bytemuck::Pod + DeviceRepr> DeviceBuffer<T> {
    /// `len` zeros, allocated (and zeroed) in order on pool stream `stream`.
    pub fn zeros(pool: &StreamPool, stream: usize, len: usize) -> Result<Self> {
        let mut b = Self::alloc(pool, stream, len)?;
        let s = pool.stream(stream)?.clone();
        b.fill_zeros(&s)?;
        Ok(b)
    }

    /// A copy of `data`, allocated and copied in order on pool stream `stream`.
    pub fn from_slice(pool: &StreamPool, stream: usize, data: &[T]) -> Result<Self> {
        let mut b = Self::alloc(pool, stream, data.len())?;
        let s = pool.stream(stream)?.clone();
        h2d(&s, data, &mut b)?;
        Ok(b)
    }

    fn alloc(pool: &StreamPool, stream: usize, len: usize) -> Result<Self> {
        let owner = pool.stream(stream)?.clone();
        let shared = pool.shared();
        // Never zero bytes: the driver refuses empty allocations.
        let bytes = byte_len::<T>(len)?.max(1);
        let events = Events::new(shared)?;
        shared.ctx.bind_to_thread().op("cuCtxSetCurrent")?;
        let stream_ordered = shared.ctx.has_async_alloc();
        let ptr = if stream_ordered {
            // SAFETY: a plain allocation on a live stream of this context.
            unsafe { cudarc::driver::result::malloc_async(owner.cu_stream(), bytes) }
                .op("cuMemAllocAsync")?
        } else {
            // SAFETY: a plain allocation in the current context.
            unsafe { cudarc::driver::result::malloc_sync(bytes) }.op("cuMemAlloc")?
        };
        let alloc = Arc::new(Allocation::new(
            shared,
            events,
            ptr,
            bytes,
            Kind::Device {
                owner: owner.clone(),
                stream_ordered,
            },
        ));
        if stream_ordered {
            // The allocation is ordered on the owner stream: later users wait for it as for a
            // write there.
            let g = alloc.access(&owner, true);
            drop(g);
        }
        Ok(DeviceBuffer {
            ptr: alloc.ptr,
            alloc,
            len,
            owner,
            _t: PhantomData,
        })
    }

    /// Sets every byte to zero, on `stream`.
    pub fn fill_zeros(&mut self, stream: &Arc<CudaStream>) -> Result<()> {
        let bytes = self.len * std::mem::size_of::<T>();
        if bytes == 0 {
            return Ok(());
        }
        stream.context().bind_to_thread().op("cuCtxSetCurrent")?;
        let (ptr, _record) = self.device_ptr_mut(stream);
        // SAFETY: `ptr` addresses `bytes` bytes of this allocation, and the guard orders the
        // memset after the accesses it must follow and records it for later ones.
        unsafe { cudarc::driver::result::memset_d8_async(ptr, 0, bytes, stream.cu_stream()) }
            .op("cuMemsetD8Async")
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A read-only view of elements `range`.
    pub fn view(&self, range: Range<usize>) -> Result<DeviceView<'_, T>> {
        check_range(&range, self.len)?;
        Ok(DeviceView {
            alloc: &self.alloc,
            owner: &self.owner,
            ptr: self.alloc.ptr + (range.start * std::mem::size_of::<T>()) as u64,
            len: range.end - range.start,
            _t: PhantomData,
        })
    }

    /// A writable view of elements `range`.
    pub fn view_mut(&mut self, range: Range<usize>) -> Result<DeviceViewMut<'_, T>> {
        check_range(&range, self.len)?;
        Ok(DeviceViewMut {
            alloc: &self.alloc,
            owner: &self.owner,
            ptr: self.alloc.ptr + (range.start * std::mem::size_of::<T>()) as u64,
            len: range.end - range.start,
            _t: PhantomData,
        })
    }

    /// Copies the whole buffer to a new host vector, on `stream`, and waits for it.
    pub fn to_vec(&self, stream: &Arc<CudaStream>) -> Result<Vec<T>> {
        let mut v = vec![T::zeroed(); self.len];
        d2h(stream, self, &mut v)?;
        stream.synchronize().op("cuStreamSynchronize")?;
        Ok(v)
    }

    /// Size in bytes of the allocation.
    pub fn bytes(&self) -> usize {
        self.alloc.bytes
    }
}

/// A read-only view into a [`DeviceBuffer`].
pub struct DeviceView<'a, T> {
    alloc: &'a Arc<Allocation>,
    owner: &'a Arc<CudaStream>,
    ptr: u64,
    len: usize,
    _t: PhantomData<&'a T>,
}

/// A writable view into a [`DeviceBuffer`].
pub struct DeviceViewMut<'a, T> {
    alloc: &'a Arc<Allocation>,
    owner: &'a Arc<CudaStream>,
    ptr: u64,
    len: usize,
    _t: PhantomData<&'a mut T>,
}

macro_rules! device_slice {
    ($ty:ty, $($lt:lifetime)?) => {
        impl<$($lt,)? T> DeviceSlice<T> for $ty {
            fn len(&self) -> usize {
                self.len
            }
            fn stream(&self) -> &Arc<CudaStream> {
                &self.owner
            }
        }
        impl<$($lt,)? T> DevicePtr<T> for $ty {
            fn device_ptr<'b>(&'b self, stream: &'b CudaStream) -> (CUdeviceptr, SyncOnDrop<'b>) {
                (self.ptr, self.alloc.access(stream, false))
            }
        }
    };
}

device_slice!(DeviceBuffer<T>,);
device_slice!(DeviceView<'a, T>, 'a);
device_slice!(DeviceViewMut<'a, T>, 'a);

impl<T> DevicePtrMut<T> for DeviceBuffer<T> {
    fn device_ptr_mut<'b>(&'b mut self, stream: &'b CudaStream) -> (CUdeviceptr, SyncOnDrop<'b>) {
        (self.ptr, self.alloc.access(stream, true))
    }
}

impl<T> DevicePtrMut<T> for DeviceViewMut<'_, T> {
    fn device_ptr_mut<'b>(&'b mut self, stream: &'b CudaStream) -> (CUdeviceptr, SyncOnDrop<'b>) {
        (self.ptr, self.alloc.access(stream, true))
    }
}
