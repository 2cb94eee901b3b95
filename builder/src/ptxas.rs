//! Assembling PTX with `ptxas -v` and reading its per-kernel resource report.

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
