//! `cargo xtask build-kernels | ptx-check | wheel | bundle | new-kernel`.

use anyhow::{bail, Result};
use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::process::Command;
use streamline_builder::{ptxas, tools, Builder, BuiltArch, ARCHS_WITH_SM90A, DEFAULT_ARCHS};

#[derive(Parser)]
#[command(about = "Streamline build tasks")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Compile gpu-kernels to PTX: `target/ptx/<arch>/gpu_kernels.ptx` and its manifest.
    BuildKernels {
        /// Comma-separated architectures.
        #[arg(long, value_delimiter = ',', default_values_t = ARCHS_WITH_SM90A.iter().map(|s| s.to_string()))]
        arch: Vec<String>,
    },
    /// Build, then assemble every PTX with ptxas and report registers, shared memory, stack and
    /// spills per kernel. Fails on ptxas errors and on spills or local memory not allowed below.
    PtxCheck {
        /// Comma-separated architectures.
        #[arg(long, value_delimiter = ',', default_values_t = ARCHS_WITH_SM90A.iter().map(|s| s.to_string()))]
        arch: Vec<String>,
    },
    /// Build the Python package's wheel (PyO3, stable ABI, Python 3.9+) into target/wheels/
    /// with maturin (installed with pip if missing). No CUDA toolkit needed.
    Wheel,
    /// Put the release `streamline` and `color-jitter` binaries, the release test binaries
    /// (the examples' and the out-of-tree project's included), run-tests.sh, and the Python
    /// wheel with its tests and examples (python/) into target/bundle/, to run the GPU suite
    /// on a machine without a Rust toolchain.
    Bundle,
    /// Write a new kernel project (kernel crate with its declaration and kernel, build.rs,
    /// launcher, CPU reference, property test), the one docs/writing-kernels.md builds, into
    /// DIR (default: ./NAME), depending on this checkout by path.
    NewKernel {
        /// Package name (lowercase letters, digits, `-`).
        name: String,
        /// Where to write it.
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

/// The reason of the kernels bounded to 64 registers so that four blocks share an SM.
const FOUR_BLOCKS: &str = "launch bound of 4 blocks/SM";

/// Kernels allowed a stack frame (local memory): name, largest stack frame in bytes, largest
/// spill traffic (stores + loads) in bytes, and the reason. No other kernel may use local
/// memory.
const STACK_ALLOWANCES: &[(&str, u32, u32, &str)] = &[
    // NHWC in and out, bilinear resize keeps each value's taps in every stretch (four channels:
    // eight taps per thread) and the fast blur a halo `channels` times as wide, under the same
    // four-block bound as their NCHW kernels; their BENCHMARKS.md figures are with these spills.
    (
        "resize_bilinear_relayout",
        128,
        640,
        "NHWC stretches' taps under the four-block bound",
    ),
    (
        "gaussian_blur_fast_nhwc",
        64,
        1200,
        "NHWC interleaved halo under the four-block bound",
    ),
    // Under the 128-register bound that keeps two blocks per SM, sm_80's allocation of step
    // 5's 128 x 128 loop spills a few words (addresses, loop state, the old values of `C` a
    // product with `beta` reads and, in step 7 and split-K, the last row and column that edge
    // blocks clamp their fetches to), in step 5 itself and in the kernels built on it (step 7,
    // split-K 128 x 128); sm_90's spills none.
    (
        "sgemm_5_pipelined_128x128",
        32,
        64,
        "sm_80 under the two-block register bound",
    ),
    (
        "sgemm_7_swizzled_128x128",
        64,
        144,
        "sm_80 under the two-block register bound",
    ),
    (
        "sgemm_splitk_128x128",
        32,
        96,
        "sm_80 under the two-block register bound",
    ),
    // The split-K products that apply an owed SGD step to `B` hold the gradients' vectors
    // beside `B`'s under the same bound; sm_80 spills a few words of it, sm_90 none.
    (
        "sgemm_splitk_wide_sgd_f32",
        16,
        32,
        "sm_80 under the two-block register bound",
    ),
    (
        "sgemm_splitk_wide_sgd_pair_f32",
        16,
        32,
        "sm_80 under the two-block register bound",
    ),
    (
        "sgemm_splitk_wide_sgd_bf16",
        16,
        32,
        "sm_80 under the two-block register bound",
    ),
    // libdevice's sincosf reduces huge arguments (|x| > 105615) with Payne-Hanek, which keeps
    // a 7-word table of partial products in a local array. Only lanes with such arguments touch
    // it; ordinary inputs never do.
    (
        "heavy_f32",
        32,
        0,
        "libdevice sincosf Payne-Hanek reduction for |x| > 105615",
    ),
    (
        "heavy_f16",
        32,
        0,
        "libdevice sincosf Payne-Hanek reduction (f16 inputs never reach it)",
    ),
    (
        "heavy_bf16",
        32,
        0,
        "libdevice sincosf Payne-Hanek reduction for |x| > 105615",
    ),
    // The fused augmentation's 7-tap kernels (one tile or a strip of them per block, each
    // rotation) are bounded so that four blocks (their shared memory allows four) share an SM:
    // 64 registers for the strips' eight warps, 72 for the one-tile kernels' seven. A few
    // block-level values kept across the steps may spill (on sm_80 more than on sm_90, where
    // `augment_strip_c3`, seed 003's kernel, spills none).
    ("augment_c1", 16, 32, FOUR_BLOCKS),
    ("augment_c2", 16, 32, FOUR_BLOCKS),
    ("augment_c3", 16, 32, FOUR_BLOCKS),
    ("augment_c4", 16, 32, FOUR_BLOCKS),
    // The strip kernels (`augment_strip_*`, `augment_bilinear_strip_*`) run at seed 003's
    // batches, where their four blocks' shared memory leaves the SM little L1 for spills (they
    // go on to L2): their allowances are kept tight.
    ("augment_strip_c1", 16, 32, FOUR_BLOCKS),
    ("augment_strip_c2", 16, 32, FOUR_BLOCKS),
    ("augment_strip_c3", 24, 32, FOUR_BLOCKS),
    ("augment_strip_c4", 16, 32, FOUR_BLOCKS),
    // The dyadic kernels (`augment_dyadic_*`, seed 003's draw) spill nothing.
    ("augment_dyadic_c1", 16, 32, FOUR_BLOCKS),
    ("augment_dyadic_c2", 16, 32, FOUR_BLOCKS),
    ("augment_dyadic_c3", 16, 32, FOUR_BLOCKS),
    ("augment_dyadic_c4", 16, 32, FOUR_BLOCKS),
    ("augment_dyadic_strip_c1", 16, 32, FOUR_BLOCKS),
    ("augment_dyadic_strip_c2", 16, 32, FOUR_BLOCKS),
    ("augment_dyadic_strip_c3", 16, 32, FOUR_BLOCKS),
    ("augment_dyadic_strip_c4", 16, 32, FOUR_BLOCKS),
    ("augment_bilinear_c1", 16, 32, FOUR_BLOCKS),
    ("augment_bilinear_c2", 16, 32, FOUR_BLOCKS),
    ("augment_bilinear_c3", 16, 32, FOUR_BLOCKS),
    ("augment_bilinear_c4", 16, 32, FOUR_BLOCKS),
    // The ragged batches' strips (`augment_ragged_*`) keep the image's place from the block's
    // setup record beside the strip kernels' values: a few more words may spill.
    ("augment_ragged_c1", 48, 112, FOUR_BLOCKS),
    ("augment_ragged_c2", 48, 112, FOUR_BLOCKS),
    ("augment_ragged_c3", 48, 112, FOUR_BLOCKS),
    ("augment_ragged_c4", 48, 112, FOUR_BLOCKS),
    ("augment_ragged_bilinear_c1", 48, 112, FOUR_BLOCKS),
    ("augment_ragged_bilinear_c2", 48, 112, FOUR_BLOCKS),
    ("augment_ragged_bilinear_c3", 48, 112, FOUR_BLOCKS),
    ("augment_ragged_bilinear_c4", 48, 112, FOUR_BLOCKS),
    ("augment_bilinear_strip_c1", 16, 32, FOUR_BLOCKS),
    ("augment_bilinear_strip_c2", 16, 32, FOUR_BLOCKS),
    ("augment_bilinear_strip_c3", 16, 32, FOUR_BLOCKS),
    ("augment_bilinear_strip_c4", 48, 96, FOUR_BLOCKS),
    // Bilinear resize (two columns per thread) is bounded to 64 registers so that four blocks
    // share an SM; a few values of its instances spill.
    ("resize_bilinear", 56, 168, FOUR_BLOCKS),
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target"))
}

fn build(arch: &[String]) -> Result<Vec<BuiltArch>> {
    build_crate("gpu-kernels", "gpu_kernels", "ptx", arch)
}

/// Builds the kernel crate in `dir` (relative to the workspace) for `arch` into
/// `target/<out>/<arch>/`.
fn build_crate(dir: &str, name: &str, out: &str, arch: &[String]) -> Result<Vec<BuiltArch>> {
    let target = target_dir();
    let built = Builder::new(workspace().join(dir))
        .archs(arch)
        .out_dir(target.join(out))
        .target_dir(target.join("kernels").join(name))
        .cache_dir(target.join("toolchain-cache"))
        .build()?;
    Ok(built.archs)
}

/// Builds the Python wheel into target/wheels/ and returns its path.
fn wheel() -> Result<PathBuf> {
    let ws = workspace();
    let has_maturin = Command::new("python3")
        .args(["-m", "maturin", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_maturin {
        let ok = Command::new("python3")
            .args(["-m", "pip", "install", "-q", "maturin>=1.8,<2"])
            .status()?
            .success();
        if !ok {
            bail!("installing maturin with pip failed");
        }
    }
    let out = target_dir().join("wheels");
    let _ = std::fs::remove_dir_all(&out);
    let ok = Command::new("python3")
        .args(["-m", "maturin", "build", "--release", "-m"])
        .arg(ws.join("python/Cargo.toml"))
        .arg("-o")
        .arg(&out)
        .current_dir(&ws)
        .status()?
        .success();
    if !ok {
        bail!("maturin build failed");
    }
    let whl = std::fs::read_dir(&out)?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "whl"));
    whl.ok_or_else(|| anyhow::anyhow!("maturin wrote no wheel into {}", out.display()))
}

/// Copies the files of `from` (not recursively) into `to`.
fn copy_files(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)?.flatten() {
        if e.file_type()?.is_file() {
            std::fs::copy(e.path(), to.join(e.file_name()))?;
        }
    }
    Ok(())
}

fn ptx_check(arch: &[String]) -> Result<()> {
    let built = build(arch)?;
    let ptxas = tools::find_ptxas(&target_dir().join("toolchain-cache"))?;
    let mut problems = Vec::new();
    for b in &built {
        let report = ptxas::assemble(&ptxas, &b.ptx, &b.arch)?;
        println!("{} ({})", b.arch, b.ptx.display());
        println!(
            "  {:<24} {:>5} {:>10} {:>7} {:>13}  note",
            "kernel", "regs", "smem B", "stack B", "spill st/ld B"
        );
        for k in &report {
            let allowance = STACK_ALLOWANCES.iter().find(|(n, ..)| *n == k.name);
            let spilled = k.spill_stores + k.spill_loads;
            let note = match allowance {
                _ if k.stack == 0 && spilled == 0 => String::new(),
                Some((_, stack, spill, why)) if k.stack <= *stack && spilled <= *spill => {
                    format!("stack allowed: {why}")
                }
                _ => {
                    problems.push(format!(
                        "{} {}: {} bytes of stack frame and {} / {} bytes of spills beyond its allowance",
                        b.arch, k.name, k.stack, k.spill_stores, k.spill_loads
                    ));
                    if spilled > 0 {
                        "SPILLS".into()
                    } else {
                        "STACK NOT ALLOWED".into()
                    }
                }
            };
            println!(
                "  {:<24} {:>5} {:>10} {:>7} {:>6}/{:<6}  {}",
                k.name, k.registers, k.shared, k.stack, k.spill_stores, k.spill_loads, note
            );
        }
        for e in &b.manifest.kernels {
            if !report.iter().any(|k| k.name == e.name) {
                problems.push(format!("{} {}: no ptxas report", b.arch, e.name));
            }
        }
    }
    if !problems.is_empty() {
        bail!("ptx-check failed:\n  {}", problems.join("\n  "));
    }
    println!("ptx-check: all kernels assembled, spills and stack only within their allowances");
    Ok(())
}

fn bundle() -> Result<()> {
    let ws = workspace();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(&cargo)
        .args([
            "build",
            "--release",
            "-p",
            "streamline-cli",
            "--bin",
            "streamline",
            "-p",
            "color-jitter",
            "-p",
            "saxpy",
            "-p",
            "softmax",
        ])
        .current_dir(&ws)
        .status()?;
    if !status.success() {
        bail!("building the streamline binary failed");
    }
    let out = Command::new(&cargo)
        .args([
            "test",
            "--release",
            "--workspace",
            "--no-run",
            "--message-format=json",
        ])
        .current_dir(&ws)
        .stderr(std::process::Stdio::inherit())
        .output()?;
    if !out.status.success() {
        bail!("building the test binaries failed");
    }
    let dir = target_dir().join("bundle");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("tests"))?;
    let mut tests = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if v["reason"] != "compiler-artifact" || v["profile"]["test"] != true {
            continue;
        }
        let Some(exe) = v["executable"].as_str() else {
            continue;
        };
        let pkg = v["target"]["name"].as_str().unwrap_or("test");
        let kind = v["target"]["kind"][0].as_str().unwrap_or("test");
        let name = format!("{}-{}", kind, pkg);
        if !has_tests(Path::new(exe))? {
            continue;
        }
        let dest = dir.join("tests").join(&name);
        std::fs::copy(exe, &dest)?;
        // Their symbol tables are a sixth of their size; a failing test still names its
        // assertion's file and line.
        let _ = Command::new("strip").arg(&dest).status();
        tests.push(name);
    }
    // The project `tests/tests/suite/out_of_tree.rs` writes from docs/writing-kernels.md, built
    // now from the docs as they are: its test binaries run on the GPU machine like ours, and its
    // kernels serve the Python test that calls them by field name.
    let status = Command::new(&cargo)
        .args([
            "test",
            "-p",
            "streamline-tests",
            "--test",
            "suite",
            "--",
            "out_of_tree",
        ])
        .current_dir(&ws)
        .status()?;
    if !status.success() {
        bail!("building the project of docs/writing-kernels.md failed");
    }
    if let Ok(entries) = std::fs::read_dir(target_dir().join("out-of-tree/bin")) {
        for e in entries.flatten() {
            let name = format!("test-{}", e.file_name().to_string_lossy());
            let dest = dir.join("tests").join(&name);
            std::fs::copy(e.path(), &dest)?;
            // Debug builds: their debug information is most of their size.
            let _ = Command::new("strip").arg(&dest).status();
            tests.push(name);
        }
    }
    tests.sort();
    for bin in ["streamline", "color-jitter", "saxpy", "softmax"] {
        std::fs::copy(target_dir().join("release").join(bin), dir.join(bin))?;
    }
    for script in [
        "gpu-check.sh",
        "peers.sh",
        "cvcuda_rotate_geometry.py",
        "cvcuda_fresh_inputs.py",
        "cold-start.sh",
        "multi-gpu-check.sh",
    ] {
        std::fs::copy(ws.join("scripts").join(script), dir.join(script))?;
    }
    // The Python package: its wheel, tests and examples, and the saxpy example's kernels for
    // the test that launches a user's kernel module from Python.
    let whl = wheel()?;
    let py = dir.join("python");
    std::fs::create_dir_all(&py)?;
    std::fs::copy(&whl, py.join(whl.file_name().unwrap_or_default()))?;
    copy_files(&ws.join("python/tests"), &py.join("tests"))?;
    copy_files(&ws.join("examples/python"), &py.join("examples"))?;
    let archs: Vec<String> = DEFAULT_ARCHS.iter().map(|s| s.to_string()).collect();
    for b in build_crate(
        "examples/saxpy/kernels",
        "saxpy_kernels",
        "ptx-examples",
        &archs,
    )? {
        let d = py.join("saxpy").join(&b.arch);
        std::fs::create_dir_all(&d)?;
        std::fs::copy(&b.ptx, d.join("saxpy_kernels.ptx"))?;
        std::fs::copy(&b.manifest_path, d.join("saxpy_kernels.manifest.json"))?;
    }
    // The kernel of docs/writing-kernels.md, as `tests/tests/suite/out_of_tree.rs` built it here, for
    // the Python test that calls it by field name.
    if let Ok(archs) = std::fs::read_dir(target_dir().join("out-of-tree/ptx")) {
        for a in archs.flatten() {
            let d = py.join("docs-kernel").join(a.file_name());
            std::fs::create_dir_all(&d)?;
            for f in ["my_op_kernels.ptx", "my_op_kernels.manifest.json"] {
                std::fs::copy(a.path().join(f), d.join(f))?;
            }
        }
    }
    std::fs::copy(
        ws.join("scripts/python-check.sh"),
        dir.join("python-check.sh"),
    )?;
    let script = format!(
        r#"#!/usr/bin/env bash
# Runs Streamline's test suite (GPU tests included) from this folder; no Rust toolchain needed.
# Extra arguments go to every test binary (e.g. a name filter). Set SANITIZER to wrap each
# binary, e.g. SANITIZER="compute-sanitizer --tool memcheck --error-exitcode 1".
set -u
cd "$(dirname "$0")"
failed=0
for t in {tests}; do
  echo "== $t"
  ${{SANITIZER:-}} ./tests/$t --test-threads=1 "$@" || failed=1
done
if [ $failed -ne 0 ]; then echo "run-tests: FAILED"; exit 1; fi
echo "run-tests: all test binaries passed"
"#,
        tests = tests.join(" ")
    );
    let path = dir.join("run-tests.sh");
    std::fs::write(&path, script)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    let size: u64 = walk_size(&dir)?;
    println!(
        "bundle: {} ({} test binaries, {:.1} MiB)",
        dir.display(),
        tests.len(),
        size as f64 / (1 << 20) as f64
    );
    Ok(())
}

/// Whether the test binary `exe` holds any test (`--list` runs none; crates without tests
/// still make a binary, which the bundle leaves out).
fn has_tests(exe: &Path) -> Result<bool> {
    let out = Command::new(exe)
        .args(["--list", "--format", "terse"])
        .output()?;
    if !out.status.success() {
        bail!("{} --list failed", exe.display());
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .any(|l| l.ends_with(": test")))
}

fn walk_size(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        total += if e.file_type()?.is_dir() {
            walk_size(&e.path())?
        } else {
            e.metadata()?.len()
        };
    }
    Ok(total)
}

fn main() -> Result<()> {
    // rustc runs this program as the kernels' linker during the nested build.
    streamline_builder::link::run_if_invoked_as_linker();
    match Cli::parse().task {
        Task::BuildKernels { arch } => {
            for b in build(&arch)? {
                println!(
                    "{}: {} ({} kernels)",
                    b.arch,
                    b.ptx.display(),
                    b.manifest.kernels.len()
                );
            }
            Ok(())
        }
        Task::PtxCheck { arch } => ptx_check(&arch),
        Task::Wheel => {
            println!("wheel: {}", wheel()?.display());
            Ok(())
        }
        Task::Bundle => bundle(),
        Task::NewKernel { name, dir } => {
            let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
            for f in streamline_builder::template::write(&dir, &name, &workspace())? {
                println!("wrote {}", f.display());
            }
            println!(
                "next: cd {} && cargo test (edit kernels/src/lib.rs, src/lib.rs, tests/)",
                dir.display()
            );
            Ok(())
        }
    }
}
