//! The link step rustc runs for the `nvptx64-nvidia-cuda` cdylib.
//!
//! rustc calls the linker as `LINKER --export-symbol NAME… INPUT.o… LIB.rlib… --target … --target-cpu
//! sm_XX … -o OUT.ptx`, where every input holds LLVM bitcode (fat LTO). We `llvm-link` the inputs,
//! then libdevice with `--only-needed`, internalize everything but the exported kernels, optimize
//! with `opt` and emit PTX with `llc -mcpu=sm_XX`.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Set (to "1") in the environment of the nested cargo so that the program rustc runs as the
/// linker knows to act as one.
pub const ENV_LINK: &str = "STREAMLINE_PTX_LINK";
/// PTX ISA version (times ten) of architecture-specific (`sm_90a`) builds.
pub const SPECIFIC_PTX: u32 = 83;

/// LLVM's full-unroll size threshold for kernels (its default is 300), given to
/// rustc's optimizer and to `opt` alike.
pub const UNROLL_THRESHOLD: u32 = 4000;

/// Directory with `llvm-link`, `opt`, `llc`.
pub const ENV_LLVM_BIN: &str = "STREAMLINE_PTX_LINK_LLVM_BIN";
/// Path of `libdevice.10.bc`.
pub const ENV_LIBDEVICE: &str = "STREAMLINE_PTX_LINK_LIBDEVICE";

/// If this process was started by rustc as the kernel linker, perform the link and exit;
/// otherwise return. Call it first thing in `main` of every program that builds kernels.
pub fn run_if_invoked_as_linker() {
    if std::env::var_os(ENV_LINK).is_none() {
        return;
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    match link(&args) {
        Ok(()) => std::process::exit(0),
        Err(e) => {
            eprintln!("streamline ptx link: {e:#}");
            std::process::exit(1);
        }
    }
}

struct LinkArgs {
    exports: Vec<String>,
    inputs: Vec<PathBuf>,
    cpu: String,
    output: PathBuf,
}

fn parse(args: &[String]) -> Result<LinkArgs> {
    let mut exports = Vec::new();
    let mut inputs = Vec::new();
    let mut cpu = None;
    let mut output = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--export-symbol" => {
                exports.push(it.next().context("--export-symbol without a name")?.clone())
            }
            "--target-cpu" => {
                cpu = Some(it.next().context("--target-cpu without a value")?.clone())
            }
            "-o" => output = Some(PathBuf::from(it.next().context("-o without a path")?)),
            "-L" | "--target" | "--linker-plugin-lto" => {
                it.next();
            }
            s if s.starts_with('-') => {}
            s => inputs.push(PathBuf::from(s)),
        }
    }
    Ok(LinkArgs {
        exports,
        inputs,
        cpu: cpu.context("rustc passed no --target-cpu")?,
        output: output.context("rustc passed no -o")?,
    })
}

fn run(cmd: &mut Command) -> Result<()> {
    let shown = format!("{cmd:?}");
    let out = cmd
        .output()
        .with_context(|| format!("could not start {shown}"))?;
    if !out.status.success() {
        bail!("{shown} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(())
}

fn is_bitcode(path: &Path) -> bool {
    std::fs::read(path)
        .map(|b| b.starts_with(b"BC\xC0\xDE"))
        .unwrap_or(false)
}

fn link(args: &[String]) -> Result<()> {
    let a = parse(args)?;
    let bin = PathBuf::from(
        std::env::var_os(ENV_LLVM_BIN).context("STREAMLINE_PTX_LINK_LLVM_BIN unset")?,
    );
    let libdevice = PathBuf::from(
        std::env::var_os(ENV_LIBDEVICE).context("STREAMLINE_PTX_LINK_LIBDEVICE unset")?,
    );
    if a.exports.is_empty() {
        bail!("rustc exported no kernel symbols");
    }
    let work = a.output.with_extension("link");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work)?;

    // Objects are bitcode; archives (compiler_builtins) are unpacked and their bitcode members
    // linked only where needed.
    let mut objects = Vec::new();
    let mut optional = Vec::new();
    for (i, input) in a.inputs.iter().enumerate() {
        if input.extension().is_some_and(|e| e == "rlib" || e == "a") {
            let dir = work.join(format!("ar{i}"));
            std::fs::create_dir_all(&dir)?;
            run(Command::new(bin.join("llvm-ar"))
                .arg("x")
                .arg(std::fs::canonicalize(input)?)
                .current_dir(&dir))?;
            let mut members: Vec<PathBuf> = std::fs::read_dir(&dir)?
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .collect();
            members.sort();
            optional.extend(members.into_iter().filter(|p| is_bitcode(p)));
        } else if is_bitcode(input) {
            objects.push(input.clone());
        } else {
            bail!("{} is not LLVM bitcode (is fat LTO on?)", input.display());
        }
    }
    if objects.is_empty() {
        bail!("no bitcode objects among the linker inputs");
    }

    let linked = work.join("linked.bc");
    let mut cmd = Command::new(bin.join("llvm-link"));
    cmd.args(&objects);
    for lib in optional.iter().chain(std::iter::once(&libdevice)) {
        cmd.arg("--only-needed").arg(lib);
    }
    run(cmd.arg("-o").arg(&linked))?;

    let optimized = work.join("opt.bc");
    run(Command::new(bin.join("opt"))
        .arg(format!("-mcpu={}", a.cpu))
        .arg(format!(
            "--internalize-public-api-list={}",
            a.exports.join(",")
        ))
        .arg("-passes=internalize,nvvm-reflect,default<O3>,globaldce")
        // Kernels keep per-thread tiles in fixed-size arrays; they stay in registers only when
        // every loop over them is fully unrolled, which LLVM's default size threshold (tuned
        // for CPUs) refuses for a 64-accumulator tile.
        .arg(format!("-unroll-threshold={UNROLL_THRESHOLD}"))
        .arg(&linked)
        .arg("-o")
        .arg(&optimized))?;

    let mut llc = Command::new(bin.join("llc"));
    llc.arg(format!("-mcpu={}", a.cpu));
    if a.cpu.ends_with('a') {
        // Architecture-specific code may use the tensor-map fences of PTX ISA 8.3 (CUDA 12.3),
        // above the 8.0 that sm_90a needs at least.
        llc.arg(format!("-mattr=+ptx{SPECIFIC_PTX}"));
    }
    run(llc.arg("-O3").arg(&optimized).arg("-o").arg(&a.output))?;
    Ok(())
}
