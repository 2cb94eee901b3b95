//! Kernel images: the machine code (cubin) and PTX of a kernel crate with the manifest written
//! beside them at build time, embedded in the binary ([`include_kernels!`]) or read from files,
//! refused when they differ from their manifest, and picked for a device: its architecture's
//! machine code where the driver can load it, else PTX the driver compiles.
//!
//! [`include_kernels!`]: crate::include_kernels

use crate::error::{Error, Result};
use std::borrow::Cow;
use std::path::Path;
use streamline_builder::arch::Arch;
use streamline_builder::manifest::{
    bytes_hash, field_info, field_matches, parse_entries, ptx_hash, BoundsInfo, EntryInfo,
    FieldInfo, Manifest, ParamInfo,
};
use streamline_device::Kernel;

/// One architecture of an [`EmbeddedModule`]. Everything is zlib-compressed (the code is most
/// of a binary that embeds it); only what a device loads is inflated.
#[derive(Clone, Copy, Debug)]
pub struct EmbeddedArch {
    /// The architecture, e.g. `sm_90`.
    pub arch: &'static str,
    /// Its PTX, zlib-compressed, where embedded (the highest architecture's, for newer
    /// devices).
    pub ptx: Option<&'static [u8]>,
    /// Its machine code, zlib-compressed, where built.
    pub cubin: Option<&'static [u8]>,
    /// Its manifest's JSON, zlib-compressed.
    pub manifest: &'static [u8],
}

impl EmbeddedArch {
    /// `bytes` inflated; `what` names them for the error.
    fn inflate(&self, module: &str, what: &str, bytes: &[u8]) -> Result<Vec<u8>> {
        use std::io::Read;
        let mut out = Vec::new();
        flate2::read::ZlibDecoder::new(bytes)
            .read_to_end(&mut out)
            .map_err(|e| Error::KernelImage {
                origin: format!("embedded {module} {}", self.arch),
                reason: format!("its {what} does not inflate: {e}"),
            })?;
        Ok(out)
    }
}

/// The kernels of one kernel crate, embedded at compile time by [`include_kernels!`] from what
/// `streamline_builder::Builder` wrote in the build script.
///
/// [`include_kernels!`]: crate::include_kernels
#[derive(Clone, Copy, Debug)]
pub struct EmbeddedModule {
    /// The kernel crate's library name.
    pub name: &'static str,
    /// Hash of the kernel sources it was built from.
    pub source_hash: &'static str,
    /// Per architecture, lowest first.
    pub archs: &'static [EmbeddedArch],
}

/// Embeds the kernels a build script built with `streamline_builder::Builder` from the kernel
/// crate whose library name is given, as an [`EmbeddedModule`] to pass to
/// [`Gpu::load`](crate::Gpu::load).
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

/// Architectures of Streamline's own kernels embedded in this binary, lowest first.
pub fn embedded_archs() -> Vec<&'static str> {
    KERNELS.archs()
}

/// Whether machine code for `arch` runs on a device of compute capability `major.minor`
/// (see [`Arch::cubin_runs_on`]); an unreadable name runs nowhere.
fn cubin_runs_on(arch: &str, major: i32, minor: i32) -> bool {
    Arch::parse(arch).is_some_and(|a| a.cubin_runs_on(major as u32, minor as u32))
}

/// Whether the driver compiles the PTX of `arch` for a device of compute capability
/// `major.minor` (see [`Arch::ptx_runs_on`]).
fn ptx_runs_on(arch: &str, major: i32, minor: i32) -> bool {
    Arch::parse(arch).is_some_and(|a| a.ptx_runs_on(major as u32, minor as u32))
}

/// Whether a driver for CUDA `driver` (unknown: assumed able) can load machine code that a
/// `ptxas` of CUDA `needs` assembled (unrecorded: assumed loadable).
fn driver_loads(driver: Option<(i32, i32)>, needs: Option<(u32, u32)>) -> bool {
    match (driver, needs) {
        (Some(have), Some(need)) => (have.0 as u32, have.1 as u32) >= need,
        _ => true,
    }
}

impl EmbeddedModule {
    /// The embedded architectures, lowest first.
    pub fn archs(&self) -> Vec<&'static str> {
        self.archs.iter().map(|a| a.arch).collect()
    }

    /// What is embedded: `sm_80 (cubin), sm_90 (cubin, PTX)`.
    pub fn contents(&self) -> String {
        let parts: Vec<String> = self
            .archs
            .iter()
            .map(|a| {
                let kinds: Vec<&str> = [a.cubin.map(|_| "cubin"), a.ptx.map(|_| "PTX")]
                    .into_iter()
                    .flatten()
                    .collect();
                format!("{} ({})", a.arch, kinds.join(", "))
            })
            .collect();
        parts.join(", ")
    }

    /// Everything embedded for the architecture named `arch` (its machine code and its PTX,
    /// where embedded), whatever device runs.
    pub fn arch_image(&self, arch: &str) -> Result<KernelImage> {
        let a = self
            .archs
            .iter()
            .find(|a| a.arch == arch)
            .ok_or_else(|| Error::KernelImage {
                origin: format!("embedded {}", self.name),
                reason: format!("no {arch} code is embedded (embedded: {})", self.contents()),
            })?;
        let ptx =
            match a.ptx {
                Some(z) => Some(String::from_utf8(a.inflate(self.name, "PTX", z)?).map_err(
                    |_| Error::KernelImage {
                        origin: format!("embedded {} {arch}", self.name),
                        reason: "its PTX is not UTF-8 text".into(),
                    },
                )?),
                None => None,
            };
        let cubin = match a.cubin {
            Some(z) => Some(Cow::Owned(a.inflate(self.name, "cubin", z)?)),
            None => None,
        };
        KernelImage::checked(
            format!("embedded {} {arch}", self.name),
            ptx,
            cubin,
            self.manifest(a)?,
        )
    }

    fn manifest(&self, a: &EmbeddedArch) -> Result<Manifest> {
        let json = a.inflate(self.name, "manifest", a.manifest)?;
        serde_json::from_slice(&json).map_err(|e| Error::KernelImage {
            origin: format!("embedded {} {}", self.name, a.arch),
            reason: format!("bad manifest: {e}"),
        })
    }

    /// The image to load on a device of compute capability `major.minor` under the driver
    /// this process finds: [`EmbeddedModule::image_for_driver`].
    pub fn image_for(&self, major: i32, minor: i32) -> Result<KernelImage> {
        self.image_for_driver(major, minor, super::driver_version().ok())
    }

    /// The image to load on a device of compute capability `major.minor` under a driver for
    /// CUDA `driver` (unknown: assumed able to load the machine code): the machine code of the
    /// highest architecture that runs on the device, if the driver is not older than the
    /// `ptxas` that assembled it; else the PTX of the highest architecture not above the
    /// device's ([`EmbeddedModule::ptx_image_for`]).
    pub fn image_for_driver(
        &self,
        major: i32,
        minor: i32,
        driver: Option<(i32, i32)>,
    ) -> Result<KernelImage> {
        let mut too_old = None;
        for a in self.archs.iter().rev() {
            let Some(cubin) = a.cubin else { continue };
            if !cubin_runs_on(a.arch, major, minor) {
                continue;
            }
            let manifest = self.manifest(a)?;
            let needs = manifest.cubin.as_ref().map(|c| c.cuda);
            if !driver_loads(driver, needs) {
                too_old = driver.zip(needs).map(|(have, need)| (a.arch, have, need));
                continue;
            }
            return KernelImage::checked(
                format!("embedded {} {} (cubin)", self.name, a.arch),
                None,
                Some(Cow::Owned(a.inflate(self.name, "cubin", cubin)?)),
                manifest,
            );
        }
        self.ptx_image_for(major, minor).map_err(|e| match too_old {
            Some((arch, have, need)) => Error::KernelImage {
                origin: format!("embedded {} {arch}", self.name),
                reason: format!(
                    "the driver supports CUDA {}.{} but the {arch} machine code needs CUDA {}.{}, and no PTX suits compute capability {major}.{minor}: update the driver, or build with `Builder::all_ptx(true)` to embed every architecture's PTX",
                    have.0, have.1, need.0, need.1
                ),
            },
            None => e,
        })
    }

    /// The PTX image of the highest architecture whose PTX the driver compiles for compute
    /// capability `major.minor`: not above it, or exactly it for architecture-specific PTX.
    pub fn ptx_image_for(&self, major: i32, minor: i32) -> Result<KernelImage> {
        let a = self
            .archs
            .iter()
            .filter(|a| a.ptx.is_some() && ptx_runs_on(a.arch, major, minor))
            .max_by_key(|a| Arch::parse(a.arch))
            .ok_or_else(|| Error::KernelImage {
                origin: format!("embedded {}", self.name),
                reason: format!(
                    "nothing embedded suits compute capability {major}.{minor} (embedded: {})",
                    self.contents()
                ),
            })?;
        let ptx = match a.ptx {
            Some(z) => {
                let bytes = a.inflate(self.name, "PTX", z)?;
                Some(String::from_utf8(bytes).map_err(|_| Error::KernelImage {
                    origin: format!("embedded {} {}", self.name, a.arch),
                    reason: "its PTX is not UTF-8 text".into(),
                })?)
            }
            None => None,
        };
        KernelImage::checked(
            format!("embedded {} {} (PTX)", self.name, a.arch),
            ptx,
            None,
            self.manifest(a)?,
        )
    }
}

/// A kernel module's code, machine code or PTX or both, and its manifest.
#[derive(Clone, Debug)]
pub struct KernelImage {
    /// Where it came from (`embedded NAME sm_90 (cubin)` or a file path).
    pub origin: String,
    /// PTX text, if the image has it.
    pub ptx: Option<String>,
    /// Machine code for the manifest's architecture, if the image has it.
    pub cubin: Option<Cow<'static, [u8]>>,
    /// The manifest written beside it at build time.
    pub manifest: Manifest,
}

impl KernelImage {
    /// Streamline's own embedded image for a device of compute capability `major.minor` (see
    /// [`EmbeddedModule::image_for`]).
    pub fn embedded_for(major: i32, minor: i32) -> Result<KernelImage> {
        KERNELS.image_for(major, minor)
    }

    /// Streamline's own embedded PTX image for compute capability `major.minor` (see
    /// [`EmbeddedModule::ptx_image_for`]).
    pub fn embedded_ptx_for(major: i32, minor: i32) -> Result<KernelImage> {
        KERNELS.ptx_image_for(major, minor)
    }

    /// A PTX file `DIR/NAME.ptx`, the `DIR/NAME.manifest.json` beside it (as
    /// `streamline_builder::Builder` and `cargo xtask build-kernels` write them) and, where
    /// the manifest records one, the machine code `DIR/NAME.cubin`.
    pub fn from_file(path: &Path) -> Result<KernelImage> {
        let origin = path.display().to_string();
        let read = |p: &Path| {
            std::fs::read(p).map_err(|source| Error::Io {
                path: p.display().to_string(),
                source,
            })
        };
        let ptx = String::from_utf8(read(path)?).map_err(|_| Error::KernelImage {
            origin: origin.clone(),
            reason: "the PTX is not UTF-8 text".into(),
        })?;
        let mpath = path.with_extension("manifest.json");
        let text = String::from_utf8_lossy(&read(&mpath)?).into_owned();
        let manifest: Manifest = serde_json::from_str(&text).map_err(|e| Error::KernelImage {
            origin: origin.clone(),
            reason: format!("bad manifest {}: {e}", mpath.display()),
        })?;
        let cubin_path = path.with_extension("cubin");
        let cubin = match manifest.cubin {
            Some(_) if cubin_path.is_file() => Some(Cow::Owned(read(&cubin_path)?)),
            _ => None,
        };
        KernelImage::checked(origin, Some(ptx), cubin, manifest)
    }

    /// An image, validated ([`KernelImage::validate`]).
    fn checked(
        origin: String,
        ptx: Option<String>,
        cubin: Option<Cow<'static, [u8]>>,
        manifest: Manifest,
    ) -> Result<KernelImage> {
        let image = KernelImage {
            origin,
            ptx,
            cubin,
            manifest,
        };
        image.validate()?;
        Ok(image)
    }

    /// This image with only the code to load on a device of compute capability `major.minor`
    /// under a driver for CUDA `driver`: its machine code where that runs there (see
    /// [`EmbeddedModule::image_for_driver`]), else its PTX.
    pub fn for_device(mut self, major: i32, minor: i32, driver: Option<(i32, i32)>) -> Self {
        let runs = cubin_runs_on(&self.manifest.arch, major, minor)
            && driver_loads(driver, self.manifest.cubin.as_ref().map(|c| c.cuda));
        if self.cubin.is_some() && runs {
            self.ptx = None;
        } else if self.ptx.is_some() {
            self.cubin = None;
        }
        self
    }

    pub(super) fn fail<T>(&self, reason: String) -> Result<T> {
        Err(Error::KernelImage {
            origin: self.origin.clone(),
            reason,
        })
    }

    /// Refuses an image whose PTX's entry points, parameter layouts or launch bounds differ
    /// from its manifest, or whose PTX or machine code is not the one the manifest was written
    /// for (edited or swapped behind it).
    pub fn validate(&self) -> Result<()> {
        if self.ptx.is_none() && self.cubin.is_none() {
            return self.fail("the image has neither machine code nor PTX".into());
        }
        if let Some(ptx) = &self.ptx {
            let entries = parse_entries(ptx);
            let same = entries.len() == self.manifest.kernels.len()
                && entries
                    .iter()
                    .zip(&self.manifest.kernels)
                    .all(|(p, m)| p.name == m.name && p.params == m.params && p.bounds == m.bounds);
            if !same {
                return self.fail("the PTX's entry points differ from its manifest".into());
            }
            if let Some(want) = &self.manifest.ptx_sha256 {
                if ptx_hash(ptx) != *want {
                    return self.fail(
                        "the PTX is not the one its manifest was written for (edited or replaced after the build): rebuild it".into(),
                    );
                }
            }
        }
        if let Some(cubin) = &self.cubin {
            match &self.manifest.cubin {
                Some(c) if c.sha256 == bytes_hash(cubin) => {}
                Some(_) => {
                    return self.fail(
                        "the cubin is not the one its manifest was written for (replaced after the build): rebuild it".into(),
                    )
                }
                None => return self.fail("the manifest records no cubin".into()),
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

    /// Refuses an image built from other sources than `source_hash` (a `--ptx` file meant to
    /// replace an embedded module).
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

    /// The manifest entry of `kernel`, refused unless its parameter layout, launch bounds and
    /// parameter fields are those the host's declaration says (a stale or foreign image).
    pub fn entry<P>(&self, kernel: Kernel<P>) -> Result<&EntryInfo> {
        let name = kernel.name();
        match self.manifest.kernels.iter().find(|e| e.name == name) {
            Some(entry) => self.check_entry(entry, kernel).map(|()| entry),
            None => Err(self.missing(kernel)),
        }
    }

    /// The error for a declared kernel the image lacks.
    pub(super) fn missing<P>(&self, kernel: Kernel<P>) -> Error {
        let name = kernel.name();
        let reason = match kernel.arch() {
            Some(arch) if arch != self.manifest.arch => format!(
                "kernel `{name}` is built for {arch} only and this device runs the {} build (its compute capability is not {arch}'s)",
                self.manifest.arch
            ),
            _ => format!(
                "kernel `{name}` is declared but the image has no entry `{name}` (was it compiled for nvptx64 from the crate that declares it?)"
            ),
        };
        Error::KernelImage {
            origin: self.origin.clone(),
            reason,
        }
    }

    /// [`KernelImage::entry`]'s checks of `kernel`'s entry: parameter layout, bounds and fields
    /// (compared without allocating: every launch makes them).
    pub(super) fn check_entry<P>(&self, entry: &EntryInfo, kernel: Kernel<P>) -> Result<()> {
        let name = kernel.name();
        let want = [ParamInfo {
            size: kernel.param_size(),
            align: kernel.param_align(),
        }];
        if entry.params != want {
            return self.fail(format!(
                "kernel `{name}` takes {:?} but this binary passes {:?}: the image is stale, rebuild it",
                entry.params, want
            ));
        }
        let bounds = kernel.bounds().map(|b| BoundsInfo {
            max_threads: b.max_threads,
            min_blocks: b.min_blocks,
        });
        if entry.bounds != bounds {
            return self.fail(format!(
                "kernel `{name}` was built with launch bounds {:?} but is declared with {bounds:?}: the image is stale, rebuild it",
                entry.bounds
            ));
        }
        let Some(fields) = kernel.fields() else {
            return Ok(());
        };
        match &entry.fields {
            Some(have)
                if have.len() == fields.len()
                    && have.iter().zip(fields).all(|(h, f)| field_matches(h, f)) =>
            {
                Ok(())
            }
            Some(have) => {
                let want: Vec<FieldInfo> = fields.iter().map(field_info).collect();
                let differs = |(i, w): (usize, &FieldInfo)| have.get(i) != Some(w);
                let at = want.iter().enumerate().find(|&p| differs(p)).map_or(want.len(), |p| p.0);
                let show = |f: Option<&FieldInfo>| {
                    f.map_or("nothing".to_string(), |f| {
                        format!("`{}: {}` at byte {}", f.name, f.kind, f.offset)
                    })
                };
                self.fail(format!(
                    "kernel `{name}`'s parameter field {at} is {} in the image but {} in this binary: the image is stale, rebuild it",
                    show(have.get(at)),
                    show(want.get(at))
                ))
            }
            None => self.fail(format!(
                "kernel `{name}`: the image records no fields of its parameter struct (built by an older Streamline): rebuild it"
            )),
        }
    }
}
