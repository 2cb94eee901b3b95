//! Finding a library of NVIDIA's that Streamline loads at run time (NCCL, nvJPEG): at the path an
//! environment variable names; else under its names on the system's library path; else in the
//! wheel of the `python3` on `PATH` that ships it. A failure says everything that was tried.

use std::path::{Path, PathBuf};

/// Where to look for one library, and what to say when it is nowhere.
pub(crate) struct Search<'a> {
    /// The variable that names the library's path and, when set, is the only place looked at.
    pub(crate) env: &'a str,
    /// The library's names, looked for on the system's library path in this order.
    pub(crate) names: &'a [&'a str],
    /// How to install it, said after everything tried.
    pub(crate) install: &'a str,
}

/// The first place of `search` where `open` succeeds (given a name for messages and the path),
/// with `wheel` finding the wheel's copy last; else everything tried and how to install it.
pub(crate) fn find<T>(
    search: &Search<'_>,
    wheel: impl FnOnce() -> Result<PathBuf, String>,
    open: impl Fn(&str, &Path) -> Result<T, String>,
) -> Result<T, String> {
    if let Some(path) = std::env::var_os(search.env) {
        let path = PathBuf::from(path);
        return open(&path.to_string_lossy(), &path)
            .map_err(|e| format!("{}={}: {e}", search.env, path.display()));
    }
    let mut tried = Vec::new();
    for name in search.names {
        match open(name, Path::new(name)) {
            Ok(n) => return Ok(n),
            Err(e) => tried.push(format!("{name} on the library path: {e}")),
        }
    }
    match wheel() {
        Ok(path) => match open(&path.display().to_string(), &path) {
            Ok(n) => return Ok(n),
            Err(e) => tried.push(format!("{}: {e}", path.display())),
        },
        Err(e) => tried.push(e),
    }
    Err(format!("tried {}; {}", tried.join("; "), search.install))
}

/// What `python3 -c script` prints, trimmed; `wheel` names the wheel looked for in messages,
/// `missing` what it means that the script failed.
pub(crate) fn python3(script: &str, wheel: &str, missing: &str) -> Result<String, String> {
    let out = std::process::Command::new("python3")
        .args(["-c", script])
        .stderr(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("the {wheel} wheel (python3 could not run: {e})"))?;
    if !out.status.success() {
        return Err(format!("the {wheel} wheel ({missing})"));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_library_found_nowhere_says_where_it_was_looked_for() {
        let search = Search {
            env: "STREAMLINE_TEST_LIBRARY_THAT_IS_NOT_SET",
            names: &["liba.so.1", "libb.so.1"],
            install: "install it",
        };
        let e = find(
            &search,
            || Err("the w wheel (python3 has no w)".to_string()),
            |_, _| Err::<(), _>("no such file".to_string()),
        )
        .unwrap_err();
        assert_eq!(
            e,
            "tried liba.so.1 on the library path: no such file; libb.so.1 on the library path: \
             no such file; the w wheel (python3 has no w); install it"
        );
        let found = find(
            &search,
            || Ok(PathBuf::from("/w/libw.so")),
            |name, _| {
                if name.starts_with('/') {
                    Ok(name.to_string())
                } else {
                    Err("no".to_string())
                }
            },
        );
        assert_eq!(found.unwrap(), "/w/libw.so");
    }
}
