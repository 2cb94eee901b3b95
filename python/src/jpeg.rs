//! JPEG decoding on the GPU for Python: files in, one ragged batch of RGB images out, in a
//! tensor the caller allocates once the headers give the batch's size.

use crate::device::on_stream;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::Mutex;
use streamline::engine::External;
use streamline::jpeg::{Backend, JpegDecoder};
use streamline::ops::image::extent_words;

/// A decoder per device, made on first use (nvJPEG's handles and states are kept across
/// batches).
static DECODERS: Mutex<Option<HashMap<usize, JpegDecoder>>> = Mutex::new(None);

/// Runs `f` with the decoder of `device`.
fn with_decoder<R>(
    g: &streamline::Gpu,
    device: usize,
    f: impl FnOnce(&mut JpegDecoder) -> streamline::Result<R>,
) -> streamline::Result<R> {
    let mut all = DECODERS.lock().unwrap_or_else(|p| p.into_inner());
    let all = all.get_or_insert_with(HashMap::new);
    let decoder = match all.entry(device) {
        Entry::Occupied(e) => e.into_mut(),
        Entry::Vacant(e) => e.insert(JpegDecoder::new(g, Backend::Hardware)?),
    };
    f(decoder)
}

/// The `(height, width)` of each of `files` as its header gives it, and the bytes of their
/// ragged RGB batch.
#[pyfunction]
pub fn jpeg_layout(
    py: Python<'_>,
    device: usize,
    files: Vec<Bound<'_, PyBytes>>,
) -> PyResult<(Vec<(usize, usize)>, usize)> {
    // The bytes are read in place: the caller's list keeps them alive for the call.
    let refs: Vec<&[u8]> = files.iter().map(|f| f.as_bytes()).collect();
    on_stream(py, device, 0, crate::device::IMAGE, |g, _| {
        with_decoder(g, device, |d| {
            let (layout, total) = d.layout(&refs)?;
            Ok((layout.sizes, total))
        })
    })
}

/// Decodes `files` into the `len` bytes at device address `out` on `stream`, as
/// [`jpeg_layout`] places them; returns the batch's extents as the fused augmentation reads
/// them (four words an image: the offset's low and high words, the height, the width) and how
/// many images the hardware decoders took.
#[pyfunction]
pub fn jpeg_decode_into(
    py: Python<'_>,
    device: usize,
    stream: u64,
    files: Vec<Bound<'_, PyBytes>>,
    out: u64,
    len: usize,
) -> PyResult<(Vec<u32>, usize)> {
    let refs: Vec<&[u8]> = files.iter().map(|f| f.as_bytes()).collect();
    on_stream(py, device, stream, crate::device::IMAGE, |g, s| {
        // SAFETY: the Python layer took `out` and `len` from a CUDA uint8 tensor on this
        // device, which it keeps alive for the call and orders on `stream`.
        let mut data = unsafe { External::<u8>::new(out, len, s) };
        with_decoder(g, device, |d| {
            let layout = d.decode_into(s, &refs, &mut data)?;
            Ok((extent_words(&layout.extents()), layout.on_hardware))
        })
    })
}
