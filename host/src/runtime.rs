//! Loading kernel modules onto a device and launching their kernels: driver detection, PTX
//! selection and validation against its manifest, launch configurations checked against the
//! kernel's declaration and the device's limits, and the one generic launch that every safe
//! launcher in [`crate::ops`] (and every user kernel) goes through.

use crate::error::{DriverContext, Error, Result};
use cudarc::driver::sys::CUdevice_attribute as Attr;
use cudarc::driver::sys::CUfunction_attribute as FnAttr;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaStream, DevicePtr, DevicePtrMut, DeviceRepr,
    PushKernelArg, SyncOnDrop,
};
use std::path::Path;
use std::sync::Arc;
use streamline_builder::manifest::{parse_entries, BoundsInfo, EntryInfo, Manifest, ParamInfo};
use streamline_device::Kernel;

/// The PTX of one kernel crate, embedded at compile time by [`include_kernels!`] from what
/// `streamline_builder::Builder` wrote in the build script.
#[derive(Clone, Copy, Debug)]
pub struct EmbeddedModule {
    /// The kernel crate's library name.
    pub name: &'static str,
    /// Hash of the kernel sources the PTX was built from.
    pub source_hash: &'static str,
    /// Per architecture, lowest first: (arch, PTX text, manifest JSON).
    pub archs: &'static [(&'static str, &'static str, &'static str)],
}

/// Embeds the kernels a build script built with `streamline_builder::Builder` from the kernel
/// crate whose library name is given, as an [`EmbeddedModule`] to pass to [`Gpu::load`].
///
/// ```ignore
/// static KERNELS: streamline::EmbeddedModule = streamline::include_kernels!("my_kernels");
/// ```
#[macro_export]
macro_rules! include_kernels {
    ($name:literal) => {
        include!(concat!(env!("OUT_DIR"), "/streamline_", $name, ".rs"))
    };
}

/// Streamline's own kernels (`gpu-kernels/`), built by this crate's `build.rs`.
pub static KERNELS: EmbeddedModule = crate::include_kernels!("gpu_kernels");

/// Hash of the kernel sources this binary was built from.
pub const SOURCE_HASH: &str = KERNELS.source_hash;

/// Architectures whose PTX of Streamline's own kernels is embedded in this binary, lowest
/// first.
pub fn embedded_archs() -> Vec<&'static str> {
    KERNELS.archs()
}

fn arch_number(arch: &str) -> u32 {
    arch.strip_prefix("sm_")
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

impl EmbeddedModule {
    /// The embedded architectures, lowest first.
    pub fn archs(&self) -> Vec<&'static str> {
        self.archs.iter().map(|(a, _, _)| *a).collect()
    }

    /// The image for the highest architecture not above compute capability `major.minor`.
    pub fn image_for(&self, major: i32, minor: i32) -> Result<KernelImage> {
        let cc = (major * 10 + minor) as u32;
        let (arch, ptx, manifest) = self
            .archs
            .iter()
            .filter(|(a, _, _)| arch_number(a) <= cc)
            .max_by_key(|(a, _, _)| arch_number(a))
            .ok_or_else(|| Error::KernelImage {
                origin: format!("embedded {}", self.name),
                reason: format!(
                    "no embedded PTX suits compute capability {major}.{minor} (embedded: {})",
                    self.archs().join(", ")
                ),
            })?;
        KernelImage::parse(
            format!("embedded {} {arch}", self.name),
            ptx,
            manifest,
            None,
        )
    }
}

/// A PTX module and its manifest.
#[derive(Clone, Debug)]
pub struct KernelImage {
    /// Where it came from (`embedded NAME sm_90` or a file path).
    pub origin: String,
    /// PTX text.
    pub ptx: String,
    /// The manifest written beside it at build time.
    pub manifest: Manifest,
}

impl KernelImage {
    /// Streamline's own embedded image for the highest architecture not above compute
    /// capability `major.minor`.
    pub fn embedded_for(major: i32, minor: i32) -> Result<KernelImage> {
        KERNELS.image_for(major, minor)
    }

    /// A PTX file `DIR/NAME.ptx` and the `DIR/NAME.manifest.json` beside it (as
    /// `streamline_builder::Builder` and `cargo xtask build-kernels` write them).
    pub fn from_file(path: &Path) -> Result<KernelImage> {
        let origin = path.display().to_string();
        let ptx = std::fs::read_to_string(path).map_err(|source| Error::Io {
            path: origin.clone(),
            source,
        })?;
        let mpath = path.with_extension("manifest.json");
        let text = std::fs::read_to_string(&mpath).map_err(|source| Error::Io {
            path: mpath.display().to_string(),
            source,
        })?;
        KernelImage::parse(origin, &ptx, &text, Some(&mpath))
    }

    /// An image from its PTX and its manifest's JSON (read from `manifest_path`, if a file),
    /// validated ([`KernelImage::validate`]).
    fn parse(
        origin: String,
        ptx: &str,
        manifest: &str,
        manifest_path: Option<&Path>,
    ) -> Result<KernelImage> {
        let manifest = serde_json::from_str(manifest).map_err(|e| Error::KernelImage {
            origin: origin.clone(),
            reason: match manifest_path {
                Some(p) => format!("bad manifest {}: {e}", p.display()),
                None => format!("bad manifest: {e}"),
            },
        })?;
        let image = KernelImage {
            origin,
            ptx: ptx.to_string(),
            manifest,
        };
        image.validate()?;
        Ok(image)
    }

    fn fail<T>(&self, reason: String) -> Result<T> {
        Err(Error::KernelImage {
            origin: self.origin.clone(),
            reason,
        })
    }

    /// Refuses PTX whose entry points, parameter layouts or launch bounds differ from its
    /// manifest (PTX edited or swapped behind it).
    pub fn validate(&self) -> Result<()> {
        let ptx = parse_entries(&self.ptx);
        let same = ptx.len() == self.manifest.kernels.len()
            && ptx
                .iter()
                .zip(&self.manifest.kernels)
                .all(|(p, m)| p.name == m.name && p.params == m.params && p.bounds == m.bounds);
        if !same {
            return self.fail("the PTX's entry points differ from its manifest".into());
        }
        if let Some(want) = &self.manifest.ptx_sha256 {
            if streamline_builder::manifest::ptx_hash(&self.ptx) != *want {
                return self.fail(
                    "the PTX is not the one its manifest was written for (edited or replaced after the build): rebuild it".into(),
                );
            }
        }
        // A parameter struct's fields (where the manifest has them) lie in order inside it.
        for e in &self.manifest.kernels {
            let (Some(fields), Some(p)) = (&e.fields, e.params.first()) else {
                continue;
            };
            let mut end = 0;
            for f in fields {
                if f.offset < end || f.offset + f.size > p.size {
                    return self.fail(format!(
                        "kernel `{}`: field `{}` overlaps another or lies outside its {}-byte parameters",
                        e.name, f.name, p.size
                    ));
                }
                end = f.offset + f.size;
            }
        }
        Ok(())
    }

    /// Refuses PTX built from other sources than `source_hash` (a `--ptx` file meant to replace
    /// an embedded module).
    pub fn check_source(&self, source_hash: &str) -> Result<()> {
        if self.manifest.source_hash != source_hash {
            return self.fail(format!(
                "built from other kernel sources (hash {}…, this binary expects {}…): rebuild with `cargo xtask build-kernels`",
                self.manifest.source_hash.get(..12).unwrap_or(&self.manifest.source_hash),
                source_hash.get(..12).unwrap_or(source_hash)
            ));
        }
        Ok(())
    }

    /// The manifest entry of `kernel`, refused unless its parameter layout and launch bounds
    /// are those the host's declaration says (a stale or foreign PTX).
    pub fn entry<P>(&self, kernel: Kernel<P>) -> Result<&EntryInfo> {
        let name = kernel.name();
        match self.manifest.kernels.iter().find(|e| e.name == name) {
            Some(entry) => self.check_entry(entry, kernel).map(|()| entry),
            None => Err(self.missing(name)),
        }
    }

    /// The error for a declared kernel the PTX lacks.
    fn missing(&self, name: &str) -> Error {
        Error::KernelImage {
            origin: self.origin.clone(),
            reason: format!(
                "kernel `{name}` is declared but the PTX has no entry `{name}` (was it compiled for nvptx64 from the crate that declares it?)"
            ),
        }
    }

    /// [`KernelImage::entry`]'s checks of `kernel`'s entry: parameter layout and bounds.
    fn check_entry<P>(&self, entry: &EntryInfo, kernel: Kernel<P>) -> Result<()> {
        let name = kernel.name();
        let want = [ParamInfo {
            size: kernel.param_size(),
            align: kernel.param_align(),
        }];
        if entry.params != want {
            return self.fail(format!(
                "kernel `{name}` takes {:?} but this binary passes {:?}: the PTX is stale, rebuild it",
                entry.params, want
            ));
        }
        let bounds = kernel.bounds().map(|b| BoundsInfo {
            max_threads: b.max_threads,
            min_blocks: b.min_blocks,
        });
        if entry.bounds != bounds {
            return self.fail(format!(
                "kernel `{name}` was built with launch bounds {:?} but is declared with {bounds:?}: the PTX is stale, rebuild it",
                entry.bounds
            ));
        }
        Ok(())
    }
}

/// Whether the CUDA driver library can be loaded; the error says so in one line if not.
pub fn driver_present() -> Result<()> {
    // SAFETY: only tries to dlopen the driver library by its usual names and closes it again.
    if unsafe { cudarc::driver::sys::is_culib_present() } {
        Ok(())
    } else {
        Err(Error::NoDriver(
            "the NVIDIA driver library could not be loaded on this machine".into(),
        ))
    }
}

/// CUDA driver version as (major, minor).
pub fn driver_version() -> Result<(i32, i32)> {
    driver_present()?;
    let mut v = 0i32;
    // SAFETY: the driver library is present (checked above); the call writes one int.
    let r = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut v) };
    r.result().op("cuDriverGetVersion")?;
    Ok((v / 1000, (v % 1000) / 10))
}

/// Number of CUDA devices.
pub fn device_count() -> Result<usize> {
    driver_present()?;
    let n = CudaContext::device_count().map_err(|e| Error::NoDevice {
        ordinal: 0,
        reason: e.to_string(),
    })?;
    Ok(n.max(0) as usize)
}

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

/// One loaded kernel: its function, manifest entry and per-function limits.
struct Loaded {
    entry: EntryInfo,
    function: CudaFunction,
    /// Threads per block the function can run with its register count.
    max_threads: u32,
    /// Static shared memory of the function.
    static_shared: u32,
}

/// A kernel module loaded on a device: every kernel of its manifest, ready to launch.
///
/// Made by [`Gpu::load`] (an embedded module) or [`Gpu::load_file`]; Streamline's own kernels
/// are one such module ([`Gpu::kernels`]).
pub struct Module {
    image: KernelImage,
    _module: Arc<CudaModule>,
    kernels: Vec<Loaded>,
    limits: DeviceLimits,
}

/// Wraps a kernel parameter struct so it can be passed by value.
#[repr(transparent)]
struct ByValue<P>(P);
// SAFETY: `P: Pod` is plain old data with no padding or pointers to host memory, so its bytes
// are exactly what the kernel's `#[repr(C)]` parameter expects (its size and alignment are
// checked against the PTX's parameter before every launch).
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
    fn load(ctx: &Arc<CudaContext>, image: KernelImage, limits: DeviceLimits) -> Result<Module> {
        let module = ctx
            .load_module(cudarc::nvrtc::Ptx::from_src(image.ptx.clone()))
            .map_err(|e| Error::KernelImage {
                origin: image.origin.clone(),
                reason: format!("the driver rejected it: {e}"),
            })?;
        let mut kernels = Vec::new();
        for entry in &image.manifest.kernels {
            let function = module
                .load_function(&entry.name)
                .map_err(|e| Error::KernelImage {
                    origin: image.origin.clone(),
                    reason: format!("cannot load kernel `{}`: {e}", entry.name),
                })?;
            let attr = |a: FnAttr| function.get_attribute(a).op("cuFuncGetAttribute");
            let max_threads = attr(FnAttr::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)? as u32;
            let static_shared = attr(FnAttr::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)? as u32;
            kernels.push(Loaded {
                entry: entry.clone(),
                function,
                max_threads,
                static_shared,
            });
        }
        Ok(Module {
            image,
            _module: module,
            kernels,
            limits,
        })
    }

    /// The PTX and manifest this module was loaded from.
    pub fn image(&self) -> &KernelImage {
        &self.image
    }

    /// Every kernel's name and loaded function, in the manifest's order.
    pub fn functions(&self) -> impl Iterator<Item = (&str, &CudaFunction)> {
        self.kernels
            .iter()
            .map(|k| (k.entry.name.as_str(), &k.function))
    }

    /// The loaded kernel of `kernel`, its manifest entry checked against the declaration
    /// (one pass over the module's kernels).
    fn loaded<P>(&self, kernel: Kernel<P>) -> Result<&Loaded> {
        let name = kernel.name();
        let k = self
            .kernels
            .iter()
            .find(|k| k.entry.name == name)
            .ok_or_else(|| self.image.missing(name))?;
        self.image.check_entry(&k.entry, kernel)?;
        Ok(k)
    }

    /// The loaded function of `kernel` (for its attributes: registers, local memory).
    pub fn function<P>(&self, kernel: Kernel<P>) -> Result<&CudaFunction> {
        Ok(&self.loaded(kernel)?.function)
    }

    /// Checks `cfg` for `kernel` against its declared launch bounds, what its compiled function
    /// allows and the device's limits; the error names the kernel and the limit.
    pub fn check_config<P>(&self, kernel: Kernel<P>, cfg: &LaunchConfig) -> Result<()> {
        self.check_loaded(self.loaded(kernel)?, cfg)
    }

    /// Checks `cfg` against the launch bounds recorded in `k`'s manifest entry (for a kernel
    /// launched through its declaration, checked equal to the declaration's when `k` was looked
    /// up), what its compiled function allows and the device's limits.
    fn check_loaded(&self, k: &Loaded, cfg: &LaunchConfig) -> Result<()> {
        let name = k.entry.name.as_str();
        let fail = |reason: String| {
            Err(Error::LaunchConfig {
                kernel: name.to_string(),
                reason,
            })
        };
        let l = &self.limits;
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
        if let Some(bounds) = k.entry.bounds {
            if threads > bounds.max_threads as u64 {
                return fail(format!(
                    "{threads} threads per block; it was compiled for at most {} (its launch bounds)",
                    bounds.max_threads
                ));
            }
        }
        let most = k.max_threads.min(l.max_threads_per_block);
        if threads > most as u64 {
            return fail(format!(
                "{threads} threads per block; the device runs it with at most {most} (its registers and the device's limit)"
            ));
        }
        let shared = k.static_shared as u64 + cfg.shared_bytes as u64;
        if shared > l.max_shared_per_block as u64 {
            return fail(format!(
                "{} bytes of dynamic shared memory plus {} static exceed the device's {} per block",
                cfg.shared_bytes, k.static_shared, l.max_shared_per_block
            ));
        }
        Ok(())
    }

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
        let loaded = self.loaded(kernel)?;
        // SAFETY: forwarded from this function's contract; `loaded`'s parameter layout is
        // `P`'s (checked by `loaded`).
        unsafe { self.launch_loaded(stream, loaded, cfg, &ByValue(params)) }
    }

    /// Launches the kernel named `name` with `params`, the bytes of its one by-value parameter
    /// struct (a `ctypes.Structure` from Python, say), after checking their size, and `align`
    /// if given, against the parameter the PTX declares, and `cfg` as [`Module::check_config`]
    /// does. For callers without the kernel's Rust declaration; with it, use
    /// [`Module::launch`].
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
        let loaded = self
            .kernels
            .iter()
            .find(|k| k.entry.name == name)
            .ok_or_else(|| {
                let names: Vec<&str> = self.kernels.iter().map(|k| k.entry.name.as_str()).collect();
                Error::arg(
                    "name",
                    format!(
                        "no kernel `{name}` in {}; it has {names:?}",
                        self.image.origin
                    ),
                )
            })?;
        let [want] = loaded.entry.params.as_slice() else {
            return Err(Error::arg(
                "params",
                format!(
                    "kernel `{name}` takes {:?}; Streamline kernels take one parameter struct",
                    loaded.entry.params
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
        let mut raw = RawParams([0; MAX_PARAM_BYTES]);
        raw.0[..params.len()].copy_from_slice(params);
        // SAFETY: the size (and alignment, if given) equal the PTX parameter's (checked above);
        // the caller guarantees the bytes are a valid parameter value.
        unsafe { self.launch_loaded(stream, loaded, cfg, &raw) }
    }

    /// Queues `loaded` with the parameter `arg` after checking `cfg`.
    ///
    /// # Safety
    /// `arg`'s kernel-parameter bytes must be a valid value of `loaded`'s parameter (its size
    /// and layout), with device addresses valid for the launch, as for [`Module::launch`].
    unsafe fn launch_loaded<A: DeviceRepr>(
        &self,
        stream: &CudaStream,
        loaded: &Loaded,
        cfg: LaunchConfig,
        arg: &A,
    ) -> Result<()> {
        const DEFAULT_WINDOW: u32 = 48 * 1024;
        self.check_loaded(loaded, &cfg)?;
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
        // SAFETY: the caller guarantees the parameter matches the PTX and the addresses inside
        // are valid for this launch.
        unsafe { builder.launch(driver_cfg) }
            .map(|_| ())
            .map_err(|source| Error::Launch {
                kernel: loaded.entry.name.clone(),
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
    /// The device address of `buf`, which the kernel reads.
    pub fn read<T>(&mut self, buf: &'a impl DevicePtr<T>) -> u64 {
        let (ptr, guard) = buf.device_ptr(self.stream);
        self.guards.push(guard);
        ptr
    }

    /// The device address of `buf`, which the kernel writes (and may read).
    pub fn write<T>(&mut self, buf: &'a mut impl DevicePtrMut<T>) -> u64 {
        let (ptr, guard) = buf.device_ptr_mut(self.stream);
        self.guards.push(guard);
        ptr
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

/// A device with Streamline's kernels loaded.
pub struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    kernels: Module,
    info: DeviceInfo,
}

/// Bytes of freed stream-ordered memory that the device's default pool keeps for reuse, at
/// least (a larger threshold set by someone else in the process is left as it is). The
/// driver's default keeps none: every synchronisation hands freed memory back, and the next
/// scratch allocation (split-K's partial products, an engine buffer) maps it again, which
/// costs more than a small product's kernels.
pub const POOL_KEEP_BYTES: u64 = 256 << 20;

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

impl Gpu {
    /// Opens device `ordinal` and loads Streamline's embedded kernels for its architecture, or
    /// `ptx` if given (built from the same sources). The device's default memory pool keeps at
    /// least [`POOL_KEEP_BYTES`] of freed stream-ordered memory for reuse from then on, for the
    /// whole process (`cuMemPoolTrimTo` gives it back).
    pub fn new(ordinal: usize, ptx: Option<&Path>) -> Result<Gpu> {
        driver_present()?;
        let ctx = CudaContext::new(ordinal).map_err(|e| Error::NoDevice {
            ordinal,
            reason: e.to_string(),
        })?;
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
            multiprocessors: attr(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32,
            memory_bytes: ctx.total_mem().op("cuDeviceTotalMem")?,
            copy_engines: attr(Attr::CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT)? as u32,
            l2_bytes: attr(Attr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as u32,
            clock_khz: attr(Attr::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)? as u32,
            limits,
        };
        let image = match ptx {
            Some(path) => {
                let image = KernelImage::from_file(path)?;
                image.check_source(SOURCE_HASH)?;
                image
            }
            None => KERNELS.image_for(info.compute_capability.0, info.compute_capability.1)?,
        };
        let kernels = Module::load(&ctx, image, limits)?;
        let stream = ctx.new_stream().op("cuStreamCreate")?;
        Ok(Gpu {
            ctx,
            stream,
            kernels,
            info,
        })
    }

    /// Loads an embedded kernel module (see [`include_kernels!`]) for this device's
    /// architecture, checked against its manifest.
    pub fn load(&self, module: &EmbeddedModule) -> Result<Module> {
        let (major, minor) = self.info.compute_capability;
        Module::load(&self.ctx, module.image_for(major, minor)?, self.info.limits)
    }

    /// Loads a kernel module from `DIR/NAME.ptx` and `DIR/NAME.manifest.json`.
    pub fn load_file(&self, ptx: &Path) -> Result<Module> {
        Module::load(&self.ctx, KernelImage::from_file(ptx)?, self.info.limits)
    }

    /// The CUDA context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
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

    /// Streamline's own kernels, loaded.
    pub fn kernels(&self) -> &Module {
        &self.kernels
    }

    /// The loaded Streamline kernel image.
    pub fn image(&self) -> &KernelImage {
        self.kernels.image()
    }

    /// Launches one of Streamline's own kernels: [`Module::launch`] on [`Gpu::kernels`] with a
    /// grid, a block and no dynamic shared memory.
    ///
    /// # Safety
    /// As for [`Module::launch`].
    pub unsafe fn launch<P: bytemuck::Pod>(
        &self,
        stream: &CudaStream,
        kernel: Kernel<P>,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        params: P,
    ) -> Result<()> {
        // SAFETY: forwarded from this function's contract.
        unsafe {
            self.kernels
                .launch(stream, kernel, LaunchConfig::new(grid, block), params)
        }
    }

    /// [`Gpu::launch`] over `items` on a one-dimensional grid of `block`-thread blocks that take
    /// `per_block` items each: `ceil(items / per_block)` blocks, at least one and at most
    /// `max_blocks` (the kernel strides over what the grid leaves).
    ///
    /// # Safety
    /// As for [`Module::launch`].
    pub unsafe fn launch_strided<P: bytemuck::Pod>(
        &self,
        stream: &CudaStream,
        kernel: Kernel<P>,
        items: u64,
        (block, per_block): (u32, u64),
        max_blocks: u32,
        params: P,
    ) -> Result<()> {
        let blocks = items
            .div_ceil(per_block.max(1))
            .clamp(1, max_blocks.max(1) as u64) as u32;
        // SAFETY: forwarded from this function's contract.
        unsafe { self.launch(stream, kernel, (blocks, 1, 1), (block, 1, 1), params) }
    }

    /// [`Gpu::launch`] with `shared_bytes` of dynamic shared memory per block.
    ///
    /// # Safety
    /// As for [`Module::launch`].
    pub unsafe fn launch_shared<P: bytemuck::Pod>(
        &self,
        stream: &CudaStream,
        kernel: Kernel<P>,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        shared_bytes: u32,
        params: P,
    ) -> Result<()> {
        let cfg = LaunchConfig::new(grid, block).with_shared(shared_bytes);
        // SAFETY: forwarded from this function's contract.
        unsafe { self.kernels.launch(stream, kernel, cfg, params) }
    }
}
