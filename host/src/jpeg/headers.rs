//! What a decoder must know of a file before it decodes it (the image's size, and whether the
//! hardware decoders take it), read on any thread: a program that reads its files on several
//! threads reads their headers there too, and the thread that decodes only decodes.

use super::library::{check, Handle, JpegStream, Nvjpeg, MAX_COMPONENT};
use crate::error::{DriverContext, Result};
use cudarc::driver::CudaContext;
use std::ffi::c_int;
use std::sync::Arc;

/// An nvJPEG handle, destroyed (in the context it was made in) when the last of its users (a
/// decoder's back end, the header readers) goes.
pub(crate) struct OwnedHandle {
    pub(crate) lib: &'static Nvjpeg,
    pub(crate) raw: Handle,
    pub(crate) ctx: Arc<CudaContext>,
}

// SAFETY: nvJPEG's library handle may be used from several threads at once; what may not (a
// decoding state, a parsed-header stream) each thread has of its own.
unsafe impl Send for OwnedHandle {}
// SAFETY: as above.
unsafe impl Sync for OwnedHandle {}

impl Drop for OwnedHandle {
    fn drop(&mut self) {
        // nvJPEG frees the handle's device memory in the context current on this thread.
        let _ = self.ctx.bind_to_thread();
        // SAFETY: the handle was made by nvJPEG and is destroyed once, after every state and
        // stream made with it (each holds this handle alive).
        unsafe { (self.lib.destroy)(self.raw) };
    }
}

/// One file's header as a [`HeaderReader`] read it: made only by one, so that a decode given
/// headers gets what nvJPEG said of some file (and checks that it is this file's size).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileHeader {
    height: usize,
    width: usize,
    on_hardware: bool,
}

impl FileHeader {
    /// Rows of the decoded image.
    pub fn height(&self) -> usize {
        self.height
    }

    /// Columns of the decoded image.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Whether the hardware decoders take the file (never where the reader's decoder has none).
    pub fn on_hardware(&self) -> bool {
        self.on_hardware
    }
}

/// A parsed-header stream of one handle.
struct Parser {
    handle: Arc<OwnedHandle>,
    stream: JpegStream,
}

impl Parser {
    fn new(handle: &Arc<OwnedHandle>) -> Result<Parser> {
        let mut stream = std::ptr::null_mut();
        // SAFETY: the handle is live; the output is written on success and freed by `Drop`.
        check("nvjpegJpegStreamCreate", unsafe {
            (handle.lib.stream_create)(handle.raw, &mut stream)
        })?;
        Ok(Parser {
            handle: handle.clone(),
            stream,
        })
    }

    /// Whether this handle's batched decoder takes `file` (a header it cannot parse: no).
    fn supports(&mut self, file: &[u8]) -> Result<bool> {
        let (lib, h) = (self.handle.lib, self.handle.raw);
        // SAFETY: `file` is readable for its length; the stream belongs to this parser.
        let parsed =
            unsafe { (lib.stream_parse_header)(h, file.as_ptr(), file.len(), self.stream) };
        if check("nvjpegJpegStreamParseHeader", parsed).is_err() {
            return Ok(false);
        }
        let mut unsupported: c_int = 1;
        // SAFETY: the header was parsed into this parser's stream just above.
        check("nvjpegDecodeBatchedSupported", unsafe {
            (lib.batched_supported)(h, self.stream, &mut unsupported)
        })?;
        // nvJPEG answers 0 for "supported".
        Ok(unsupported == 0)
    }
}

impl Drop for Parser {
    fn drop(&mut self) {
        // SAFETY: the stream was made by this parser's handle, which is still alive.
        unsafe { (self.handle.lib.stream_destroy)(self.stream) };
    }
}

/// Reads files' headers for a decoder ([`super::JpegDecoder::header_reader`]): one reader per
/// thread, each usable while the decoder decodes on another.
pub struct HeaderReader {
    cuda: Parser,
    hardware: Option<Parser>,
    /// The context bound while reading: one that may be current on any number of threads (the
    /// device's primary context, also where the decoder's own is a green one).
    ctx: Arc<CudaContext>,
}

// SAFETY: a reader's parsed-header streams are used only through `&mut self` (one thread at a
// time), which nvJPEG allows from any thread; its handles are shared safely (see
// `OwnedHandle`).
unsafe impl Send for HeaderReader {}

impl HeaderReader {
    /// A reader for the back ends of `cuda` and `hardware` (where the decoder has one), reading
    /// with `ctx` current.
    pub(crate) fn new(
        ctx: &Arc<CudaContext>,
        cuda: &Arc<OwnedHandle>,
        hardware: Option<&Arc<OwnedHandle>>,
    ) -> Result<HeaderReader> {
        Ok(HeaderReader {
            cuda: Parser::new(cuda)?,
            hardware: hardware.map(Parser::new).transpose()?,
            ctx: ctx.clone(),
        })
    }

    /// `file`'s header; why not, for a file nvJPEG cannot read or would decode wrongly
    /// ([`super::nvjpeg_trouble`]).
    pub fn read(&mut self, file: &[u8]) -> std::result::Result<FileHeader, String> {
        if let Some(why) = super::nvjpeg_trouble(file) {
            return Err(why.to_string());
        }
        self.ctx
            .bind_to_thread()
            .op("cuCtxSetCurrent")
            .map_err(|e| e.to_string())?;
        let lib = self.cuda.handle.lib;
        let (mut components, mut subsampling) = (0, 0);
        let (mut w, mut h) = ([0 as c_int; MAX_COMPONENT], [0 as c_int; MAX_COMPONENT]);
        // SAFETY: `file` is readable for its length; the outputs hold `MAX_COMPONENT` ints.
        let s = unsafe {
            (lib.get_image_info)(
                self.cuda.handle.raw,
                file.as_ptr(),
                file.len(),
                &mut components,
                &mut subsampling,
                w.as_mut_ptr(),
                h.as_mut_ptr(),
            )
        };
        check("nvjpegGetImageInfo", s).map_err(|e| e.to_string())?;
        if w[0] <= 0 || h[0] <= 0 || !(components == 1 || components == 3) {
            return Err(format!("{components} components of {} x {}", w[0], h[0]));
        }
        let on_hardware = match &mut self.hardware {
            Some(p) => p.supports(file).map_err(|e| e.to_string())?,
            None => false,
        };
        Ok(FileHeader {
            height: h[0] as usize,
            width: w[0] as usize,
            on_hardware,
        })
    }
}
