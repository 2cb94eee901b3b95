//! The manifest written next to each PTX file, and what the host checks against it.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// One parameter of a kernel entry as declared in the PTX.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParamInfo {
    /// Size in bytes.
    pub size: usize,
    /// Alignment in bytes.
    pub align: usize,
}

/// One `.entry` of a PTX module.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryInfo {
    /// Entry name.
    pub name: String,
    /// Parameters in order.
    pub params: Vec<ParamInfo>,
}

/// What was built: written as `streamline.manifest.json` beside `streamline.ptx`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Target architecture, e.g. `sm_90`.
    pub arch: String,
    /// [`source_hash`] of the sources the PTX was built from.
    pub source_hash: String,
    /// The kernel entry points and their parameter lists.
    pub kernels: Vec<EntryInfo>,
}

/// Parses the `.entry` declarations of a PTX module (`.visible .entry NAME( .param … )`).
pub fn parse_entries(ptx: &str) -> Vec<EntryInfo> {
    let mut out = Vec::new();
    let mut rest = ptx;
    while let Some(pos) = rest.find(".entry ") {
        rest = &rest[pos + ".entry ".len()..];
        let name_end = rest
            .find(|c: char| c == '(' || c.is_whitespace())
            .unwrap_or(rest.len());
        let name = rest[..name_end].trim().to_string();
        let mut params = Vec::new();
        if let (Some(open), Some(close)) = (rest.find('('), rest.find(')')) {
            if open < close {
                for decl in rest[open + 1..close].split(',') {
                    if let Some(p) = parse_param(decl) {
                        params.push(p);
                    }
                }
            }
        }
        out.push(EntryInfo { name, params });
    }
    out
}

fn parse_param(decl: &str) -> Option<ParamInfo> {
    let words: Vec<&str> = decl.split_whitespace().collect();
    if words.first() != Some(&".param") {
        return None;
    }
    let mut align = None;
    let mut elem = None;
    let mut is_ptr = false;
    let mut i = 1;
    while i < words.len() {
        match words[i] {
            ".align" => {
                align = words.get(i + 1).and_then(|w| w.parse::<usize>().ok());
                i += 1;
            }
            ".ptr" => is_ptr = true,
            ".global" | ".const" | ".shared" | ".local" => {}
            w if w.starts_with('.') => {
                elem = w[2..].parse::<usize>().ok().map(|bits| bits / 8);
            }
            _ => {}
        }
        i += 1;
    }
    let elem = elem?;
    let last = words.last()?;
    let count = match (last.find('['), last.find(']')) {
        (Some(a), Some(b)) if a < b => last[a + 1..b].parse::<usize>().ok()?,
        _ => 1,
    };
    // On a `.ptr` parameter `.align` is the pointee's alignment, not the parameter's.
    let align = if is_ptr { elem } else { align.unwrap_or(elem) };
    Some(ParamInfo {
        size: elem * count,
        align,
    })
}

/// Files whose content determines the PTX: the kernels and the ABI crate.
fn source_files(workspace: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for dir in ["gpu-kernels/src", "abi/src"] {
        collect(&workspace.join(dir), &mut files)?;
    }
    for f in [
        "gpu-kernels/Cargo.toml",
        "gpu-kernels/rust-toolchain.toml",
        "abi/Cargo.toml",
    ] {
        files.push(workspace.join(f));
    }
    files.sort();
    Ok(files)
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            collect(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs" || e == "toml") {
            out.push(path);
        }
    }
    Ok(())
}

/// SHA-256 over the kernel and ABI sources (relative path and content of each file), in hex.
pub fn source_hash(workspace: &Path) -> Result<String> {
    let mut h = Sha256::new();
    for f in source_files(workspace)? {
        let rel = f.strip_prefix(workspace).unwrap_or(&f);
        h.update(rel.to_string_lossy().as_bytes());
        h.update([0]);
        let bytes = std::fs::read(&f).with_context(|| format!("reading {}", f.display()))?;
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(&bytes);
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// Every file [`source_hash`] reads, for `cargo:rerun-if-changed`.
pub fn tracked_sources(workspace: &Path) -> Result<Vec<PathBuf>> {
    source_files(workspace)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_byval_struct_and_scalar_params() {
        let ptx = "\n.visible .entry heavy_f32(\n\t.param .align 8 .b8 heavy_f32_param_0[24]\n)\n{\n}\n\
                   .visible .entry k2(\n\t.param .u64 .ptr .global .align 4 k2_param_0,\n\t.param .u32 k2_param_1\n)\n{}";
        let e = parse_entries(ptx);
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].name, "heavy_f32");
        assert_eq!(e[0].params, vec![ParamInfo { size: 24, align: 8 }]);
        assert_eq!(e[1].name, "k2");
        assert_eq!(
            e[1].params,
            vec![
                ParamInfo { size: 8, align: 8 },
                ParamInfo { size: 4, align: 4 }
            ]
        );
    }
}
