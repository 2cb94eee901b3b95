//! Building the kernels for a set of architectures.

use crate::link::{ENV_LIBDEVICE, ENV_LINK, ENV_LLVM_BIN};
use crate::manifest::{parse_entries, source_hash, Manifest};
use crate::tools::{clean_command, ensure_nightly, find_libdevice, NIGHTLY};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// Architectures built when none are named: Ampere (sm_80) and Hopper (sm_90).
pub const DEFAULT_ARCHS: &[&str] = &["sm_80", "sm_90"];

/// Where and what to build.
#[derive(Clone, Debug)]
pub struct BuildOptions {
    /// The workspace root (holding `gpu-kernels/` and `abi/`).
    pub workspace: PathBuf,
    /// Architectures, e.g. `["sm_80", "sm_90"]`.
    pub archs: Vec<String>,
    /// Output: `<out>/<arch>/streamline.ptx` and `streamline.manifest.json`.
    pub out: PathBuf,
    /// Target directory of the nested cargo (never the caller's own, or cargo deadlocks).
    pub target_dir: PathBuf,
    /// Cache for downloaded wheels and extracted tools.
    pub cache: PathBuf,
    /// The program rustc runs as the linker: a binary that calls
    /// [`crate::link::run_if_invoked_as_linker`] first thing in `main`.
    pub linker: PathBuf,
}

/// One built architecture.
#[derive(Clone, Debug)]
pub struct BuiltArch {
    /// Architecture, e.g. `sm_90`.
    pub arch: String,
    /// The PTX file.
    pub ptx: PathBuf,
    /// The manifest beside it.
    pub manifest: Manifest,
}

/// Checks an architecture name of the form `sm_NN` (NN >= 53, the first with f16 arithmetic).
pub fn check_arch(arch: &str) -> Result<u32> {
    let n = arch
        .strip_prefix("sm_")
        .and_then(|d| d.parse::<u32>().ok())
        .with_context(|| {
            format!("--arch: `{arch}` is not of the form sm_NN (e.g. sm_80, sm_90)")
        })?;
    if !(53..=120).contains(&n) {
        bail!("--arch: `{arch}` is outside sm_53..=sm_120");
    }
    Ok(n)
}

/// Builds the kernels for every architecture in `opts`.
pub fn build_kernels(opts: &BuildOptions) -> Result<Vec<BuiltArch>> {
    if opts.archs.is_empty() {
        bail!("no architecture named (--arch or STREAMLINE_ARCHS, e.g. sm_80,sm_90)");
    }
    for arch in &opts.archs {
        check_arch(arch)?;
    }
    let llvm_bin = ensure_nightly()?;
    let libdevice = find_libdevice(&opts.cache)?;
    let hash = source_hash(&opts.workspace)?;
    let crate_dir = opts.workspace.join("gpu-kernels");
    let mut built = Vec::new();
    for arch in &opts.archs {
        let target_dir = opts.target_dir.join(arch);
        let flags = [
            "-C",
            &format!("target-cpu={arch}"),
            "-C",
            &format!("linker={}", opts.linker.display()),
            "-C",
            &format!(
                "llvm-args=-unroll-threshold={}",
                crate::link::UNROLL_THRESHOLD
            ),
        ]
        .join("\x1f");
        let status = clean_command("rustup")
            .args([
                "run",
                NIGHTLY,
                "cargo",
                "build",
                "--release",
                "--target",
                "nvptx64-nvidia-cuda",
                "-Zbuild-std=core",
            ])
            .arg("--target-dir")
            .arg(&target_dir)
            .current_dir(&crate_dir)
            .env("CARGO_ENCODED_RUSTFLAGS", flags)
            .env(ENV_LINK, "1")
            .env(ENV_LLVM_BIN, &llvm_bin)
            .env(ENV_LIBDEVICE, &libdevice)
            .status()
            .context("could not run cargo for the kernels")?;
        if !status.success() {
            bail!("building gpu-kernels for {arch} failed (see the cargo output above)");
        }
        let produced = target_dir.join("nvptx64-nvidia-cuda/release/gpu_kernels.ptx");
        let ptx = std::fs::read_to_string(&produced)
            .with_context(|| format!("reading {}", produced.display()))?;
        let kernels = parse_entries(&ptx);
        for spec in streamline_abi::KERNELS {
            if !kernels.iter().any(|k| k.name == spec.name) {
                bail!(
                    "kernel `{}` (declared in streamline-abi) is missing from the PTX for {arch}",
                    spec.name
                );
            }
        }
        let manifest = Manifest {
            arch: arch.clone(),
            source_hash: hash.clone(),
            kernels,
        };
        let dir = opts.out.join(arch);
        std::fs::create_dir_all(&dir)?;
        let out_ptx = dir.join("streamline.ptx");
        write_if_changed(&out_ptx, ptx.as_bytes())?;
        write_if_changed(
            &dir.join("streamline.manifest.json"),
            serde_json::to_string_pretty(&manifest)?.as_bytes(),
        )?;
        built.push(BuiltArch {
            arch: arch.clone(),
            ptx: out_ptx,
            manifest,
        });
    }
    Ok(built)
}

fn write_if_changed(path: &Path, bytes: &[u8]) -> Result<()> {
    if std::fs::read(path).ok().as_deref() == Some(bytes) {
        return Ok(());
    }
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}
