//! Locating (and, where allowed, installing) the external pieces of the kernel build: the pinned
//! nightly with `rust-src` and `llvm-tools`, libdevice and ptxas.

use anyhow::{bail, Context, Result};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The nightly the kernels build with (also in `gpu-kernels/rust-toolchain.toml`).
pub const NIGHTLY: &str = "nightly-2026-05-20";
/// Version of the `nvidia-nvvm` and `nvidia-cuda-nvcc` wheels fetched when no CUDA install is
/// found (CUDA 13.0, the driver generation the kernels are tested with).
pub const CUDA_WHEEL_VERSION: &str = "13.0.88";

/// A command with the variables that would make a nested rustup/cargo pick the wrong toolchain,
/// flags or target dir removed.
pub fn clean_command(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut cmd = Command::new(program);
    for var in [
        "RUSTUP_TOOLCHAIN",
        "RUSTC",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTDOC",
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_MAKEFLAGS",
        "MAKEFLAGS",
        "MFLAGS",
        "CARGO",
        "CARGO_MANIFEST_DIR",
        "CARGO_PKG_NAME",
        "OUT_DIR",
        "TARGET",
        "HOST",
        "PROFILE",
        "OPT_LEVEL",
        "DEBUG",
        "NUM_JOBS",
        "RUSTC_LINKER",
        "RUSTDOCFLAGS",
    ] {
        cmd.env_remove(var);
    }
    // Feature and cfg variables of the outer build script.
    for (key, _) in std::env::vars_os() {
        if let Some(k) = key.to_str() {
            if k.starts_with("CARGO_FEATURE_")
                || k.starts_with("CARGO_CFG_")
                || k.starts_with("DEP_")
            {
                cmd.env_remove(k);
            }
        }
    }
    cmd
}

/// The pinned nightly, installed through rustup if missing. Returns the directory holding its
/// LLVM tools (`llvm-link`, `opt`, `llc`).
pub fn ensure_nightly() -> Result<PathBuf> {
    if which("rustup").is_none() {
        bail!("rustup not found: install it so the kernel toolchain {NIGHTLY} can be installed");
    }
    // The LLVM tools directory and whether `core`'s sources are there, if the nightly runs.
    let installed = || -> Option<(PathBuf, bool)> {
        let out = clean_command("rustup")
            .args(["run", NIGHTLY, "rustc", "--print", "sysroot"])
            .output()
            .ok()?;
        if !out.status.success() {
            return None;
        }
        let sysroot = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        let bin = sysroot.join("lib/rustlib").join(host_triple()).join("bin");
        let complete =
            bin.join("llc").exists() && sysroot.join("lib/rustlib/src/rust/library/core").exists();
        Some((bin, complete))
    };
    if let Some((bin, true)) = installed() {
        return Ok(bin);
    }
    eprintln!(
        "installing Rust {NIGHTLY} with rust-src and llvm-tools for the GPU kernels (rustup)"
    );
    let status = clean_command("rustup")
        .args([
            "toolchain",
            "install",
            NIGHTLY,
            "--profile",
            "minimal",
            "-c",
            "rust-src",
            "-c",
            "llvm-tools",
        ])
        .status()
        .context("could not run rustup")?;
    match installed() {
        Some((bin, true)) if status.success() => Ok(bin),
        _ => bail!(
            "rustup could not install {NIGHTLY} with its components: run `rustup toolchain install {NIGHTLY} --profile minimal -c rust-src -c llvm-tools`"
        ),
    }
}

fn host_triple() -> &'static str {
    if cfg!(all(target_arch = "x86_64", target_os = "linux")) {
        "x86_64-unknown-linux-gnu"
    } else if cfg!(all(target_arch = "aarch64", target_os = "linux")) {
        "aarch64-unknown-linux-gnu"
    } else if cfg!(all(target_arch = "aarch64", target_os = "macos")) {
        "aarch64-apple-darwin"
    } else {
        "x86_64-unknown-linux-gnu"
    }
}

/// `program` on `PATH`, if any.
pub fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

fn cuda_roots() -> Vec<PathBuf> {
    let mut roots = Vec::new();
    if let Some(home) = std::env::var_os("CUDA_HOME") {
        roots.push(PathBuf::from(home));
    }
    roots.push(PathBuf::from("/usr/local/cuda"));
    roots
}

/// libdevice: `$STREAMLINE_LIBDEVICE`, `$CUDA_HOME/nvvm/libdevice`, `/usr/local/cuda/nvvm/libdevice`,
/// else extracted from the `nvidia-nvvm` wheel (downloaded with pip into `cache`).
pub fn find_libdevice(cache: &Path) -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("STREAMLINE_LIBDEVICE") {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok(p);
        }
        bail!("STREAMLINE_LIBDEVICE={} is not a file", p.display());
    }
    for root in cuda_roots() {
        let p = root.join("nvvm/libdevice/libdevice.10.bc");
        if p.is_file() {
            return Ok(p);
        }
    }
    from_wheel(
        cache,
        "nvidia-nvvm",
        "nvvm/libdevice/libdevice.10.bc",
        "libdevice.10.bc",
        false,
    )
}

/// ptxas: `$STREAMLINE_PTXAS`, `$CUDA_HOME/bin`, `/usr/local/cuda/bin`, `PATH`, else extracted from
/// the `nvidia-cuda-nvcc` wheel (downloaded with pip into `cache`).
pub fn find_ptxas(cache: &Path) -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("STREAMLINE_PTXAS") {
        return Ok(PathBuf::from(p));
    }
    for root in cuda_roots() {
        let p = root.join("bin/ptxas");
        if p.is_file() {
            return Ok(p);
        }
    }
    if let Some(p) = which("ptxas") {
        return Ok(p);
    }
    from_wheel(cache, "nvidia-cuda-nvcc", "bin/ptxas", "ptxas", true)
}

/// Extracts the member ending in `suffix` from the wheel `package` (pinned to
/// [`CUDA_WHEEL_VERSION`]) into `cache/file_name`, downloading the wheel with pip if needed.
fn from_wheel(
    cache: &Path,
    package: &str,
    suffix: &str,
    file_name: &str,
    executable: bool,
) -> Result<PathBuf> {
    let dest = cache
        .join(format!("{package}-{CUDA_WHEEL_VERSION}"))
        .join(file_name);
    if dest.is_file() {
        return Ok(dest);
    }
    let wheels = cache.join("wheels");
    std::fs::create_dir_all(&wheels)?;
    let wheel = find_wheel(&wheels, package);
    let wheel = match wheel {
        Some(w) => w,
        None => {
            eprintln!("downloading the {package} wheel with pip for {file_name}");
            let python = which("python3").or_else(|| which("python")).context(
                "python3 not found: it is needed to download libdevice/ptxas with pip (or set STREAMLINE_LIBDEVICE / STREAMLINE_PTXAS)",
            )?;
            let status = Command::new(python)
                .args([
                    "-m",
                    "pip",
                    "download",
                    "--quiet",
                    "--no-deps",
                    "--only-binary=:all:",
                    "-d",
                ])
                .arg(&wheels)
                .arg(format!("{package}=={CUDA_WHEEL_VERSION}"))
                .status()
                .context("could not run pip")?;
            if !status.success() {
                bail!("pip could not download {package}=={CUDA_WHEEL_VERSION}: run `python3 -m pip download --no-deps {package}=={CUDA_WHEEL_VERSION}` or set STREAMLINE_LIBDEVICE / STREAMLINE_PTXAS");
            }
            find_wheel(&wheels, package).with_context(|| {
                format!(
                    "pip reported success but no {package} wheel is in {}",
                    wheels.display()
                )
            })?
        }
    };
    let file = std::fs::File::open(&wheel)?;
    let mut zip = zip::ZipArchive::new(file)
        .with_context(|| format!("{} is not a wheel", wheel.display()))?;
    let name = (0..zip.len())
        .filter_map(|i| zip.by_index(i).ok().map(|f| f.name().to_string()))
        .find(|n| n.ends_with(suffix))
        .with_context(|| format!("{} holds no {suffix}", wheel.display()))?;
    let mut bytes = Vec::new();
    zip.by_name(&name)?.read_to_end(&mut bytes)?;
    std::fs::create_dir_all(dest.parent().unwrap())?;
    // A name of this process's own: a build running beside this one (two build scripts
    // extracting the same tool) never writes the file that ends up at `dest`, which running
    // it while still open for writing would refuse ("text file busy").
    let tmp = dest.with_extension(format!(
        "partial-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::write(&tmp, bytes)?;
    if executable {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))?;
    }
    std::fs::rename(&tmp, &dest)?;
    Ok(dest)
}

fn find_wheel(dir: &Path, package: &str) -> Option<PathBuf> {
    let prefix = format!("{}-{CUDA_WHEEL_VERSION}-", package.replace('-', "_"));
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".whl"))
        })
}
