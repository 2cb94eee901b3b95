//! Building a kernel crate for a set of architectures: [`Builder`].

use crate::arch::Arch;
use crate::link::{run_if_invoked_as_linker, ENV_LIBDEVICE, ENV_LINK, ENV_LLVM_BIN};
use crate::manifest::{bytes_hash, finish_ptx, hash_files, ptx_hash, CubinInfo, Manifest};
use crate::tools::{clean_command, ensure_nightly, find_libdevice, find_ptxas, NIGHTLY};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// Architectures built when none are named: Ampere (sm_80) and Hopper (sm_90).
pub const DEFAULT_ARCHS: &[&str] = &["sm_80", "sm_90"];

/// Architectures of Streamline's own kernels: [`DEFAULT_ARCHS`] and `sm_90a`, for the kernels
/// that use Hopper's tensor-core instructions (`wgmma`) and exist only there.
pub const ARCHS_WITH_SM90A: &[&str] = &["sm_80", "sm_90", "sm_90a"];

/// Builds one kernel crate (a `#![no_std]` library whose kernels are defined with
/// `streamline_device::kernel!`) to PTX, one file per architecture, each with its manifest.
///
/// From a `build.rs`, the whole build step is one line of its `main`:
///
/// ```no_run
/// streamline_builder::Builder::new("kernels").build_or_exit();
/// ```
///
/// and the host embeds the result with `streamline::include_kernels!("kernels")` (the
/// kernel crate's library name). The first build installs the pinned nightly with `rustup` and
/// libdevice with `pip`; no CUDA toolkit or LLVM is needed.
#[derive(Clone, Debug)]
pub struct Builder {
    crate_dir: PathBuf,
    archs: Option<Vec<String>>,
    default_archs: Vec<String>,
    out_dir: Option<PathBuf>,
    target_dir: Option<PathBuf>,
    cache: Option<PathBuf>,
    linker: Option<PathBuf>,
    cubins: bool,
    all_ptx: bool,
}

/// One built architecture.
#[derive(Clone, Debug)]
pub struct BuiltArch {
    /// Architecture, e.g. `sm_90`.
    pub arch: String,
    /// The PTX file.
    pub ptx: PathBuf,
    /// The manifest file beside it.
    pub manifest_path: PathBuf,
    /// The machine code beside it (`NAME.cubin`), unless [`Builder::cubins`] turned it off.
    pub cubin: Option<PathBuf>,
    /// The manifest.
    pub manifest: Manifest,
}

/// What [`Builder::build`] made.
#[derive(Clone, Debug)]
pub struct Built {
    /// The kernel crate's library name (`my_kernels` for a package `my-kernels`).
    pub name: String,
    /// Hash of the sources the PTX was built from (also in every manifest).
    pub source_hash: String,
    /// Every source file of the build (the kernel crate and its local dependencies).
    pub sources: Vec<PathBuf>,
    /// The architectures, lowest first.
    pub archs: Vec<BuiltArch>,
    /// Whether every architecture's PTX is embedded ([`Builder::all_ptx`]).
    pub all_ptx: bool,
}

/// Checks an architecture name (`sm_NN`, or `sm_NNa` for architecture-specific code; NN from
/// 53, the first with f16 arithmetic).
pub fn check_arch(arch: &str) -> Result<Arch> {
    Arch::parse(arch).with_context(|| {
        format!(
            "architecture `{arch}` is not one of sm_{}..=sm_{} (e.g. sm_80, sm_90, sm_90a)",
            Arch::MIN,
            Arch::MAX
        )
    })
}

impl Builder {
    /// A build of the kernel crate at `crate_dir` (relative paths are taken from the calling
    /// package's directory in a build script, from the current directory elsewhere).
    ///
    /// When rustc runs this program as the kernels' linker (during the nested build), this
    /// performs the link and exits instead of returning.
    pub fn new(crate_dir: impl AsRef<Path>) -> Builder {
        run_if_invoked_as_linker();
        let dir = crate_dir.as_ref();
        let crate_dir = match std::env::var_os("CARGO_MANIFEST_DIR") {
            Some(base) if dir.is_relative() => PathBuf::from(base).join(dir),
            _ => dir.to_path_buf(),
        };
        Builder {
            crate_dir,
            archs: None,
            default_archs: DEFAULT_ARCHS.iter().map(|s| s.to_string()).collect(),
            out_dir: None,
            target_dir: None,
            cache: None,
            linker: None,
            cubins: true,
            all_ptx: false,
        }
    }

    /// Whether to assemble machine code (a cubin per architecture, with `ptxas`) and embed it
    /// (default: yes). A device of an embedded architecture then loads its kernels at once
    /// instead of having the driver compile the PTX on first use, which takes seconds for a
    /// large module on a machine whose driver cache is empty.
    pub fn cubins(mut self, yes: bool) -> Builder {
        self.cubins = yes;
        self
    }

    /// Whether to embed every architecture's PTX (default: only the highest's, for devices
    /// newer than every cubin; the others run their cubins). Every PTX is written to the output
    /// directory either way. Turn it on for older GPUs whose driver predates the `ptxas` that
    /// assembled the cubins, which cannot load them.
    pub fn all_ptx(mut self, yes: bool) -> Builder {
        self.all_ptx = yes;
        self
    }

    /// The architectures to build (default: `STREAMLINE_ARCHS`, comma-separated, else
    /// [`Builder::default_archs`]). The host loads the highest one whose code runs on its
    /// device.
    pub fn archs<S: AsRef<str>>(mut self, archs: &[S]) -> Builder {
        self.archs = Some(archs.iter().map(|a| a.as_ref().to_string()).collect());
        self
    }

    /// The architectures to build when neither [`Builder::archs`] nor `STREAMLINE_ARCHS` names
    /// any (default: [`DEFAULT_ARCHS`]).
    pub fn default_archs<S: AsRef<str>>(mut self, archs: &[S]) -> Builder {
        self.default_archs = archs.iter().map(|a| a.as_ref().to_string()).collect();
        self
    }

    /// Where `<arch>/<name>.ptx` and `<arch>/<name>.manifest.json` go (default in a build
    /// script: `$OUT_DIR/streamline`).
    pub fn out_dir(mut self, dir: impl Into<PathBuf>) -> Builder {
        self.out_dir = Some(dir.into());
        self
    }

    /// The nested cargo's target directory (default: `kernels/<name>` under the calling
    /// build's target directory). Never the calling cargo's own, which it holds locked.
    pub fn target_dir(mut self, dir: impl Into<PathBuf>) -> Builder {
        self.target_dir = Some(dir.into());
        self
    }

    /// Where downloaded wheels and extracted tools are kept (default: `toolchain-cache` under
    /// the calling build's target directory).
    pub fn cache_dir(mut self, dir: impl Into<PathBuf>) -> Builder {
        self.cache = Some(dir.into());
        self
    }

    /// The program rustc runs as the linker (default: this program, which [`Builder::new`]
    /// turns into the link step when rustc runs it).
    pub fn linker(mut self, program: impl Into<PathBuf>) -> Builder {
        self.linker = Some(program.into());
        self
    }

    /// [`Builder::build`] for a build script: on failure prints one clear error and exits, so
    /// cargo shows the message rather than a backtrace.
    pub fn build_or_exit(self) -> Built {
        match self.build() {
            Ok(b) => b,
            Err(e) => {
                eprintln!("error: building the GPU kernels failed: {e:#}");
                std::process::exit(1);
            }
        }
    }

    /// Builds every architecture. In a build script it also writes the file
    /// `streamline::include_kernels!` embeds and tells cargo to rerun only when a kernel
    /// source changes (touching host code does not rebuild the kernels).
    pub fn build(self) -> Result<Built> {
        // Set only when this runs in a build script.
        let out_env = std::env::var_os("OUT_DIR").map(PathBuf::from);
        let manifest_path = self.crate_dir.join("Cargo.toml");
        if out_env.is_some() {
            println!("cargo:rerun-if-changed={}", manifest_path.display());
            for var in ["STREAMLINE_LIBDEVICE", "STREAMLINE_ARCHS", "CUDA_HOME"] {
                println!("cargo:rerun-if-env-changed={var}");
            }
        }
        let name = lib_name(&manifest_path)?;
        let archs = match self.archs {
            Some(a) => a,
            None => match std::env::var("STREAMLINE_ARCHS") {
                Ok(list) => list
                    .split(',')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect(),
                Err(_) => self.default_archs,
            },
        };
        if archs.is_empty() {
            bail!("no architecture named (STREAMLINE_ARCHS or Builder::archs, e.g. sm_80,sm_90)");
        }
        let mut archs_sorted = Vec::new();
        for arch in archs {
            archs_sorted.push((check_arch(&arch)?, arch));
        }
        archs_sorted.sort();
        archs_sorted.dedup();
        let target = match &out_env {
            Some(out) => cargo_target_dir(out),
            None => self.crate_dir.join("target"),
        };
        let out_dir = match (self.out_dir, &out_env) {
            (Some(d), _) => d,
            (None, Some(out)) => out.join("streamline"),
            (None, None) => bail!("Builder::out_dir is required outside a build script"),
        };
        let target_dir = self
            .target_dir
            .unwrap_or_else(|| target.join("kernels").join(&name));
        let cache = self.cache.unwrap_or_else(|| target.join("toolchain-cache"));
        let linker = match self.linker {
            Some(l) => l,
            None => std::env::current_exe().context("locating this program to act as linker")?,
        };

        let llvm_bin = ensure_nightly()?;
        let libdevice = find_libdevice(&cache)?;
        let mut built = Vec::new();
        let mut sources = Vec::new();
        let mut source_hash = String::new();
        for (_, arch) in &archs_sorted {
            let arch_target = target_dir.join(arch);
            let flags = [
                "-C",
                &format!("target-cpu={arch}"),
                "-C",
                &format!("linker={}", linker.display()),
                "-C",
                &format!(
                    "llvm-args=-unroll-threshold={}",
                    crate::link::UNROLL_THRESHOLD
                ),
            ]
            .join("\x1f");
            let status = clean_command("rustup")
                .args(["run", NIGHTLY, "cargo", "rustc", "--lib", "--release"])
                .args(["--target", "nvptx64-nvidia-cuda", "-Zbuild-std=core"])
                .args(["--crate-type", "cdylib"])
                // The kernels' profile, whatever the workspace around the crate says.
                .args(["--config", "profile.release.opt-level=3"])
                .args(["--config", "profile.release.lto=\"fat\""])
                .args(["--config", "profile.release.panic=\"abort\""])
                .args(["--config", "profile.release.codegen-units=1"])
                .args(["--config", "profile.release.debug=false"])
                .arg("--manifest-path")
                .arg(&manifest_path)
                .arg("--target-dir")
                .arg(&arch_target)
                .current_dir(&self.crate_dir)
                .env("CARGO_ENCODED_RUSTFLAGS", flags)
                .env(ENV_LINK, "1")
                .env(ENV_LLVM_BIN, &llvm_bin)
                .env(ENV_LIBDEVICE, &libdevice)
                .status()
                .context("could not run cargo for the kernels")?;
            if !status.success() {
                bail!(
                    "building the kernel crate {} for {arch} failed (see the cargo output above)",
                    self.crate_dir.display()
                );
            }
            let release = arch_target.join("nvptx64-nvidia-cuda/release");
            let produced = release.join(format!("{name}.ptx"));
            let raw = std::fs::read_to_string(&produced)
                .with_context(|| format!("reading {}", produced.display()))?;
            if sources.is_empty() {
                sources = dep_info_sources(&release.join(format!("{name}.d")))?;
                sources.push(manifest_path.clone());
                sources.sort();
                sources.dedup();
                source_hash = hash_files(&self.crate_dir, &sources)?;
            }
            let (ptx, kernels) =
                finish_ptx(&raw).with_context(|| format!("kernel crate `{name}` for {arch}"))?;
            let dir = out_dir.join(arch);
            std::fs::create_dir_all(&dir)?;
            let out_ptx = dir.join(format!("{name}.ptx"));
            write_if_changed(&out_ptx, ptx.as_bytes())?;
            built.push(BuiltArch {
                arch: arch.clone(),
                ptx: out_ptx,
                manifest_path: dir.join(format!("{name}.manifest.json")),
                cubin: self.cubins.then(|| dir.join(format!("{name}.cubin"))),
                manifest: Manifest {
                    arch: arch.clone(),
                    source_hash: source_hash.clone(),
                    kernels,
                    ptx_sha256: Some(ptx_hash(&ptx)),
                    cubin: None,
                },
            });
        }
        if self.cubins {
            assemble_cubins(&mut built, &find_ptxas(&cache)?)?;
        }
        for b in &built {
            write_if_changed(
                &b.manifest_path,
                serde_json::to_string_pretty(&b.manifest)?.as_bytes(),
            )?;
        }
        let built = Built {
            name,
            source_hash,
            sources,
            archs: built,
            all_ptx: self.all_ptx,
        };
        if let Some(out) = &out_env {
            for f in &built.sources {
                println!("cargo:rerun-if-changed={}", f.display());
            }
            println!(
                "cargo:rerun-if-changed={}",
                self.crate_dir.join("src").display()
            );
            write_if_changed(
                &out.join(format!("streamline_{}.rs", built.name)),
                built.embed_code()?.as_bytes(),
            )?;
        }
        Ok(built)
    }
}

impl Built {
    /// The expression `streamline::include_kernels!` expands to: the module's name, source
    /// hash and, per architecture, its manifest, its cubin and its PTX where embedded (the
    /// highest architecture's, every architecture's with [`Builder::all_ptx`], and any without
    /// a cubin), all included at compile time and zlib-compressed (see [`compressed`]).
    pub fn embed_code(&self) -> Result<String> {
        let included = |p: &Path| -> Result<String> {
            Ok(format!(
                "Some(include_bytes!({:?}))",
                compressed(p)?.display().to_string()
            ))
        };
        let mut code = String::from("::streamline::EmbeddedModule {\n");
        code.push_str(&format!("    name: {:?},\n", self.name));
        code.push_str(&format!("    source_hash: {:?},\n", self.source_hash));
        code.push_str("    archs: &[\n");
        // The PTX for devices newer than every cubin: the highest architecture's that is not
        // architecture-specific (that one's PTX runs on its own architecture only).
        let portable = self
            .archs
            .iter()
            .filter_map(|b| Arch::parse(&b.arch).filter(|a| !a.specific))
            .max();
        for b in &self.archs {
            let arch = Arch::parse(&b.arch);
            let highest = arch.is_some() && arch == portable;
            let ptx = if highest || self.all_ptx || b.cubin.is_none() {
                included(&b.ptx)?
            } else {
                "None".to_string()
            };
            let cubin = match &b.cubin {
                Some(c) => included(c)?,
                None => "None".to_string(),
            };
            code.push_str(&format!(
                "        ::streamline::EmbeddedArch {{ arch: {:?}, ptx: {ptx}, cubin: {cubin}, manifest: include_bytes!({:?}) }},\n",
                b.arch,
                compressed(&b.manifest_path)?.display().to_string()
            ));
        }
        code.push_str("    ],\n}\n");
        Ok(code)
    }
}

/// Writes `FILE.zlib`, `file` zlib-compressed (a module's code is most of a binary that
/// embeds it, and compresses several times over), unless it is already there, and returns its
/// path.
pub fn compressed(file: &Path) -> Result<PathBuf> {
    use std::io::Write;
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(&bytes)?;
    let out = PathBuf::from(format!("{}.zlib", file.display()));
    write_if_changed(&out, &encoder.finish()?)?;
    Ok(out)
}

/// Assembles every architecture's cubin with `ptxas`, all at once, and records it in its
/// manifest. A cubin already beside the same PTX, as an earlier build's manifest records it,
/// is kept.
fn assemble_cubins(built: &mut [BuiltArch], ptxas: &Path) -> Result<()> {
    let cuda = crate::ptxas::release(ptxas)?;
    let infos = std::thread::scope(|scope| {
        let jobs: Vec<_> = built
            .iter()
            .map(|b| scope.spawn(move || cubin_of(b, ptxas, cuda)))
            .collect();
        jobs.into_iter()
            .map(|job| {
                job.join()
                    .map_err(|_| anyhow::anyhow!("assembling a cubin panicked"))?
            })
            .collect::<Result<Vec<_>>>()
    })?;
    for (b, info) in built.iter_mut().zip(infos) {
        b.manifest.cubin = Some(info);
    }
    Ok(())
}

/// The cubin of `b` (assembled unless its earlier build's is still current) and its record.
fn cubin_of(b: &BuiltArch, ptxas: &Path, cuda: (u32, u32)) -> Result<CubinInfo> {
    let Some(out) = &b.cubin else {
        bail!("no cubin path for {}", b.arch);
    };
    let earlier: Option<Manifest> = std::fs::read_to_string(&b.manifest_path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    if let (Some(m), Ok(bytes)) = (earlier, std::fs::read(out)) {
        if let Some(c) = m.cubin.filter(|c| c.cuda == cuda) {
            if m.ptx_sha256 == b.manifest.ptx_sha256 && c.sha256 == bytes_hash(&bytes) {
                return Ok(c);
            }
        }
    }
    crate::ptxas::cubin(ptxas, &b.ptx, &b.arch, out)?;
    let bytes = std::fs::read(out).with_context(|| format!("reading {}", out.display()))?;
    Ok(CubinInfo {
        sha256: bytes_hash(&bytes),
        cuda,
    })
}

/// The library name of the package at `manifest` (`[lib] name`, else the package name with
/// `-` as `_`).
fn lib_name(manifest: &Path) -> Result<String> {
    let text = std::fs::read_to_string(manifest).with_context(|| {
        format!(
            "no kernel crate at {}: reading its Cargo.toml",
            manifest.parent().unwrap_or(manifest).display()
        )
    })?;
    let doc: toml::Table = text
        .parse()
        .with_context(|| format!("{} is not valid TOML", manifest.display()))?;
    let lib = doc
        .get("lib")
        .and_then(|l| l.get("name"))
        .and_then(|n| n.as_str());
    let package = doc
        .get("package")
        .and_then(|p| p.get("name"))
        .and_then(|n| n.as_str());
    match lib.or(package) {
        Some(n) => Ok(n.replace('-', "_")),
        None => bail!("{} has no [package] name", manifest.display()),
    }
}

/// The source files cargo's dep-info `file` lists, less those of the Rust toolchain and of
/// registry packages (which a version pins).
fn dep_info_sources(file: &Path) -> Result<Vec<PathBuf>> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let line = text.lines().next().unwrap_or_default();
    let deps = line.split_once(": ").map(|(_, d)| d).unwrap_or_default();
    let mut files = Vec::new();
    let mut cur = String::new();
    let mut chars = deps.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&' ') => {
                cur.push(' ');
                chars.next();
            }
            ' ' => {
                if !cur.is_empty() {
                    files.push(PathBuf::from(std::mem::take(&mut cur)));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        files.push(PathBuf::from(cur));
    }
    let skip = |p: &Path| {
        let s = p.to_string_lossy();
        s.contains("/lib/rustlib/") || s.contains("/registry/src/") || s.contains("/git/checkouts/")
    };
    Ok(files.into_iter().filter(|p| !skip(p)).collect())
}

/// The cargo target directory holding this build's OUT_DIR
/// (`<target>[/<triple>]/<profile>/build/<pkg>/out`).
fn cargo_target_dir(out_dir: &Path) -> PathBuf {
    let build = out_dir
        .ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "build"))
        .unwrap_or(out_dir);
    let profile_dir = build.parent().unwrap_or(build);
    let mut t = profile_dir.parent().unwrap_or(profile_dir).to_path_buf();
    // With --target <triple> there is one more level.
    if t.file_name()
        .is_some_and(|n| n.to_string_lossy().contains('-'))
        && t.join("../CACHEDIR.TAG").exists()
    {
        t = t.parent().unwrap_or(&t).to_path_buf();
    }
    t
}

fn write_if_changed(path: &Path, bytes: &[u8]) -> Result<()> {
    if std::fs::read(path).ok().as_deref() == Some(bytes) {
        return Ok(());
    }
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}
