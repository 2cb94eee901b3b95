//! Finding NCCL and loading the calls Streamline makes.
//!
//! The library is looked for, in order: at the path in `STREAMLINE_NCCL`; as `libnccl.so.2`
//! on the system's library path; in the `nvidia-nccl-cu13` (or `-cu12`) wheel of the `python3`
//! on `PATH` (`pip install nvidia-nccl-cu13`, which PyTorch installs too). cudarc's NCCL
//! bindings give the types; the calls are resolved here because cudarc's loader looks only for
//! names the wheel does not ship (`libnccl.so`, not `libnccl.so.2`) and panics where it finds
//! none, where Streamline must say what it tried.

use crate::error::{Error, Result};
use crate::runtime::dylib::{self, Search};
use cudarc::driver::sys::CUstream;
use cudarc::nccl::sys::{ncclComm_t, ncclUniqueId};
use libloading::Library;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// `ncclResult_t`, as the integer it is (an enum would make an unknown value undefined).
pub(crate) type NcclResult = c_int;
pub(crate) const SUCCESS: NcclResult = 0;
pub(crate) const IN_PROGRESS: NcclResult = 7;

/// The prefix of `ncclConfig_t` that Streamline sets. NCCL copies `size` bytes of it over its
/// defaults, so the fields after these keep NCCL's own defaults whatever its version.
#[repr(C)]
pub(crate) struct Config {
    pub(crate) size: usize,
    pub(crate) magic: u32,
    pub(crate) version: u32,
    pub(crate) blocking: c_int,
    pub(crate) cga_cluster_size: c_int,
    pub(crate) min_ctas: c_int,
    pub(crate) max_ctas: c_int,
    pub(crate) net_name: *const c_char,
    pub(crate) split_share: c_int,
}

/// `NCCL_CONFIG_UNDEF_INT`: NCCL picks the value.
const UNDEF: c_int = c_int::MIN;

impl Config {
    /// A nonblocking communicator: every call returns at once, so that Streamline's waits have
    /// deadlines and a failing peer can be aborted instead of waited for.
    pub(crate) fn nonblocking() -> Config {
        Config::with_blocking(0)
    }

    /// A blocking communicator: a collective is queued by the calling thread itself, with no
    /// hand-over to a thread of NCCL's, which is what a small collective's latency needs.
    pub(crate) fn blocking() -> Config {
        Config::with_blocking(1)
    }

    fn with_blocking(blocking: c_int) -> Config {
        Config {
            size: std::mem::size_of::<Config>(),
            magic: 0xcafe_beef,
            // NCCL_VERSION(2, 18, 0): the version whose fields these are.
            version: 2 * 10_000 + 18 * 100,
            blocking,
            cga_cluster_size: UNDEF,
            min_ctas: UNDEF,
            max_ctas: UNDEF,
            net_name: std::ptr::null(),
            split_share: UNDEF,
        }
    }
}

type Stream = CUstream;

/// A collective from one buffer into another with one more `int` (a reduction, or a root):
/// `(send, recv, count, datatype, op or root, comm, stream)`.
type WithOp = unsafe extern "C" fn(
    *const c_void,
    *mut c_void,
    usize,
    c_int,
    c_int,
    ncclComm_t,
    Stream,
) -> NcclResult;

/// The NCCL calls Streamline makes, resolved once from the loaded library.
pub(crate) struct Nccl {
    /// Where the library was found, for messages.
    pub(crate) origin: String,
    pub(crate) get_version: unsafe extern "C" fn(*mut c_int) -> NcclResult,
    pub(crate) get_unique_id: unsafe extern "C" fn(*mut ncclUniqueId) -> NcclResult,
    pub(crate) comm_init_rank_config: unsafe extern "C" fn(
        *mut ncclComm_t,
        c_int,
        ncclUniqueId,
        c_int,
        *mut Config,
    ) -> NcclResult,
    /// `ncclCommSplit(comm, color, key, newcomm, config)`.
    pub(crate) comm_split:
        unsafe extern "C" fn(ncclComm_t, c_int, c_int, *mut ncclComm_t, *mut Config) -> NcclResult,
    pub(crate) comm_get_async_error:
        unsafe extern "C" fn(ncclComm_t, *mut NcclResult) -> NcclResult,
    pub(crate) comm_abort: unsafe extern "C" fn(ncclComm_t) -> NcclResult,
    pub(crate) get_error_string: unsafe extern "C" fn(NcclResult) -> *const c_char,
    pub(crate) get_last_error: unsafe extern "C" fn(ncclComm_t) -> *const c_char,
    pub(crate) group_start: unsafe extern "C" fn() -> NcclResult,
    pub(crate) group_end: unsafe extern "C" fn() -> NcclResult,
    pub(crate) all_reduce: WithOp,
    /// `ncclBroadcast`: the `int` is the root rank.
    pub(crate) broadcast: WithOp,
    pub(crate) all_gather: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        c_int,
        ncclComm_t,
        Stream,
    ) -> NcclResult,
    pub(crate) reduce_scatter: WithOp,
    pub(crate) send:
        unsafe extern "C" fn(*const c_void, usize, c_int, c_int, ncclComm_t, Stream) -> NcclResult,
    pub(crate) recv:
        unsafe extern "C" fn(*mut c_void, usize, c_int, c_int, ncclComm_t, Stream) -> NcclResult,
    /// Keeps the calls above valid for the life of the process.
    _lib: Library,
}

// SAFETY: the table holds plain function pointers into a library that is never unloaded; NCCL's
// calls are thread-safe except on one communicator at once, which `Comm` serialises.
unsafe impl Send for Nccl {}
// SAFETY: as for `Send`: the table itself is immutable.
unsafe impl Sync for Nccl {}

/// The loaded library, or why none could be loaded.
pub(crate) fn nccl() -> Result<&'static Nccl> {
    static NCCL: OnceLock<std::result::Result<Nccl, String>> = OnceLock::new();
    NCCL.get_or_init(load)
        .as_ref()
        .map_err(|reason| Error::MissingLibrary {
            library: "NCCL",
            reason: reason.clone(),
        })
}

/// NCCL's version as (major, minor, patch), loading the library if it is not yet loaded.
pub fn version() -> Result<(u32, u32, u32)> {
    let n = nccl()?;
    let mut v: c_int = 0;
    // SAFETY: a resolved `ncclGetVersion`, writing one int.
    check(n, unsafe { (n.get_version)(&mut v) }, "ncclGetVersion")?;
    let v = v as u32;
    Ok((v / 10_000, (v % 10_000) / 100, v % 100))
}

/// Where the loaded NCCL came from (a path or the name the system resolved).
pub fn origin() -> Result<&'static str> {
    Ok(&nccl()?.origin)
}

/// Maps an NCCL result to Streamline's error, naming the call.
pub(crate) fn check(n: &Nccl, r: NcclResult, op: &'static str) -> Result<()> {
    if r == SUCCESS {
        return Ok(());
    }
    Err(Error::Nccl {
        op,
        code: r,
        reason: describe(n, r, std::ptr::null_mut()),
    })
}

/// NCCL's text for `r`, with the communicator's last error where there is one.
pub(crate) fn describe(n: &Nccl, r: NcclResult, comm: ncclComm_t) -> String {
    let text = |p: *const c_char| {
        if p.is_null() {
            String::new()
        } else {
            // SAFETY: NCCL returns NUL-terminated static or per-communicator strings.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        }
    };
    // SAFETY: `ncclGetErrorString` takes any result code and returns a static string.
    let mut s = text(unsafe { (n.get_error_string)(r) });
    // SAFETY: `ncclGetLastError` accepts a null communicator (the thread's last error).
    let last = text(unsafe { (n.get_last_error)(comm) });
    if !last.is_empty() {
        s = format!("{s}: {last}");
    }
    s
}

fn load() -> std::result::Result<Nccl, String> {
    connect_at_init();
    let search = Search {
        env: "STREAMLINE_NCCL",
        names: &["libnccl.so.2", "libnccl.so"],
        install: "install it with `pip install nvidia-nccl-cu13` or set STREAMLINE_NCCL to the path of libnccl.so.2",
    };
    dylib::find(&search, wheel_library, open)
}

/// Asks NCCL, unless the environment already says otherwise, to make every connection a
/// collective needs while a communicator is created (`NCCL_RUNTIME_CONNECT=0`) rather than at
/// the first collective that needs it. Creation has a deadline; a collective is queued by a
/// blocking call, which would otherwise wait for a peer that never comes.
fn connect_at_init() {
    const VAR: &str = "NCCL_RUNTIME_CONNECT";
    if std::env::var_os(VAR).is_none() {
        // NCCL reads its environment when a communicator is first created, after this. Set
        // once, while the library is first loaded (under the loader's `OnceLock`); Rust's
        // readers of the environment are serialised with it, and a program whose other
        // threads read the environment from C at this moment sets the variable itself first.
        std::env::set_var(VAR, "0");
    }
}

/// The NCCL library of the `nvidia-nccl-cu13`/`-cu12` wheel that `python3` imports.
fn wheel_library() -> std::result::Result<PathBuf, String> {
    const FIND: &str = "import nvidia.nccl as n; print(list(n.__path__)[0])";
    let dir = dylib::python3(FIND, "nvidia-nccl", "python3 has no nvidia.nccl")?;
    let lib = PathBuf::from(dir).join("lib").join("libnccl.so.2");
    if lib.is_file() {
        Ok(lib)
    } else {
        Err(format!(
            "the nvidia-nccl wheel ({} is missing)",
            lib.display()
        ))
    }
}

fn open(origin: &str, path: &Path) -> std::result::Result<Nccl, String> {
    // SAFETY: loading NCCL runs its initialisers, which only set up its own state.
    let lib = unsafe { Library::new(path) }.map_err(|e| e.to_string())?;
    /// Resolves one symbol as a function pointer of the field's type.
    macro_rules! sym {
        ($name:literal) => {{
            // SAFETY: the symbol is NCCL's C function of that name; the field's type is its
            // signature from `nccl.h` (with `ncclResult_t` and the enums as `int`).
            let s = unsafe { lib.get(concat!($name, "\0").as_bytes()) }
                .map_err(|e| format!("{}: {e}", $name))?;
            *s
        }};
    }
    Ok(Nccl {
        origin: origin.to_string(),
        get_version: sym!("ncclGetVersion"),
        get_unique_id: sym!("ncclGetUniqueId"),
        comm_init_rank_config: sym!("ncclCommInitRankConfig"),
        comm_split: sym!("ncclCommSplit"),
        comm_get_async_error: sym!("ncclCommGetAsyncError"),
        comm_abort: sym!("ncclCommAbort"),
        get_error_string: sym!("ncclGetErrorString"),
        get_last_error: sym!("ncclGetLastError"),
        group_start: sym!("ncclGroupStart"),
        group_end: sym!("ncclGroupEnd"),
        all_reduce: sym!("ncclAllReduce"),
        broadcast: sym!("ncclBroadcast"),
        all_gather: sym!("ncclAllGather"),
        reduce_scatter: sym!("ncclReduceScatter"),
        send: sym!("ncclSend"),
        recv: sym!("ncclRecv"),
        _lib: lib,
    })
}
