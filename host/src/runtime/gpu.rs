//! A device with Streamline's own kernels: opened with its facts and limits read once, the
//! kernels loaded when one is first launched (a program that launches only its own kernels
//! never loads them), and the launch helpers Streamline's launchers use.

use super::config::DeviceLimits;
use super::image::{EmbeddedModule, KernelImage, KERNELS, SOURCE_HASH};
use super::module::Module;
use super::partition::{self, SmSplit};
use super::{driver_present, driver_version};
use crate::engine::params::UploadCache;
use crate::error::{DriverContext, Error, Result};
use cudarc::driver::sys::CUdevice_attribute as Attr;
use cudarc::driver::{CudaContext, CudaStream};
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

/// Static facts about a device.
#[derive(Clone, Debug)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    pub compute_capability: (i32, i32),
    pub multiprocessors: u32,
    pub memory_bytes: usize,
    pub copy_engines: u32,
    pub l2_bytes: u32,
    pub clock_khz: u32,
    /// The launch limits every kernel launch is checked against.
    pub limits: DeviceLimits,
}

/// A device, with Streamline's kernels loaded when first launched.
pub struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    kernels: OnceLock<Module>,
    /// Held while Streamline's kernels load, so that they load once.
    loading: Mutex<()>,
    info: DeviceInfo,
    uploads: UploadCache,
    /// The split of the device's SMs this device's work runs in, where it was opened with one.
    split: Option<Arc<SmSplit>>,
    /// The other devices whose memory this one reaches directly ([`Gpu::enable_peer_access`]).
    reached: Mutex<Vec<usize>>,
}

/// Release threshold of the device's default memory pool: the pool's reserved memory (in use
/// and freed together) above which a synchronisation hands freed memory back to the driver.
/// The driver's default of 0, or any bound below what a program holds at once, hands back
/// every freed byte at each synchronisation, and the next scratch allocation (split-K's
/// partial products, a transposed operand, an engine buffer) maps it again, which costs more
/// than a small product's kernels. So freed memory is kept, as PyTorch's stream-ordered
/// allocator keeps it, until the program gives it back (`cuMemPoolTrimTo`).
pub const POOL_KEEP_BYTES: u64 = u64::MAX;

/// Raises the release threshold of `ctx`'s device's default memory pool to [`POOL_KEEP_BYTES`].
fn keep_pool_memory(ctx: &CudaContext) -> Result<()> {
    use cudarc::driver::result::{device, mem_pool};
    use cudarc::driver::sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD as THRESHOLD;
    if !ctx.has_async_alloc() {
        return Ok(());
    }
    // SAFETY: the device is the context's own; the release threshold is a `u64` attribute,
    // read into and written from a live `u64`.
    unsafe {
        let pool = device::get_default_mem_pool(ctx.cu_device()).op("cuDeviceGetDefaultMemPool")?;
        let mut kept: u64 = 0;
        mem_pool::get_attribute(pool, THRESHOLD, (&mut kept as *mut u64).cast())
            .op("cuMemPoolGetAttribute")?;
        if kept < POOL_KEEP_BYTES {
            let mut keep = POOL_KEEP_BYTES;
            mem_pool::set_attribute(pool, THRESHOLD, (&mut keep as *mut u64).cast())
                .op("cuMemPoolSetAttribute")?;
        }
    }
    Ok(())
}

/// Lets device `from` read and write the memory of `to`'s default memory pool (which the
/// stream-ordered allocations come from), now and for later allocations.
fn open_pool(to: &CudaContext, from: &CudaContext) -> Result<()> {
    use cudarc::driver::result::device;
    use cudarc::driver::sys::{
        cuMemPoolSetAccess, CUmemAccessDesc, CUmemAccess_flags, CUmemLocation, CUmemLocationType,
    };
    let desc = CUmemAccessDesc {
        location: CUmemLocation {
            type_: CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
            id: from.ordinal() as std::ffi::c_int,
        },
        flags: CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
    };
    // SAFETY: the pool is `to`'s device's own; one live access descriptor naming a device
    // that can access it (checked by the caller).
    unsafe {
        let pool = device::get_default_mem_pool(to.cu_device()).op("cuDeviceGetDefaultMemPool")?;
        cuMemPoolSetAccess(pool, &desc, 1)
            .result()
            .op("cuMemPoolSetAccess")
    }
}

impl Gpu {
    /// Opens device `ordinal`. Streamline's embedded kernels for its architecture are loaded
    /// when one is first launched; `ptx` (built from the same sources) is loaded now, so that
    /// a wrong file is refused here. The device's default memory pool keeps freed
    /// stream-ordered memory for reuse from then on ([`POOL_KEEP_BYTES`]), for the whole
    /// process (`cuMemPoolTrimTo` gives it back).
    pub fn new(ordinal: usize, ptx: Option<&Path>) -> Result<Gpu> {
        driver_present()?;
        let ctx = CudaContext::new(ordinal).map_err(|e| Error::NoDevice {
            ordinal,
            reason: e.to_string(),
        })?;
        Gpu::open(ordinal, ctx, ptx, None)
    }

    /// Opens device `ordinal` as [`Gpu::new`] does, with at least `side_sms` of its SMs kept
    /// for side work (the driver splits them in groups): the streams, buffers and kernels of
    /// this `Gpu` run on the others, and [`Gpu::side_context`]'s streams on the kept ones (the
    /// JPEG decoder's, so that its kernels never wait for the engine's blocks; see
    /// [`partition`]). [`DeviceInfo::multiprocessors`] counts the engine's SMs. The SMs are
    /// not the only thing streams share: see [`super::CONNECTIONS_VAR`] for the hardware
    /// queues.
    pub fn with_side_sms(ordinal: usize, ptx: Option<&Path>, side_sms: u32) -> Result<Gpu> {
        let split = partition::split(ordinal, side_sms)?;
        Gpu::open(ordinal, split.engine.clone(), ptx, Some(split))
    }

    fn open(
        ordinal: usize,
        ctx: Arc<CudaContext>,
        ptx: Option<&Path>,
        split: Option<Arc<SmSplit>>,
    ) -> Result<Gpu> {
        // A speed-up, not a requirement: where the driver refuses it, the pool keeps its
        // default and everything still runs.
        let _ = keep_pool_memory(&ctx);
        let attr = |a: Attr| ctx.attribute(a).op("cuDeviceGetAttribute");
        let limits = DeviceLimits {
            max_threads_per_block: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)? as u32,
            max_block: (
                attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)? as u32,
                attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)? as u32,
                attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)? as u32,
            ),
            max_grid: (
                attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)? as u32,
                attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)? as u32,
                attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)? as u32,
            ),
            max_shared_per_block: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?
                as u32,
        };
        let info = DeviceInfo {
            ordinal,
            name: ctx.name().op("cuDeviceGetName")?,
            compute_capability: ctx.compute_capability().op("cuDeviceGetAttribute")?,
            multiprocessors: match &split {
                Some(s) => s.engine_sms,
                None => attr(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32,
            },
            memory_bytes: ctx.total_mem().op("cuDeviceTotalMem")?,
            copy_engines: attr(Attr::CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT)? as u32,
            l2_bytes: attr(Attr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as u32,
            clock_khz: attr(Attr::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)? as u32,
            limits,
        };
        let stream = ctx.new_stream().op("cuStreamCreate")?;
        let gpu = Gpu {
            ctx,
            stream,
            kernels: OnceLock::new(),
            loading: Mutex::new(()),
            info,
            uploads: UploadCache::default(),
            split,
            reached: Mutex::new(Vec::new()),
        };
        if let Some(path) = ptx {
            let image = KernelImage::from_file(path)?;
            image.check_source(SOURCE_HASH)?;
            let module = gpu.load_image(image, || Err(None))?;
            let _ = gpu.kernels.set(module);
        }
        Ok(gpu)
    }

    /// Loads `image` for this device: its machine code where that runs here (else its PTX),
    /// falling back to its PTX, or else to `ptx()` (`Err(None)`: there is none), if the driver
    /// refuses the machine code.
    fn load_image(
        &self,
        image: KernelImage,
        ptx: impl FnOnce() -> std::result::Result<KernelImage, Option<Error>>,
    ) -> Result<Module> {
        let (major, minor) = self.info.compute_capability;
        let text = image.ptx.clone();
        let chosen = image.for_device(major, minor, driver_version().ok());
        let Some(_) = chosen.cubin else {
            return Module::load(&self.ctx, chosen, self.info.limits);
        };
        let refused = match Module::load(&self.ctx, chosen.clone(), self.info.limits) {
            Ok(module) => return Ok(module),
            Err(e) => e,
        };
        let alternative = match text {
            Some(text) => Ok(KernelImage {
                ptx: Some(text),
                cubin: None,
                ..chosen
            }),
            None => ptx(),
        };
        match alternative {
            Ok(image) => Module::load(&self.ctx, image, self.info.limits),
            Err(None) => Err(refused),
            Err(Some(e)) => Err(e),
        }
    }

    /// Loads an embedded kernel module (see [`include_kernels!`](crate::include_kernels)) for
    /// this device's architecture, checked against its manifest: its machine code where that
    /// runs here, else its PTX.
    pub fn load(&self, module: &EmbeddedModule) -> Result<Module> {
        let (major, minor) = self.info.compute_capability;
        let image = module.image_for(major, minor)?;
        self.load_image(image, || module.ptx_image_for(major, minor).map_err(Some))
    }

    /// Loads a kernel module from `DIR/NAME.ptx` and `DIR/NAME.manifest.json` (and the
    /// machine code `DIR/NAME.cubin`, where the manifest records one that runs here).
    pub fn load_file(&self, ptx: &Path) -> Result<Module> {
        self.load_image(KernelImage::from_file(ptx)?, || Err(None))
    }

    /// The CUDA context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The context side work uses: the one of the SMs kept for it where this device was opened
    /// with [`Gpu::with_side_sms`], else [`Gpu::context`].
    pub fn side_context(&self) -> &Arc<CudaContext> {
        self.split.as_ref().map_or(&self.ctx, |s| &s.side)
    }

    /// A context of this device that any number of threads may have current: the primary one
    /// (the engine's own, unless this device was opened with a split, whose green contexts
    /// the driver allows on one thread at a time).
    pub(crate) fn host_context(&self) -> &Arc<CudaContext> {
        self.split.as_ref().map_or(&self.ctx, |s| s.primary())
    }

    /// The split of the device's SMs, where this device was opened with one.
    pub fn split(&self) -> Option<&SmSplit> {
        self.split.as_deref()
    }

    /// Lets this device and `other` reach each other's memory directly (over NVLink or PCIe),
    /// where the hardware allows it both ways: then copies between them
    /// ([`crate::engine::memory::peer`]) go from one device's memory to the other's, and
    /// otherwise the driver stages them through host memory. Both the contexts and the
    /// devices' memory pools (where the engine's buffers come from, and which the contexts'
    /// peer access does not open) are opened to each other. Returns whether the direct path is
    /// on. Enabling it twice is harmless.
    pub fn enable_peer_access(&self, other: &Gpu) -> Result<bool> {
        use cudarc::driver::sys::{cuCtxEnablePeerAccess, cuDeviceCanAccessPeer, CUresult};
        let (a, b) = (self.host_context(), other.host_context());
        if a.cu_device() == b.cu_device() {
            return Ok(true);
        }
        for (from, to) in [(a, b), (b, a)] {
            let mut can = 0;
            // SAFETY: two live devices' handles and a live `c_int` for the answer.
            unsafe { cuDeviceCanAccessPeer(&mut can, from.cu_device(), to.cu_device()) }
                .result()
                .op("cuDeviceCanAccessPeer")?;
            if can == 0 {
                return Ok(false);
            }
        }
        for (from, to) in [(a, b), (b, a)] {
            from.bind_to_thread().op("cuCtxSetCurrent")?;
            // SAFETY: `to` is a live context of another device; flags must be 0.
            match unsafe { cuCtxEnablePeerAccess(to.cu_ctx(), 0) } {
                CUresult::CUDA_SUCCESS | CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => {}
                refused => refused.result().op("cuCtxEnablePeerAccess")?,
            }
            if to.has_async_alloc() {
                open_pool(to, from)?;
            }
        }
        for (gpu, to) in [(self, other), (other, self)] {
            let mut reached = gpu.reached.lock().unwrap_or_else(|e| e.into_inner());
            if !reached.contains(&to.info.ordinal) {
                reached.push(to.info.ordinal);
            }
        }
        Ok(true)
    }

    /// Whether kernels on this device may read and write memory of device `ordinal` directly:
    /// it is this device, or [`Gpu::enable_peer_access`] opened the direct path to it.
    pub fn reaches(&self, ordinal: usize) -> bool {
        ordinal == self.info.ordinal
            || self
                .reached
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(&ordinal)
    }

    /// The stream operations use unless told otherwise.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// A new stream on this device.
    pub fn new_stream(&self) -> Result<Arc<CudaStream>> {
        self.ctx.new_stream().op("cuStreamCreate")
    }

    /// Facts about the device.
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// This device's kept uploads of values that never change (see [`UploadCache`]).
    pub fn uploads(&self) -> &UploadCache {
        &self.uploads
    }

    /// Streamline's own kernels, loaded now if this is their first use. Loading may wait for
    /// the device's work in progress (the driver's choice): a program that keeps kernels
    /// waiting on one another across streams calls this before it starts them.
    pub fn kernels(&self) -> Result<&Module> {
        if let Some(m) = self.kernels.get() {
            return Ok(m);
        }
        let _guard = self
            .loading
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(m) = self.kernels.get() {
            return Ok(m);
        }
        // The first launch may come while the caller's stream is captured: loading is no part
        // of the graph.
        let module = super::outside_capture(|| self.load(&KERNELS))?;
        Ok(self.kernels.get_or_init(|| module))
    }

    /// The loaded Streamline kernel image (loaded now if this is its first use).
    pub fn image(&self) -> Result<&KernelImage> {
        Ok(self.kernels()?.image())
    }
}
