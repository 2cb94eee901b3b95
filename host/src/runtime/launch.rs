//! Launching a loaded kernel: by its typed declaration ([`Module::launch`]), through a prepared
//! launch whose buffers the engine orders ([`Module::prepare`]), or by name with raw parameter
//! bytes for callers without the declaration ([`Module::launch_bytes`]). All three check the
//! parameters and the configuration first and end in one driver launch.

use super::config::check;
use super::module::{Loaded, Module};
use super::LaunchConfig;
use crate::error::{DriverContext, Error, Result};
use cudarc::driver::sys::CUfunction_attribute as FnAttr;
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, DeviceRepr, PushKernelArg, SyncOnDrop};
use streamline_builder::manifest::EntryInfo;
use streamline_device::{DevPtr, DevPtrMut, Kernel};

/// Wraps a kernel parameter struct so it can be passed by value.
#[repr(transparent)]
struct ByValue<P>(P);
// SAFETY: `P: Pod` is plain old data with no padding or pointers to host memory, so its bytes
// are exactly what the kernel's `#[repr(C)]` parameter expects (its size and alignment are
// checked against the kernel's parameter before every launch).
unsafe impl<P: bytemuck::Pod> DeviceRepr for ByValue<P> {}

/// Most bytes of a parameter struct [`Module::launch_bytes`] passes (the driver's classic
/// limit for a kernel's parameters).
const MAX_PARAM_BYTES: usize = 4096;

/// A parameter struct's bytes, at the start of 8-byte-aligned storage (see
/// [`Module::launch_bytes`]).
#[repr(C, align(8))]
struct RawParams([u8; MAX_PARAM_BYTES]);
// SAFETY: cudarc passes the driver a pointer to the argument, from which the driver copies the
// kernel parameter's size; the struct's bytes sit at that address (checked against the
// parameter's size before launching).
unsafe impl DeviceRepr for RawParams {}

impl Module {
    /// Launches `kernel` with its one by-value parameter struct on `stream`, after
    /// [`Module::check_config`]. Dynamic shared memory above the default 48 KiB window is
    /// opted into for the function first.
    ///
    /// This orders nothing by itself: take device addresses for `params` through
    /// [`Module::prepare`] (or hold cudarc's `device_ptr` guards across the call) so the launch
    /// waits for earlier writers of its inputs and later users wait for it.
    ///
    /// # Safety
    /// Every device address inside `params` must be valid for the accesses the kernel makes
    /// with those parameters and this configuration, for as long as the launch runs on
    /// `stream`, and no other stream may access the written memory concurrently; the kernel
    /// must not touch shared memory beyond `cfg.shared_bytes`.
    pub unsafe fn launch<P: bytemuck::Pod>(
        &self,
        stream: &CudaStream,
        kernel: Kernel<P>,
        cfg: LaunchConfig,
        params: P,
    ) -> Result<()> {
        let (entry, loaded) = self.loaded(kernel)?;
        // SAFETY: forwarded from this function's contract; the entry's parameter layout is
        // `P`'s (checked by `loaded`).
        unsafe { self.launch_loaded(stream, entry, loaded, cfg, &ByValue(params)) }
    }

    /// Launches the kernel named `name` with `params`, the bytes of its one by-value parameter
    /// struct (a `ctypes.Structure` from Python, say), after checking their size, and `align`
    /// if given, against the parameter the kernel declares, and `cfg` as
    /// [`Module::check_config`] does. For callers without the kernel's Rust declaration; with
    /// it, use [`Module::launch`].
    ///
    /// # Safety
    /// As for [`Module::launch`]: `params` must be a valid value of the kernel's parameter
    /// struct, whose device addresses are valid for the accesses the kernel makes.
    pub unsafe fn launch_bytes(
        &self,
        stream: &CudaStream,
        name: &str,
        cfg: LaunchConfig,
        params: &[u8],
        align: Option<usize>,
    ) -> Result<()> {
        let i = self.index_of(name).ok_or_else(|| {
            let names: Vec<&str> = self
                .image
                .manifest
                .kernels
                .iter()
                .map(|k| k.name.as_str())
                .collect();
            Error::arg(
                "name",
                format!(
                    "no kernel `{name}` in {}; it has {names:?}",
                    self.image.origin
                ),
            )
        })?;
        let entry = self.entry_at(i);
        let [want] = entry.params.as_slice() else {
            return Err(Error::arg(
                "params",
                format!(
                    "kernel `{name}` takes {:?}; Streamline kernels take one parameter struct",
                    entry.params
                ),
            ));
        };
        if params.len() != want.size || align.is_some_and(|a| a != want.align) {
            return Err(Error::arg(
                "params",
                format!(
                    "{} bytes{} but kernel `{name}` takes a struct of {} bytes aligned to {}",
                    params.len(),
                    align
                        .map(|a| format!(" aligned to {a}"))
                        .unwrap_or_default(),
                    want.size,
                    want.align
                ),
            ));
        }
        if params.len() > MAX_PARAM_BYTES {
            return Err(Error::arg(
                "params",
                format!(
                    "{} bytes; at most {MAX_PARAM_BYTES} can be passed",
                    params.len()
                ),
            ));
        }
        let (entry, loaded) = self.loaded_at(i);
        let mut raw = RawParams([0; MAX_PARAM_BYTES]);
        raw.0[..params.len()].copy_from_slice(params);
        // SAFETY: the size (and alignment, if given) equal the kernel parameter's (checked
        // above); the caller guarantees the bytes are a valid parameter value.
        unsafe { self.launch_loaded(stream, entry, loaded, cfg, &raw) }
    }

    /// Queues `loaded` with the parameter `arg` after checking `cfg`.
    ///
    /// # Safety
    /// `arg`'s kernel-parameter bytes must be a valid value of `entry`'s parameter (its size
    /// and layout), with device addresses valid for the launch, as for [`Module::launch`].
    unsafe fn launch_loaded<A: DeviceRepr>(
        &self,
        stream: &CudaStream,
        entry: &EntryInfo,
        loaded: &Loaded,
        cfg: LaunchConfig,
        arg: &A,
    ) -> Result<()> {
        const DEFAULT_WINDOW: u32 = 48 * 1024;
        check(&entry.name, entry.bounds, loaded.limits, &self.limits, &cfg)?;
        let function = &loaded.function;
        if cfg.shared_bytes > DEFAULT_WINDOW {
            function
                .set_attribute(
                    FnAttr::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    cfg.shared_bytes as i32,
                )
                .op("cuFuncSetAttribute")?;
        }
        let driver_cfg = cudarc::driver::LaunchConfig {
            grid_dim: cfg.grid,
            block_dim: cfg.block,
            shared_mem_bytes: cfg.shared_bytes,
        };
        let mut builder = stream.launch_builder(function);
        builder.arg(arg);
        // SAFETY: the caller guarantees the parameter matches the kernel and the addresses
        // inside are valid for this launch.
        unsafe { builder.launch(driver_cfg) }
            .map(|_| ())
            .map_err(|source| Error::Launch {
                kernel: entry.name.clone(),
                grid: cfg.grid,
                block: cfg.block,
                source,
            })
    }

    /// A launch of `kernel` on `stream` whose buffers are ordered by the engine: each buffer
    /// passed to [`Launch::read`] or [`Launch::write`] gives its device address for the
    /// parameters, makes the launch wait for the buffer's earlier writers (and, for a write,
    /// its readers) on other streams, and records the launch for its later users.
    pub fn prepare<'a, P: bytemuck::Pod>(
        &'a self,
        stream: &'a CudaStream,
        kernel: Kernel<P>,
    ) -> Launch<'a, P> {
        Launch {
            module: self,
            stream,
            kernel,
            guards: Vec::new(),
        }
    }
}

/// A launch being prepared: see [`Module::prepare`].
pub struct Launch<'a, P> {
    module: &'a Module,
    stream: &'a CudaStream,
    kernel: Kernel<P>,
    guards: Vec<SyncOnDrop<'a>>,
}

impl<'a, P: bytemuck::Pod> Launch<'a, P> {
    /// The device address of `buf`, which the kernel reads, typed with its elements: it fits
    /// only a `DevPtr<T>` field of the parameter struct.
    pub fn read<T>(&mut self, buf: &'a impl DevicePtr<T>) -> DevPtr<T> {
        let (ptr, guard) = buf.device_ptr(self.stream);
        self.guards.push(guard);
        DevPtr::from_addr(ptr)
    }

    /// The device address of `buf`, which the kernel writes (and may read), typed with its
    /// elements: it fits a `DevPtrMut<T>` field (or, through [`DevPtrMut::as_const`], a
    /// `DevPtr<T>` one).
    pub fn write<T>(&mut self, buf: &'a mut impl DevicePtrMut<T>) -> DevPtrMut<T> {
        let (ptr, guard) = buf.device_ptr_mut(self.stream);
        self.guards.push(guard);
        DevPtrMut::from_addr(ptr)
    }

    /// This launch for `kernel` instead, with the buffers already taken: for a launcher that
    /// picks among kernels of one parameter struct by the addresses it was given (their
    /// alignment, say).
    pub fn instead(self, kernel: Kernel<P>) -> Self {
        Launch { kernel, ..self }
    }

    /// Queues the kernel (see [`Module::launch`]); the buffers' accesses are recorded once it
    /// is queued.
    ///
    /// # Safety
    /// As for [`Module::launch`]: the addresses in `params` come from [`Launch::read`] and
    /// [`Launch::write`] (or are otherwise valid), and the kernel stays inside the buffers.
    pub unsafe fn run(self, cfg: LaunchConfig, params: P) -> Result<()> {
        // SAFETY: forwarded from this function's contract; `self.guards` live until after the
        // launch is queued, so every access is ordered and recorded.
        unsafe { self.module.launch(self.stream, self.kernel, cfg, params) }
    }
}
