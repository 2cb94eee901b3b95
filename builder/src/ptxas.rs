//! Assembling PTX with `ptxas`: machine code (cubins) to embed, and the per-kernel resource
//! report of `ptxas -v`.

use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::Command;

/// Resources of one kernel as reported by `ptxas -v`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelResources {
    /// Kernel name.
    pub name: String,
    /// Registers per thread.
    pub registers: u32,
    /// Static shared memory in bytes.
    pub shared: u32,
    /// Stack frame (local memory) in bytes.
    pub stack: u32,
    /// Spill stores in bytes.
    pub spill_stores: u32,
    /// Spill loads in bytes.
    pub spill_loads: u32,
}

/// Assembles `ptx` for `arch` and returns each kernel's resources. Fails with ptxas's message
/// if it rejects the PTX.
pub fn assemble(ptxas: &Path, ptx: &Path, arch: &str) -> Result<Vec<KernelResources>> {
    let out = Command::new(ptxas)
        .arg(format!("-arch={arch}"))
        .args(["-v", "-O3", "-o", "/dev/null"])
        .arg(ptx)
        .output()
        .with_context(|| format!("could not run {}", ptxas.display()))?;
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!("ptxas rejected {} for {arch}:\n{text}", ptx.display());
    }
    Ok(parse_report(&text))
}

/// Assembles `ptx` for `arch` into the cubin `out`. Fails with ptxas's message if it rejects
/// the PTX.
pub fn cubin(ptxas: &Path, ptx: &Path, arch: &str, out: &Path) -> Result<()> {
    let result = Command::new(ptxas)
        .arg(format!("-arch={arch}"))
        .args(["-O3", "-o"])
        .arg(out)
        .arg(ptx)
        .output()
        .with_context(|| format!("could not run {}", ptxas.display()))?;
    if !result.status.success() {
        bail!(
            "ptxas rejected {} for {arch}:\n{}{}",
            ptx.display(),
            String::from_utf8_lossy(&result.stderr),
            String::from_utf8_lossy(&result.stdout)
        );
    }
    Ok(())
}

/// The CUDA release of `ptxas` as `(major, minor)`, from `ptxas --version`.
pub fn release(ptxas: &Path) -> Result<(u32, u32)> {
    let out = Command::new(ptxas)
        .arg("--version")
        .output()
        .with_context(|| format!("could not run {}", ptxas.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    parse_release(&text).with_context(|| {
        format!(
            "{} --version printed no `release X.Y`: {text}",
            ptxas.display()
        )
    })
}

/// The `release X.Y` of `ptxas --version`'s text.
pub fn parse_release(text: &str) -> Option<(u32, u32)> {
    let rest = &text[text.find("release ")? + "release ".len()..];
    let version = rest.split(|c: char| c == ',' || c.is_whitespace()).next()?;
    let (major, minor) = version.split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

fn number_before(line: &str, unit: &str) -> Option<u32> {
    let pos = line.find(unit)?;
    line[..pos].split_whitespace().last()?.parse().ok()
}

/// Parses the text of `ptxas -v`.
pub fn parse_report(text: &str) -> Vec<KernelResources> {
    let mut out: Vec<KernelResources> = Vec::new();
    for line in text.lines() {
        if let Some(pos) = line.find("Function properties for ") {
            let name = line[pos + "Function properties for ".len()..]
                .trim()
                .to_string();
            out.push(KernelResources {
                name,
                ..Default::default()
            });
            continue;
        }
        let Some(cur) = out.last_mut() else { continue };
        if line.contains("stack frame") {
            cur.stack = number_before(line, "bytes stack frame").unwrap_or(0);
            cur.spill_stores = number_before(line, "bytes spill stores").unwrap_or(0);
            cur.spill_loads = number_before(line, "bytes spill loads").unwrap_or(0);
        } else if line.contains("Used ") && line.contains("registers") {
            cur.registers = number_before(line, "registers").unwrap_or(0);
            cur.shared = number_before(line, "bytes smem").unwrap_or(0);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_ptxas_release() {
        let text = "ptxas: NVIDIA (R) Ptx optimizing assembler\n\
Copyright (c) 2005-2025 NVIDIA Corporation\n\
Cuda compilation tools, release 13.0, V13.0.88\n";
        assert_eq!(parse_release(text), Some((13, 0)));
        assert_eq!(parse_release("no version here"), None);
    }

    #[test]
    fn parses_ptxas_verbose_output() {
        let text = "ptxas info    : 0 bytes gmem\n\
ptxas info    : Compiling entry function 'k' for 'sm_90'\n\
ptxas info    : Function properties for k\n\
    40 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n\
ptxas info    : Used 38 registers, used 1 barriers, 2048 bytes smem, 360 bytes cmem[0]\n";
        let r = parse_report(text);
        assert_eq!(
            r,
            vec![KernelResources {
                name: "k".into(),
                registers: 38,
                shared: 2048,
                stack: 40,
                spill_stores: 8,
                spill_loads: 4
            }]
        );
    }
}
