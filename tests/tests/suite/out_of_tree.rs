//! A new project outside this repository, written from `docs/writing-kernels.md` step by step
//! (`streamline_builder::template`, as `cargo xtask new-kernel` writes it): every code block of
//! the page that names a file is written to a fresh folder, the Streamline paths pointed at this
//! checkout, and the project is built (its
//! `build.rs` compiles its kernel crate to PTX) and its tests run: the CPU checks of the
//! embedded PTX against the kernel's declaration everywhere, the launch against the CPU
//! reference where a GPU is present. The test binaries are kept in
//! `target/out-of-tree/bin/` for `cargo xtask bundle`.

use std::path::{Path, PathBuf};
use streamline_builder::template;
use streamline_builder::tools::clean_command;

#[test]
fn a_project_written_from_the_docs_builds_and_passes_its_tests() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    // A test binary carried to a machine without the checkout or a Rust toolchain (a GPU
    // machine running the bundle) has nothing to build with.
    let cargo = clean_command("cargo").arg("--version").output();
    if !repo.join("docs/writing-kernels.md").is_file() || !cargo.is_ok_and(|o| o.status.success()) {
        eprintln!("skipping the out-of-tree project test: no Streamline checkout or cargo here");
        return;
    }
    // Outside the repository, so no workspace of ours encloses it.
    let project = std::env::temp_dir().join(format!("streamline-my-op-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&project);
    let written = template::write(&project, "my-op", repo).unwrap();
    assert_eq!(written.len(), template::files(template::DOC).len());
    // The versions this checkout was tested with, so the build needs nothing new.
    for dir in [project.clone(), project.join("kernels")] {
        std::fs::copy(repo.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    }

    let target = repo.join("target/out-of-tree");
    let out = clean_command("cargo")
        .args([
            "test",
            "--no-run",
            "--message-format=json-render-diagnostics",
        ])
        .arg("--manifest-path")
        .arg(project.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", target.join("target"))
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the project written from docs/writing-kernels.md did not build (see above)"
    );
    let mut tests: Vec<PathBuf> = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if v["reason"] == "compiler-artifact" && v["profile"]["test"] == true {
            if let Some(exe) = v["executable"].as_str() {
                tests.push(exe.into());
            }
        }
    }
    assert!(
        tests.len() >= 2,
        "expected the lib and relu_scale tests: {tests:?}"
    );
    // The kernel's PTX and manifest, for the Python test that calls it by field name (kept in
    // `target/out-of-tree/ptx/sm_XX/` for `cargo xtask bundle`); its fields reached the manifest.
    let ptx_dir = target.join("ptx");
    // The build directory this build wrote last: earlier builds (of earlier docs) keep theirs.
    let newest = std::fs::read_dir(target.join("target/debug/build"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("out/streamline"))
        .filter_map(|out| {
            let written = std::fs::read_dir(&out)
                .ok()?
                .flatten()
                .filter_map(|a| {
                    let m = a.path().join("my_op_kernels.manifest.json");
                    std::fs::metadata(m).and_then(|m| m.modified()).ok()
                })
                .max()?;
            Some((written, out))
        })
        .max_by_key(|(written, _)| *written)
        .map(|(_, out)| out);
    let mut manifests = 0;
    if let Some(out) = newest {
        for arch in std::fs::read_dir(&out).unwrap().flatten() {
            let manifest = arch.path().join("my_op_kernels.manifest.json");
            let Ok(text) = std::fs::read_to_string(&manifest) else {
                continue;
            };
            let m: serde_json::Value = serde_json::from_str(&text).unwrap();
            let fields: Vec<(&str, &str)> = m["kernels"][0]["fields"]
                .as_array()
                .expect("the docs' kernel's manifest records its fields")
                .iter()
                .map(|f| (f["name"].as_str().unwrap(), f["kind"].as_str().unwrap()))
                .collect();
            assert_eq!(
                fields,
                [
                    ("x", "*const f32"),
                    ("y", "*mut f32"),
                    ("n", "u64"),
                    ("scale", "f32"),
                    ("pad", "u32")
                ]
            );
            let dest = ptx_dir.join(arch.file_name());
            std::fs::create_dir_all(&dest).unwrap();
            for f in ["my_op_kernels.ptx", "my_op_kernels.manifest.json"] {
                std::fs::copy(arch.path().join(f), dest.join(f)).unwrap();
            }
            manifests += 1;
        }
    }
    assert!(manifests > 0, "no manifest of the docs' kernel was built");
    let bin = target.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for exe in &tests {
        let status = std::process::Command::new(exe).status().unwrap();
        assert!(status.success(), "{} failed", exe.display());
        let name = exe.file_name().unwrap().to_string_lossy();
        let stem = name.rsplit_once('-').map_or(&*name, |(s, _)| s);
        std::fs::copy(exe, bin.join(format!("my-op-{stem}"))).unwrap();
    }
    std::fs::remove_dir_all(&project).unwrap();
}
