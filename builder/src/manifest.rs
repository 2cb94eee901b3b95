//! The manifest written next to each PTX file, and what the host checks against it.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use streamline_device::{params, KernelRecord};

/// One parameter of a kernel entry as declared in the PTX.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParamInfo {
    /// Size in bytes.
    pub size: usize,
    /// Alignment in bytes.
    pub align: usize,
}

/// Launch bounds of an entry as the manifest records them (see
/// `streamline_device::LaunchBounds`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoundsInfo {
    /// PTX `.maxntid`.
    pub max_threads: u32,
    /// PTX `.minnctapersm`.
    pub min_blocks: u32,
}

/// One field of a kernel's parameter struct, for structs declared with
/// `streamline_device::params!`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldInfo {
    /// Field name.
    pub name: String,
    /// Byte offset in the struct.
    pub offset: usize,
    /// Size in bytes.
    pub size: usize,
    /// `u8` .. `u64`, `i8` .. `i64`, `f16`, `bf16`, `f32`, `f64`, or `bytes` (arrays); for a
    /// device address (`DevPtr<T>` / `DevPtrMut<T>`) `*const T` or `*mut T` of those.
    pub kind: String,
}

/// One `.entry` of a PTX module.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryInfo {
    /// Entry name.
    pub name: String,
    /// Parameters in order.
    pub params: Vec<ParamInfo>,
    /// Launch bounds written into the PTX, if the kernel declares them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bounds: Option<BoundsInfo>,
    /// The parameter struct's fields, where it was declared with `params!`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fields: Option<Vec<FieldInfo>>,
}

/// What was built: written as `NAME.manifest.json` beside `NAME.ptx`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Target architecture, e.g. `sm_90`.
    pub arch: String,
    /// The hash of the sources ([`hash_files`]) the PTX was built from.
    pub source_hash: String,
    /// The kernel entry points and their parameter lists.
    pub kernels: Vec<EntryInfo>,
    /// [`ptx_hash`] of the PTX written beside it: a PTX edited after the build is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ptx_sha256: Option<String>,
    /// The machine code `ptxas` assembled from that PTX for this architecture
    /// (`NAME.cubin` beside it), if it was built.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cubin: Option<CubinInfo>,
}

/// The machine code (cubin) of a manifest's architecture.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CubinInfo {
    /// [`bytes_hash`] of the cubin: one replaced after the build is refused.
    pub sha256: String,
    /// The CUDA release of the `ptxas` that assembled it, as `(major, minor)`: a driver older
    /// than that release cannot load it, and the host falls back to PTX.
    pub cuda: (u32, u32),
}

/// SHA-256 of a PTX text, in hex.
pub fn ptx_hash(ptx: &str) -> String {
    bytes_hash(ptx.as_bytes())
}

/// SHA-256 of bytes, in hex.
pub fn bytes_hash(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Parses the `.entry` declarations of a PTX module (`.visible .entry NAME( .param … )`) and
/// the launch bounds (`.maxntid X, 1, 1` and `.minnctapersm N`) between each and its body.
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
        let mut bounds = None;
        if let (Some(open), Some(close)) = (rest.find('('), rest.find(')')) {
            if open < close {
                for decl in rest[open + 1..close].split(',') {
                    if let Some(p) = parse_param(decl) {
                        params.push(p);
                    }
                }
                let head = &rest[close..rest[close..].find('{').map_or(rest.len(), |b| close + b)];
                bounds = parse_bounds(head);
            }
        }
        out.push(EntryInfo {
            name,
            params,
            bounds,
            fields: None,
        });
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

fn parse_bounds(head: &str) -> Option<BoundsInfo> {
    let value = |directive: &str| {
        let at = head.find(directive)? + directive.len();
        head[at..]
            .split(|c: char| c == ',' || c.is_whitespace())
            .find(|w| !w.is_empty())?
            .parse::<u32>()
            .ok()
    };
    Some(BoundsInfo {
        max_threads: value(".maxntid")?,
        min_blocks: value(".minnctapersm").unwrap_or(1),
    })
}

/// The parameter-struct records (`streamline_device::params`) in raw PTX: each struct's
/// record by name, each kernel's parameter type name by kernel, and the PTX without them.
#[allow(clippy::type_complexity)]
pub fn take_param_records(
    ptx: &str,
) -> Result<(Vec<(String, Vec<u32>)>, Vec<(String, Vec<u32>)>, String)> {
    let mut structs = Vec::new();
    let mut types = Vec::new();
    let mut rest = String::with_capacity(ptx.len());
    for line in ptx.lines() {
        let (prefix, words, into) = if line.contains(params::PARAMS_PREFIX) {
            (params::PARAMS_PREFIX, params::RECORD_WORDS, &mut structs)
        } else if line.contains(params::TYPE_PREFIX) {
            (params::TYPE_PREFIX, params::NAME_WORDS + 1, &mut types)
        } else {
            rest.push_str(line);
            rest.push('\n');
            continue;
        };
        let (name, w) = global_words(line, prefix, words)?;
        into.push((name, w));
    }
    Ok((structs, types, rest))
}

/// The name after `prefix` and the `words` little-endian u32 of a `.b8` global's initialiser
/// on `line` (missing trailing bytes are zeros).
fn global_words(line: &str, prefix: &str, words: usize) -> Result<(String, Vec<u32>)> {
    let at = line.find(prefix).context("no record on the line")?;
    let tail = &line[at + prefix.len()..];
    let name_end = tail.find('[').context("a record without its size")?;
    let name = tail[..name_end].to_string();
    let size: usize = tail[name_end + 1..]
        .split(']')
        .next()
        .and_then(|n| n.parse().ok())
        .with_context(|| format!("record of `{name}`: bad size"))?;
    let mut bytes: Vec<u8> = match (tail.find('{'), tail.find('}')) {
        (Some(a), Some(b)) if a < b => tail[a + 1..b]
            .split(',')
            .map(|v| v.trim().parse::<u8>())
            .collect::<Result<_, _>>()
            .with_context(|| format!("record of `{name}`: bad bytes"))?,
        _ => Vec::new(),
    };
    if !line.contains(".b8") || size != words * 4 || bytes.len() > size {
        bail!("record of `{name}` is not {} bytes", words * 4);
    }
    bytes.resize(size, 0);
    let w = bytes
        .chunks(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    Ok((name, w))
}

/// The fields of a parameter-struct record, checked to lie in order inside a struct of `size`
/// bytes; `kernel` names the kernel in errors.
pub fn decode_fields(words: &[u32], size: usize, kernel: &str) -> Result<Vec<FieldInfo>> {
    if words.len() != params::RECORD_WORDS || words[0] != params::VERSION {
        bail!("kernel `{kernel}`: its parameter record is of another streamline-device version");
    }
    let n = words[1] as usize;
    if n > params::MAX_FIELDS {
        bail!("kernel `{kernel}`: its parameter record has {n} fields");
    }
    let mut out: Vec<FieldInfo> = Vec::with_capacity(n);
    for f in 0..n {
        let at = 2 + f * params::FIELD_WORDS;
        let (offset, fsize) = (words[at] as usize, words[at + 1] as usize);
        let code = words[at + 2];
        let kind = params::FieldKind::from_code(code & 0xff)
            .zip(params::Pointer::from_code(code >> 8))
            .with_context(|| format!("kernel `{kernel}`: field {f} has an unknown kind"))?;
        let name = params::name_of(&words[at + 3..at + 3 + params::NAME_WORDS + 1])
            .and_then(|b| std::str::from_utf8(b).ok())
            .with_context(|| format!("kernel `{kernel}`: field {f} has a bad name"))?
            .to_string();
        let prev_end = out.last().map_or(0, |p| p.offset + p.size);
        if offset < prev_end || offset + fsize > size {
            bail!(
                "kernel `{kernel}`: field `{name}` (bytes {offset}..{}) overlaps another or lies outside the {size}-byte struct",
                offset + fsize
            );
        }
        out.push(FieldInfo {
            name,
            offset,
            size: fsize,
            kind: kind_name(kind),
        });
    }
    Ok(out)
}

/// How the manifest records `f`, a field of a parameter struct as `params!` describes it.
pub fn field_info(f: &params::FieldInfo) -> FieldInfo {
    FieldInfo {
        name: f.name.to_string(),
        offset: f.offset,
        size: f.size,
        kind: kind_name((f.kind, f.pointer)),
    }
}

/// Whether the manifest's `m` records `f` (what [`field_info`] makes of it), without
/// allocating.
pub fn field_matches(m: &FieldInfo, f: &params::FieldInfo) -> bool {
    let kind = match f.pointer {
        params::Pointer::No => Some(m.kind.as_str()),
        params::Pointer::Const => m.kind.strip_prefix("*const "),
        params::Pointer::Mut => m.kind.strip_prefix("*mut "),
    };
    m.name == f.name && m.offset == f.offset && m.size == f.size && kind == Some(f.kind.name())
}

/// The manifest's name of a field's type: its kind (`f32`), or for a device address its
/// access and element kind (`*const f32`, `*mut u8`).
fn kind_name((kind, pointer): (params::FieldKind, params::Pointer)) -> String {
    match pointer {
        params::Pointer::No => kind.name().to_string(),
        params::Pointer::Const => format!("*const {}", kind.name()),
        params::Pointer::Mut => format!("*mut {}", kind.name()),
    }
}

/// The declaration records (`streamline_device::KernelRecord`) in raw PTX, by kernel name,
/// and the PTX without them.
pub fn take_records(ptx: &str) -> Result<(Vec<(String, KernelRecord)>, String)> {
    let mut records = Vec::new();
    let mut rest = String::with_capacity(ptx.len());
    for line in ptx.lines() {
        let Some(at) = line.find(KernelRecord::PREFIX) else {
            rest.push_str(line);
            rest.push('\n');
            continue;
        };
        let tail = &line[at + KernelRecord::PREFIX.len()..];
        let name_end = tail.find('[').context("a kernel record without its size")?;
        let name = tail[..name_end].to_string();
        let size: usize = tail[name_end + 1..]
            .split(']')
            .next()
            .and_then(|n| n.parse().ok())
            .with_context(|| format!("kernel record of `{name}`: bad size"))?;
        let mut bytes: Vec<u8> = match (tail.find('{'), tail.find('}')) {
            (Some(a), Some(b)) if a < b => tail[a + 1..b]
                .split(',')
                .map(|v| v.trim().parse::<u8>())
                .collect::<Result<_, _>>()
                .with_context(|| format!("kernel record of `{name}`: bad bytes"))?,
            _ => Vec::new(),
        };
        if !line.contains(".b8") || size != KernelRecord::WORDS * 4 || bytes.len() > size {
            bail!(
                "kernel record of `{name}` is not {} bytes",
                KernelRecord::WORDS * 4
            );
        }
        bytes.resize(size, 0);
        let words: Vec<u32> = bytes
            .chunks(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let record = KernelRecord::decode(&words).with_context(|| {
            format!("kernel record of `{name}` is of another streamline-device version")
        })?;
        records.push((name, record));
    }
    Ok((records, rest))
}

/// Turns the linker's PTX into the shipped module: pairs every entry point with its
/// declaration record (failing, naming the kernel, on an entry without a declaration, a
/// declaration without an entry, or a parameter layout that differs), writes each declared
/// kernel's launch bounds into the PTX, and removes the records. Returns the PTX and its
/// entries.
pub fn finish_ptx(raw: &str) -> Result<(String, Vec<EntryInfo>)> {
    let (structs, types, raw) = take_param_records(raw)?;
    let (records, mut ptx) = take_records(&raw)?;
    let entries = parse_entries(&ptx);
    for e in &entries {
        if !records.iter().any(|(n, _)| *n == e.name) {
            bail!(
                "the PTX has an entry `{}` that no declaration names: define kernels with `streamline_device::kernel!`",
                e.name
            );
        }
    }
    for (name, record) in &records {
        let Some(entry) = entries.iter().find(|e| e.name == *name) else {
            bail!(
                "kernel `{name}` is declared but the PTX has no entry `{name}`: define it with `kernel! {{ #[declared(..)] pub unsafe fn {name}(..) {{ .. }} }}`"
            );
        };
        let want = [ParamInfo {
            size: record.param_size as usize,
            align: record.param_align as usize,
        }];
        if entry.params != want {
            bail!(
                "kernel `{name}` takes {:?} in the PTX but its declaration says {:?}",
                entry.params,
                want
            );
        }
        if let Some(b) = record.bounds {
            let head = format!(".entry {name}(");
            let start = ptx.find(&head).context("entry vanished")?;
            let body = ptx[start..]
                .find("\n{")
                .with_context(|| format!("no body after `{head}` in the PTX"))?;
            ptx.insert_str(
                start + body,
                &format!(
                    "\n.maxntid {}, 1, 1\n.minnctapersm {}",
                    b.max_threads, b.min_blocks
                ),
            );
        }
    }
    let mut entries = parse_entries(&ptx);
    for e in &mut entries {
        let words = types
            .iter()
            .find(|(k, _)| *k == e.name)
            .and_then(|(_, ty)| params::name_of(ty))
            .and_then(|b| std::str::from_utf8(b).ok())
            .and_then(|ty| structs.iter().find(|(s, _)| s == ty))
            .map(|(_, words)| words)
            .with_context(|| {
                format!(
                    "kernel `{}`: the PTX records no fields of its parameter struct (declare it with `streamline_device::params!`)",
                    e.name
                )
            })?;
        let size = e.params.first().map_or(0, |p| p.size);
        e.fields = Some(decode_fields(words, size, &e.name)?);
    }
    Ok((ptx, entries))
}

/// SHA-256 over `files` (each one's path relative to `base`, and its content), in hex: the
/// same sources give the same hash wherever the checkout lies and however their paths are
/// spelled (the files are taken in the order of their relative paths, each once).
pub fn hash_files(base: &Path, files: &[PathBuf]) -> Result<String> {
    let base = std::fs::canonicalize(base).unwrap_or_else(|_| base.to_path_buf());
    let mut named: Vec<(PathBuf, &PathBuf)> =
        files.iter().map(|f| (relative(&base, f), f)).collect();
    named.sort();
    named.dedup_by(|a, b| a.0 == b.0);
    let mut h = Sha256::new();
    for (rel, f) in named {
        h.update(rel.to_string_lossy().as_bytes());
        h.update([0]);
        let bytes = std::fs::read(f).with_context(|| format!("reading {}", f.display()))?;
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(&bytes);
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// `path` relative to `base` (both absolute), with `..` where needed.
fn relative(base: &Path, path: &Path) -> PathBuf {
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let b: Vec<_> = base.components().collect();
    let p: Vec<_> = path.components().collect();
    let common = b.iter().zip(&p).take_while(|(x, y)| x == y).count();
    let mut out = PathBuf::new();
    for _ in common..b.len() {
        out.push("..");
    }
    for c in &p[common..] {
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_source_hash_ignores_how_paths_are_spelled_and_ordered() {
        let dir = std::env::temp_dir().join(format!("streamline-hash-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::write(dir.join("Cargo.toml"), "[package]").unwrap();
        std::fs::write(dir.join("src/lib.rs"), "fn a() {}").unwrap();
        let plain = [dir.join("Cargo.toml"), dir.join("src/lib.rs")];
        let spelled = [dir.join("src/lib.rs"), dir.join("src/../Cargo.toml")];
        let a = hash_files(&dir, &plain).unwrap();
        assert_eq!(a, hash_files(&dir, &spelled).unwrap());
        std::fs::write(dir.join("src/lib.rs"), "fn b() {}").unwrap();
        assert_ne!(a, hash_files(&dir, &plain).unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn parses_byval_struct_and_scalar_params() {
        let ptx = "\n.visible .entry heavy_f32(\n\t.param .align 8 .b8 heavy_f32_param_0[24]\n)\n{\n}\n\
                   .visible .entry k2(\n\t.param .u64 .ptr .global .align 4 k2_param_0,\n\t.param .u32 k2_param_1\n)\n{}";
        let e = parse_entries(ptx);
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].name, "heavy_f32");
        assert_eq!(e[0].params, vec![ParamInfo { size: 24, align: 8 }]);
        assert_eq!(e[0].bounds, None);
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

#[cfg(test)]
/// A `.b8` global as LLVM writes it, with `words` as its bytes.
fn test_global(prefix: &str, name: &str, words: &[u32]) -> String {
    let bytes: Vec<String> = words
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .map(|b| b.to_string())
        .collect();
    format!(
        ".visible .global .align 4 .b8 {prefix}{name}[{}] = {{{}}};\n",
        words.len() * 4,
        bytes.join(", ")
    )
}

#[cfg(test)]
mod record_tests {
    use super::*;

    const RAW: &str = ".version 8.0\n.visible .global .align 4 .b8 __streamline_kernel_k[20] = {1, 0, 0, 0, 24, 0, 0, 0, 8, 0, 0, 0, 0, 1, 0, 0, 2};\n\
        .visible .entry k(\n\t.param .align 8 .b8 k_param_0[24]\n)\n{\n\tret;\n}\n";

    /// [`RAW`] with the records of `k`'s parameter struct (no fields).
    fn raw() -> String {
        format!(
            "{RAW}{}{}",
            test_global(params::PARAMS_PREFIX, "k", &params::encode(&[])),
            test_global(params::TYPE_PREFIX, "k", &params::type_record("k"))
        )
    }

    #[test]
    fn records_give_bounds_and_leave_the_ptx() {
        let (ptx, entries) = finish_ptx(&raw()).unwrap();
        assert!(!ptx.contains(KernelRecord::PREFIX));
        assert!(ptx.contains(".maxntid 256, 1, 1\n.minnctapersm 2\n{"));
        assert_eq!(entries.len(), 1);
        assert_eq!(
            entries[0].bounds,
            Some(BoundsInfo {
                max_threads: 256,
                min_blocks: 2
            })
        );
        assert_eq!(entries[0].params, vec![ParamInfo { size: 24, align: 8 }]);
    }

    #[test]
    fn an_entry_without_a_declaration_fails_naming_it() {
        let raw = raw().replace("__streamline_kernel_k[", "__streamline_kernel_other[");
        let e = finish_ptx(&raw).unwrap_err().to_string();
        assert!(e.contains("entry `k` that no declaration names"), "{e}");
    }

    #[test]
    fn a_declaration_without_an_entry_fails_naming_it() {
        let raw = format!(
            "{}.visible .global .align 4 .b8 __streamline_kernel_gone[20] = {{1, 0, 0, 0, 4, 0, 0, 0, 4}};\n",
            raw()
        );
        let e = finish_ptx(&raw).unwrap_err().to_string();
        assert!(
            e.contains("kernel `gone` is declared but the PTX has no entry `gone`"),
            "{e}"
        );
    }

    #[test]
    fn a_layout_that_differs_from_the_declaration_fails() {
        let raw = raw().replace("{1, 0, 0, 0, 24,", "{1, 0, 0, 0, 16,");
        let e = finish_ptx(&raw).unwrap_err().to_string();
        assert!(e.contains("kernel `k` takes"), "{e}");
    }
}

#[cfg(test)]
mod field_tests {
    use super::*;
    use streamline_device::params::{encode, type_record, FieldInfo as F, FieldKind, Pointer};

    const FIELDS: &[F] = &[
        F {
            name: "x",
            offset: 0,
            size: 8,
            kind: FieldKind::F32,
            pointer: Pointer::Mut,
        },
        F {
            name: "n",
            offset: 8,
            size: 4,
            kind: FieldKind::U32,
            pointer: Pointer::No,
        },
        F {
            name: "scale",
            offset: 12,
            size: 4,
            kind: FieldKind::F32,
            pointer: Pointer::No,
        },
    ];

    fn ptx(fields: &[F]) -> String {
        format!(
            ".version 8.0\n{}{}{}.visible .entry k(\n\t.param .align 8 .b8 k_param_0[16]\n)\n{{\n\tret;\n}}\n",
            test_global(KernelRecord::PREFIX, "k", &[1, 16, 8, 0, 0]),
            test_global(params::PARAMS_PREFIX, "k", &encode(fields)),
            test_global(params::TYPE_PREFIX, "k", &type_record("k")),
        )
    }

    #[test]
    fn fields_reach_the_manifest_and_leave_the_ptx() {
        let (out, entries) = finish_ptx(&ptx(FIELDS)).unwrap();
        assert!(!out.contains("__streamline"));
        let f = entries[0].fields.as_ref().unwrap();
        let got: Vec<_> = f
            .iter()
            .map(|f| (f.name.as_str(), f.offset, f.size, f.kind.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("x", 0, 8, "*mut f32"),
                ("n", 8, 4, "u32"),
                ("scale", 12, 4, "f32")
            ]
        );
    }

    #[test]
    fn fields_outside_the_struct_are_refused() {
        let mut wide = FIELDS.to_vec();
        wide[2].offset = 14;
        let e = finish_ptx(&ptx(&wide)).unwrap_err().to_string();
        assert!(e.contains("field `scale`"), "{e}");
        // A kernel whose struct has no record is refused.
        let plain = ptx(FIELDS).replace("__streamline_params_k", "__streamline_params_other");
        let e = finish_ptx(&plain).unwrap_err().to_string();
        assert!(e.contains("records no fields"), "{e}");
    }
}
