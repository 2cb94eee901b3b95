//! Loading the kernels onto a device: driver detection, PTX selection and validation, and the
//! one generic launch that every safe launcher in [`crate::ops`] goes through.

use crate::error::{DriverContext, Error, Result};
use cudarc::driver::sys::CUdevice_attribute as Attr;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg,
};
use std::path::Path;
use std::sync::Arc;
use streamline_abi::{KernelSpec, KERNELS};
use streamline_builder::manifest::{parse_entries, Manifest, ParamInfo};

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/embedded.rs"));
}

/// Hash of the kernel sources this binary was built from.
pub const SOURCE_HASH: &str = embedded::SOURCE_HASH;

/// Architectures whose PTX is embedded in this binary, lowest first.
pub fn embedded_archs() -> Vec<&'static str> {
    embedded::EMBEDDED.iter().map(|(a, _, _)| *a).collect()
}

fn arch_number(arch: &str) -> u32 {
    arch.strip_prefix("sm_")
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// A PTX module and its manifest, checked against the kernels this binary expects.
#[derive(Clone, Debug)]
pub struct KernelImage {
    /// Where it came from (`embedded sm_90` or a file path).
    pub origin: String,
    /// PTX text.
    pub ptx: String,
    /// The manifest written beside it at build time.
    pub manifest: Manifest,
}

impl KernelImage {
    /// The embedded image for the highest architecture not above compute capability
    /// `major.minor`.
    pub fn embedded_for(major: i32, minor: i32) -> Result<KernelImage> {
        let cc = (major * 10 + minor) as u32;
        let (arch, ptx, manifest) = embedded::EMBEDDED
            .iter()
            .filter(|(a, _, _)| arch_number(a) <= cc)
            .max_by_key(|(a, _, _)| arch_number(a))
            .ok_or_else(|| Error::KernelImage {
                origin: "embedded".into(),
                reason: format!(
                    "no embedded PTX suits compute capability {major}.{minor} (embedded: {})",
                    embedded_archs().join(", ")
                ),
            })?;
        let origin = format!("embedded {arch}");
        let manifest = serde_json::from_str(manifest).map_err(|e| Error::KernelImage {
            origin: origin.clone(),
            reason: format!("bad manifest: {e}"),
        })?;
        let image = KernelImage {
            origin,
            ptx: ptx.to_string(),
            manifest,
        };
        image.validate()?;
        Ok(image)
    }

    /// A PTX file and the `streamline.manifest.json` beside it (as `cargo xtask build-kernels`
    /// writes them).
    pub fn from_file(path: &Path) -> Result<KernelImage> {
        let origin = path.display().to_string();
        let ptx = std::fs::read_to_string(path).map_err(|source| Error::Io {
            path: origin.clone(),
            source,
        })?;
        let mpath = path.with_file_name("streamline.manifest.json");
        let text = std::fs::read_to_string(&mpath).map_err(|source| Error::Io {
            path: mpath.display().to_string(),
            source,
        })?;
        let manifest = serde_json::from_str(&text).map_err(|e| Error::KernelImage {
            origin: origin.clone(),
            reason: format!("bad manifest {}: {e}", mpath.display()),
        })?;
        let image = KernelImage {
            origin,
            ptx,
            manifest,
        };
        image.validate()?;
        Ok(image)
    }

    /// Refuses PTX built from other sources than this binary, and PTX whose entry points or
    /// parameter layouts differ from [`streamline_abi::KERNELS`].
    pub fn validate(&self) -> Result<()> {
        let fail = |reason: String| {
            Err(Error::KernelImage {
                origin: self.origin.clone(),
                reason,
            })
        };
        if self.manifest.source_hash != SOURCE_HASH {
            return fail(format!(
                "built from other kernel sources (hash {}…, this binary expects {}…): rebuild with `cargo xtask build-kernels`",
                &self.manifest.source_hash.get(..12).unwrap_or(&self.manifest.source_hash),
                &SOURCE_HASH[..12]
            ));
        }
        let entries = parse_entries(&self.ptx);
        if entries != self.manifest.kernels {
            return fail("the PTX's entry points differ from its manifest".into());
        }
        for spec in KERNELS {
            let Some(entry) = entries.iter().find(|e| e.name == spec.name) else {
                return fail(format!("kernel `{}` is missing", spec.name));
            };
            let want = [ParamInfo {
                size: spec.param_size,
                align: spec.param_align,
            }];
            if entry.params != want {
                return fail(format!(
                    "kernel `{}` takes {:?} but this binary passes {:?}",
                    spec.name, entry.params, want
                ));
            }
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
}

/// A device with Streamline's kernels loaded.
pub struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    image: KernelImage,
    _module: Arc<CudaModule>,
    functions: Vec<(&'static str, CudaFunction)>,
    info: DeviceInfo,
}

/// Wraps a kernel parameter struct so it can be passed by value.
#[repr(transparent)]
struct ByValue<P>(P);
// SAFETY: `P: Pod` is plain old data with no padding or pointers to host memory, so its bytes
// are exactly what the kernel's `#[repr(C)]` parameter expects (checked against the PTX's
// parameter layout when the image was validated).
unsafe impl<P: bytemuck::Pod> DeviceRepr for ByValue<P> {}

impl Gpu {
    /// Opens device `ordinal` and loads the embedded PTX for its architecture, or `ptx` if given.
    pub fn new(ordinal: usize, ptx: Option<&Path>) -> Result<Gpu> {
        driver_present()?;
        let ctx = CudaContext::new(ordinal).map_err(|e| Error::NoDevice {
            ordinal,
            reason: e.to_string(),
        })?;
        let attr = |a: Attr| ctx.attribute(a).op("cuDeviceGetAttribute");
        let info = DeviceInfo {
            ordinal,
            name: ctx.name().op("cuDeviceGetName")?,
            compute_capability: ctx.compute_capability().op("cuDeviceGetAttribute")?,
            multiprocessors: attr(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32,
            memory_bytes: ctx.total_mem().op("cuDeviceTotalMem")?,
            copy_engines: attr(Attr::CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT)? as u32,
            l2_bytes: attr(Attr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as u32,
            clock_khz: attr(Attr::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)? as u32,
        };
        let image = match ptx {
            Some(path) => KernelImage::from_file(path)?,
            None => {
                KernelImage::embedded_for(info.compute_capability.0, info.compute_capability.1)?
            }
        };
        let module = ctx
            .load_module(cudarc::nvrtc::Ptx::from_src(image.ptx.clone()))
            .map_err(|e| Error::KernelImage {
                origin: image.origin.clone(),
                reason: format!("the driver rejected it: {e}"),
            })?;
        let mut functions = Vec::new();
        for spec in KERNELS {
            let f = module
                .load_function(spec.name)
                .map_err(|e| Error::KernelImage {
                    origin: image.origin.clone(),
                    reason: format!("cannot load kernel `{}`: {e}", spec.name),
                })?;
            functions.push((spec.name, f));
        }
        let stream = ctx.new_stream().op("cuStreamCreate")?;
        Ok(Gpu {
            ctx,
            stream,
            image,
            _module: module,
            functions,
            info,
        })
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

    /// The loaded kernel image.
    pub fn image(&self) -> &KernelImage {
        &self.image
    }

    /// The loaded function of a kernel.
    pub fn function(&self, spec: &KernelSpec) -> &CudaFunction {
        &self
            .functions
            .iter()
            .find(|(n, _)| *n == spec.name)
            .expect("every KERNELS entry is loaded in Gpu::new")
            .1
    }

    /// Launches `spec` with one by-value parameter struct on `stream`.
    ///
    /// # Safety
    /// Every device address inside `params` must be valid for the accesses the kernel makes
    /// with those parameters, for as long as the launch runs on `stream`, and no other stream
    /// may access the written memory concurrently.
    pub(crate) unsafe fn launch<P: bytemuck::Pod>(
        &self,
        stream: &CudaStream,
        spec: &'static KernelSpec,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        params: P,
    ) -> Result<()> {
        // SAFETY: forwarded from this function's contract; no dynamic shared memory.
        unsafe { self.launch_shared(stream, spec, grid, block, 0, params) }
    }

    /// Launches `spec` like [`Gpu::launch`] with `shared_bytes` of dynamic shared memory per
    /// block (what the kernel reaches through `gpu_launch_sized_workgroup_mem`). Sizes above the
    /// default 48 KiB window are opted into for the function first.
    ///
    /// # Safety
    /// As for [`Gpu::launch`]; in addition the kernel must not touch shared memory beyond
    /// `shared_bytes` for these parameters.
    pub(crate) unsafe fn launch_shared<P: bytemuck::Pod>(
        &self,
        stream: &CudaStream,
        spec: &'static KernelSpec,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        shared_bytes: u32,
        params: P,
    ) -> Result<()> {
        const DEFAULT_WINDOW: u32 = 48 * 1024;
        if let Some(b) = spec.bounds {
            let threads = block.0 as u64 * block.1 as u64 * block.2 as u64;
            if threads > b.max_threads as u64 {
                return Err(Error::arg(
                    "block",
                    format!(
                        "{threads} threads per block; kernel `{}` was compiled for at most {}",
                        spec.name, b.max_threads
                    ),
                ));
            }
        }
        if shared_bytes > DEFAULT_WINDOW {
            self.function(spec)
                .set_attribute(
                    cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    shared_bytes as i32,
                )
                .op("cuFuncSetAttribute")?;
        }
        debug_assert_eq!(std::mem::size_of::<P>(), spec.param_size);
        let arg = ByValue(params);
        let cfg = LaunchConfig {
            grid_dim: grid,
            block_dim: block,
            shared_mem_bytes: shared_bytes,
        };
        let mut builder = stream.launch_builder(self.function(spec));
        builder.arg(&arg);
        // SAFETY: the parameter layout matches the PTX (validated at load), and the caller
        // guarantees the addresses inside are valid for this launch.
        unsafe { builder.launch(cfg) }
            .map(|_| ())
            .map_err(|source| Error::Launch {
                kernel: spec.name,
                grid,
                block,
                source,
            })
    }
}
