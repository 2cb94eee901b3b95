//! The project `docs/writing-kernels.md` builds step by step, as a template: every code block
//! of the page that names a file (```` ```rust file=PATH ````) is one file of it.
//! `cargo xtask new-kernel NAME` writes it for a new kernel, and Streamline's out-of-tree test
//! writes, builds and tests it, so the page and the template cannot drift apart.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// The page.
pub const DOC: &str = include_str!("../../docs/writing-kernels.md");

/// The files the page writes, in its order: (path relative to the project, content).
pub fn files(doc: &str) -> Vec<(String, String)> {
    let mut files = Vec::new();
    let mut lines = doc.lines();
    while let Some(line) = lines.next() {
        let Some(path) = line.strip_prefix("```").and_then(|info| {
            info.split_whitespace()
                .find_map(|w| w.strip_prefix("file="))
        }) else {
            continue;
        };
        let mut body = String::new();
        for l in lines.by_ref() {
            if l.starts_with("```") {
                break;
            }
            body.push_str(l);
            body.push('\n');
        }
        files.push((path.to_string(), body));
    }
    files
}

/// Writes the page's project into `dir` (which must not exist or be empty) as package `name`
/// (`my-op` on the page), its Streamline dependencies pointing at the checkout `streamline`.
/// Returns the files written.
pub fn write(dir: &Path, name: &str, streamline: &Path) -> Result<Vec<PathBuf>> {
    let valid = name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !valid {
        bail!("NAME: `{name}` must be lowercase letters, digits and `-`, starting with a letter");
    }
    if dir.read_dir().is_ok_and(|mut d| d.next().is_some()) {
        bail!("{} exists and is not empty", dir.display());
    }
    let root = std::fs::canonicalize(streamline)
        .with_context(|| format!("no Streamline checkout at {}", streamline.display()))?;
    let root = format!("\"{}/", root.display());
    let mut written = Vec::new();
    for (path, body) in files(DOC) {
        let body = body
            .replace("\"../../streamline/", &root)
            .replace("\"../streamline/", &root)
            .replace("my-op", name)
            .replace("my_op", &name.replace('-', "_"));
        let dest = dir.join(&path);
        std::fs::create_dir_all(dest.parent().unwrap_or(dir))?;
        std::fs::write(&dest, body).with_context(|| format!("writing {}", dest.display()))?;
        written.push(dest);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_writes_a_whole_project() {
        let names: Vec<String> = files(DOC).into_iter().map(|(p, _)| p).collect();
        for needed in [
            "kernels/Cargo.toml",
            "kernels/src/lib.rs",
            "Cargo.toml",
            "build.rs",
            "src/lib.rs",
            "src/main.rs",
            "tests/relu_scale.rs",
        ] {
            assert!(names.iter().any(|n| n == needed), "no {needed}: {names:?}");
        }
    }

    #[test]
    fn the_project_tests_with_streamline_testing_as_a_dev_dependency() {
        let files = files(DOC);
        let manifest = &files.iter().find(|(p, _)| p == "Cargo.toml").unwrap().1;
        let (built, dev) = manifest.split_once("[dev-dependencies]").unwrap();
        assert!(built.contains("\nstreamline = "), "{manifest}");
        assert!(!built.contains("streamline-testing"), "{manifest}");
        assert!(dev.contains("\nstreamline-testing = "), "{manifest}");
    }

    #[test]
    fn bad_names_are_refused() {
        let e = write(Path::new("/nonexistent"), "My_Op", Path::new("."))
            .unwrap_err()
            .to_string();
        assert!(e.contains("NAME"), "{e}");
    }
}
