//! A kernel module loaded on a device, every kernel's function resolved as it loads: the
//! driver may synchronize the context to load a function, which must not happen at a first
//! launch while other streams' work runs (a kernel that waits for another stream's would never
//! see it).

use super::config::{check, DeviceLimits, FunctionLimits, LaunchConfig};
use super::image::KernelImage;
use crate::error::{DriverContext, Error, Result};
use cudarc::driver::sys::CUfunction_attribute as FnAttr;
use cudarc::driver::{CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::Ptx;
use std::collections::HashMap;
use std::sync::Arc;
use streamline_builder::manifest::EntryInfo;
use streamline_device::Kernel;

/// One kernel's function.
pub(super) struct Loaded {
    pub function: CudaFunction,
    pub limits: FunctionLimits,
}

/// A kernel module loaded on a device: every kernel of its manifest, ready to launch.
///
/// Made by [`Gpu::load`](crate::Gpu::load) (an embedded module) or
/// [`Gpu::load_file`](crate::Gpu::load_file); Streamline's own kernels are one such module
/// ([`Gpu::kernels`](crate::Gpu::kernels)).
pub struct Module {
    pub(super) image: KernelImage,
    _module: Arc<CudaModule>,
    /// Per manifest entry, in its order: its function.
    functions: Vec<Loaded>,
    /// Manifest entry index by kernel name.
    index: HashMap<String, usize>,
    pub(super) limits: DeviceLimits,
}

impl Module {
    /// Loads `image`'s code on `ctx`: its machine code if it has some, else its PTX (which
    /// the driver compiles for the device).
    pub(super) fn load(
        ctx: &Arc<CudaContext>,
        image: KernelImage,
        limits: DeviceLimits,
    ) -> Result<Module> {
        let code = match (&image.cubin, &image.ptx) {
            (Some(cubin), _) => Ptx::from_binary(cubin.to_vec()),
            (None, Some(ptx)) => Ptx::from_src(ptx.clone()),
            (None, None) => return image.fail("the image has neither machine code nor PTX".into()),
        };
        let module = ctx.load_module(code).map_err(|e| Error::KernelImage {
            origin: image.origin.clone(),
            reason: format!("the driver rejected it: {e}"),
        })?;
        let entries = &image.manifest.kernels;
        let index = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.name.clone(), i))
            .collect();
        let functions = entries
            .iter()
            .map(|e| resolve(&module, &image, &e.name))
            .collect::<Result<_>>()?;
        Ok(Module {
            image,
            _module: module,
            functions,
            index,
            limits,
        })
    }

    /// The code and manifest this module was loaded from.
    pub fn image(&self) -> &KernelImage {
        &self.image
    }

    /// The manifest entry index of the kernel named `name`.
    pub(super) fn index_of(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    /// Whether the module has `kernel`'s entry (a kernel built for some architectures only,
    /// [`Kernel::only_on`](streamline_device::Kernel::only_on), is missing from the others').
    pub fn has<P>(&self, kernel: Kernel<P>) -> bool {
        self.index_of(kernel.name()).is_some()
    }

    /// The manifest entry of index `i`.
    pub(super) fn entry_at(&self, i: usize) -> &EntryInfo {
        &self.image.manifest.kernels[i]
    }

    /// The manifest entry and function of `kernel`, the entry checked against the declaration.
    pub(super) fn loaded<P>(&self, kernel: Kernel<P>) -> Result<(&EntryInfo, &Loaded)> {
        let name = kernel.name();
        let i = self
            .index_of(name)
            .ok_or_else(|| self.image.missing(kernel))?;
        let entry = self.entry_at(i);
        self.image.check_entry(entry, kernel)?;
        Ok((entry, &self.functions[i]))
    }

    /// The manifest entry and function of the kernel at index `i`, without a declaration.
    pub(super) fn loaded_at(&self, i: usize) -> (&EntryInfo, &Loaded) {
        (self.entry_at(i), &self.functions[i])
    }

    /// Every kernel's name and function, in the manifest's order.
    pub fn functions(&self) -> impl Iterator<Item = (&str, &CudaFunction)> {
        (0..self.functions.len())
            .map(|i| (self.entry_at(i).name.as_str(), &self.functions[i].function))
    }

    /// The function of `kernel` (for its attributes: registers, local memory).
    pub fn function<P>(&self, kernel: Kernel<P>) -> Result<&CudaFunction> {
        Ok(&self.loaded(kernel)?.1.function)
    }

    /// Checks `cfg` for `kernel` against its declared launch bounds, what its compiled function
    /// allows and the device's limits; the error names the kernel and the limit.
    pub fn check_config<P>(&self, kernel: Kernel<P>, cfg: &LaunchConfig) -> Result<()> {
        let (entry, loaded) = self.loaded(kernel)?;
        check(&entry.name, entry.bounds, loaded.limits, &self.limits, cfg)
    }
}

/// The function `name` of `module` (loaded from `image`) and what it allows.
fn resolve(module: &Arc<CudaModule>, image: &KernelImage, name: &str) -> Result<Loaded> {
    let function = module.load_function(name).map_err(|e| Error::KernelImage {
        origin: image.origin.clone(),
        reason: format!("cannot load kernel `{name}`: {e}"),
    })?;
    let attr = |a: FnAttr| function.get_attribute(a).op("cuFuncGetAttribute");
    let limits = FunctionLimits {
        max_threads: attr(FnAttr::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)? as u32,
        static_shared: attr(FnAttr::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)? as u32,
    };
    Ok(Loaded { function, limits })
}
