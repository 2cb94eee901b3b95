//! Finding nvJPEG and loading the calls Streamline makes.
//!
//! The library is looked for, in order: at the path in `STREAMLINE_NVJPEG`; as
//! `libnvjpeg.so.13` (then `.12`) on the system's library path; in the `nvidia-nvjpeg` wheel
//! (or `nvidia-nvjpeg-cu12`) of the `python3` on `PATH` (`pip install nvidia-nvjpeg`), or the
//! copy torchvision's wheel carries. The types and values are those of `nvjpeg.h`.

use crate::error::{Error, Result};
use crate::runtime::dylib::{self, Search};
use cudarc::driver::sys::CUstream;
use libloading::Library;
use std::ffi::{c_int, c_uchar, c_uint, c_void};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// `nvjpegStatus_t`, as the integer it is.
pub(crate) type Status = c_int;
pub(crate) const SUCCESS: Status = 0;

/// `nvjpegBackend_t`: Huffman decoding on the GPU for batches of more than 50 baseline images,
/// on the host otherwise.
pub(crate) const BACKEND_GPU_HYBRID: c_int = 2;
/// `nvjpegBackend_t`: the GPU's hardware JPEG decoders (baseline, one scan).
pub(crate) const BACKEND_HARDWARE: c_int = 3;
/// `nvjpegChromaSubsampling_t`: no chroma subsampling.
pub(crate) const CSS_444: c_int = 0;
/// `nvjpegOutputFormat_t`: RGB, interleaved, one plane.
pub(crate) const OUTPUT_RGBI: c_int = 5;
/// `NVJPEG_MAX_COMPONENT`.
pub(crate) const MAX_COMPONENT: usize = 4;

/// `nvjpegImage_t`: the planes an image is decoded into (only the first for interleaved RGB).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Image {
    pub(crate) channel: [*mut c_uchar; MAX_COMPONENT],
    pub(crate) pitch: [usize; MAX_COMPONENT],
}

/// Opaque handles.
pub(crate) type Handle = *mut c_void;
pub(crate) type State = *mut c_void;
pub(crate) type JpegStream = *mut c_void;

/// The calls, resolved once.
pub(crate) struct Nvjpeg {
    /// Where the library was loaded from, for messages.
    pub(crate) origin: String,
    pub(crate) create_ex:
        unsafe extern "C" fn(c_int, *mut c_void, *mut c_void, c_uint, *mut Handle) -> Status,
    pub(crate) destroy: unsafe extern "C" fn(Handle) -> Status,
    pub(crate) state_create: unsafe extern "C" fn(Handle, *mut State) -> Status,
    pub(crate) state_destroy: unsafe extern "C" fn(State) -> Status,
    pub(crate) get_image_info: unsafe extern "C" fn(
        Handle,
        *const c_uchar,
        usize,
        *mut c_int,
        *mut c_int,
        *mut c_int,
        *mut c_int,
    ) -> Status,
    pub(crate) batched_initialize:
        unsafe extern "C" fn(Handle, State, c_int, c_int, c_int) -> Status,
    pub(crate) decode_batched: unsafe extern "C" fn(
        Handle,
        State,
        *const *const c_uchar,
        *const usize,
        *mut Image,
        CUstream,
    ) -> Status,
    pub(crate) stream_create: unsafe extern "C" fn(Handle, *mut JpegStream) -> Status,
    pub(crate) stream_destroy: unsafe extern "C" fn(JpegStream) -> Status,
    pub(crate) stream_parse_header:
        unsafe extern "C" fn(Handle, *const c_uchar, usize, JpegStream) -> Status,
    pub(crate) batched_supported: unsafe extern "C" fn(Handle, JpegStream, *mut c_int) -> Status,
    /// `nvjpegDecodeBatchedPreAllocate` (handle, state, batch, width, height, subsampling,
    /// format), where the library has it.
    pub(crate) batched_pre_allocate:
        Option<unsafe extern "C" fn(Handle, State, c_int, c_int, c_int, c_int, c_int) -> Status>,
    _lib: Library,
}

// SAFETY: the fields are function pointers into the library, which `_lib` keeps loaded; nvJPEG's
// entry points may be called from any thread (each handle is used by one thread at a time, which
// the decoder's `&mut self` ensures).
unsafe impl Send for Nvjpeg {}
// SAFETY: as above; the struct is never written after loading.
unsafe impl Sync for Nvjpeg {}

/// nvJPEG, loaded on first use.
pub(crate) fn nvjpeg() -> Result<&'static Nvjpeg> {
    static LIB: OnceLock<std::result::Result<Nvjpeg, String>> = OnceLock::new();
    LIB.get_or_init(load)
        .as_ref()
        .map_err(|reason| Error::MissingLibrary {
            library: "nvJPEG",
            reason: reason.clone(),
        })
}

/// What a status means (`nvjpeg.h`'s names).
pub(crate) fn status_text(s: Status) -> &'static str {
    match s {
        1 => "NVJPEG_STATUS_NOT_INITIALIZED",
        2 => "NVJPEG_STATUS_INVALID_PARAMETER",
        3 => "NVJPEG_STATUS_BAD_JPEG",
        4 => "NVJPEG_STATUS_JPEG_NOT_SUPPORTED",
        5 => "NVJPEG_STATUS_ALLOCATOR_FAILURE",
        6 => "NVJPEG_STATUS_EXECUTION_FAILED",
        7 => "NVJPEG_STATUS_ARCH_MISMATCH",
        8 => "NVJPEG_STATUS_INTERNAL_ERROR",
        9 => "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED",
        10 => "NVJPEG_STATUS_INCOMPLETE_BITSTREAM",
        _ => "unknown nvJPEG status",
    }
}

/// `Ok` for success, else the error of call `op`.
pub(crate) fn check(op: &'static str, s: Status) -> Result<()> {
    if s == SUCCESS {
        Ok(())
    } else {
        Err(Error::Jpeg {
            op,
            code: s,
            reason: status_text(s).to_string(),
        })
    }
}

fn load() -> std::result::Result<Nvjpeg, String> {
    let search = Search {
        env: "STREAMLINE_NVJPEG",
        names: &["libnvjpeg.so.13", "libnvjpeg.so.12"],
        install: "install it with `pip install nvidia-nvjpeg` or set STREAMLINE_NVJPEG to the path of libnvjpeg.so.13",
    };
    dylib::find(&search, wheel_library, open)
}

/// The library of the `nvidia-nvjpeg` wheel (CUDA 13: `nvidia/cu13/lib`; CUDA 12:
/// `nvidia/nvjpeg/lib`) that `python3` imports.
fn wheel_library() -> std::result::Result<PathBuf, String> {
    // The `nvidia` namespace packages' folders, then the copy torchvision's wheel carries.
    const FIND: &str = "import os, importlib.util as u\n\
        s = u.find_spec('nvidia')\n\
        print('\\n'.join(os.path.abspath(p) for p in (s.submodule_search_locations if s else [])))\n\
        t = u.find_spec('torchvision')\n\
        print(os.path.dirname(t.origin) + '.libs' if t else '')";
    let roots = dylib::python3(FIND, "nvidia-nvjpeg", "python3 has no nvidia package")?;
    for root in roots.lines().filter(|l| !l.is_empty()).map(PathBuf::from) {
        for lib in [
            root.join("cu13/lib/libnvjpeg.so.13"),
            root.join("nvjpeg/lib/libnvjpeg.so.12"),
        ] {
            if lib.is_file() {
                return Ok(lib);
            }
        }
        // torchvision's wheel renames the copy it carries (`libnvjpeg-<hash>.so.13`).
        if let Ok(dir) = std::fs::read_dir(&root) {
            let mut copies: Vec<PathBuf> = dir
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("libnvjpeg") && n.contains(".so"))
                })
                .collect();
            copies.sort();
            if let Some(lib) = copies.pop() {
                return Ok(lib);
            }
        }
    }
    Err(format!(
        "the nvidia-nvjpeg wheel (no libnvjpeg under {})",
        roots.lines().collect::<Vec<_>>().join(", ")
    ))
}

fn open(origin: &str, path: &Path) -> std::result::Result<Nvjpeg, String> {
    // SAFETY: loading nvJPEG runs its initialisers, which only set up its own state.
    let lib = unsafe { Library::new(path) }.map_err(|e| e.to_string())?;
    /// Resolves one symbol as a function pointer of the field's type.
    macro_rules! sym {
        ($name:literal) => {{
            // SAFETY: the symbol is nvJPEG's C function of that name; the field's type is its
            // signature from `nvjpeg.h` (enums as `int`, handles as pointers).
            let s = unsafe { lib.get(concat!($name, "\0").as_bytes()) }
                .map_err(|e| format!("{}: {e}", $name))?;
            *s
        }};
    }
    /// Resolves one symbol that older versions of the library lack.
    macro_rules! optional {
        ($name:literal) => {{
            // SAFETY: as for `sym!`.
            unsafe { lib.get(concat!($name, "\0").as_bytes()) }
                .ok()
                .map(|s| *s)
        }};
    }
    Ok(Nvjpeg {
        origin: origin.to_string(),
        create_ex: sym!("nvjpegCreateEx"),
        destroy: sym!("nvjpegDestroy"),
        state_create: sym!("nvjpegJpegStateCreate"),
        state_destroy: sym!("nvjpegJpegStateDestroy"),
        get_image_info: sym!("nvjpegGetImageInfo"),
        batched_initialize: sym!("nvjpegDecodeBatchedInitialize"),
        decode_batched: sym!("nvjpegDecodeBatched"),
        stream_create: sym!("nvjpegJpegStreamCreate"),
        stream_destroy: sym!("nvjpegJpegStreamDestroy"),
        stream_parse_header: sym!("nvjpegJpegStreamParseHeader"),
        batched_supported: sym!("nvjpegDecodeBatchedSupported"),
        batched_pre_allocate: optional!("nvjpegDecodeBatchedPreAllocate"),
        _lib: lib,
    })
}
