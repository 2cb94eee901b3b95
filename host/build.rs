//! Builds the kernels from the current sources and embeds their PTX in the library, so the
//! `streamline` binary is self-contained and never runs stale kernels.

use std::path::{Path, PathBuf};

fn main() {
    // rustc runs this very program as the kernel linker during the nested build.
    streamline_builder::link::run_if_invoked_as_linker();
    if let Err(e) = run() {
        // One clear message instead of a backtrace.
        eprintln!("error: building the GPU kernels failed: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> anyhow::Result<()> {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let workspace = manifest_dir
        .parent()
        .expect("host/ lives in the workspace")
        .to_path_buf();
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    for f in streamline_builder::manifest::tracked_sources(&workspace)? {
        println!("cargo:rerun-if-changed={}", f.display());
    }
    for dir in ["gpu-kernels/src", "abi/src"] {
        println!("cargo:rerun-if-changed={}", workspace.join(dir).display());
    }
    for var in ["STREAMLINE_LIBDEVICE", "STREAMLINE_ARCHS", "CUDA_HOME"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let archs: Vec<String> = match std::env::var("STREAMLINE_ARCHS") {
        Ok(list) => list
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
        Err(_) => streamline_builder::DEFAULT_ARCHS
            .iter()
            .map(|s| s.to_string())
            .collect(),
    };
    let target = target_dir(&out_dir);
    let mut built = streamline_builder::build_kernels(&streamline_builder::BuildOptions {
        workspace: workspace.clone(),
        archs,
        out: out_dir.join("ptx"),
        target_dir: target.join("kernels"),
        cache: target.join("toolchain-cache"),
        linker: std::env::current_exe()?,
    })?;
    // Every arch is built from the same sources; `build_kernels` refuses an empty arch list.
    let hash = built[0].manifest.source_hash.clone();
    let mut code = String::from(
        "/// PTX embedded at build time: (arch, PTX text, manifest JSON), lowest arch first.\n",
    );
    code.push_str("pub static EMBEDDED: &[(&str, &str, &str)] = &[\n");
    built.sort_by_key(|b| b.arch[3..].parse::<u32>().unwrap_or(0));
    for b in &built {
        let manifest = b.ptx.with_file_name("streamline.manifest.json");
        code.push_str(&format!(
            "    ({:?}, include_str!({:?}), include_str!({:?})),\n",
            b.arch,
            b.ptx.display().to_string(),
            manifest.display().to_string()
        ));
    }
    code.push_str("];\n");
    code.push_str(&format!(
        "/// Hash of the kernel and ABI sources this binary was built from.\npub const SOURCE_HASH: &str = {hash:?};\n"
    ));
    std::fs::write(out_dir.join("embedded.rs"), code)?;
    Ok(())
}

/// The cargo target directory holding this build's OUT_DIR (`<target>[/<triple>]/<profile>/build/<pkg>/out`).
fn target_dir(out_dir: &Path) -> PathBuf {
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
        t = t.parent().unwrap().to_path_buf();
    }
    t
}
