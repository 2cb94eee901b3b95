//! What a decode gives and costs: where each image of a ragged RGB batch lies ([`Layout`],
//! placed from the files' headers), the batch itself ([`Decoded`]), and where the host's time
//! went ([`HostTimes`]).

use super::headers::FileHeader;
use crate::error::{Error, Result};
use crate::ops::image::ImageExtent;
use cudarc::driver::CudaSlice;
use std::time::Duration;

/// Where each image of a ragged RGB batch lies: image `i` is `sizes[i]` (`height, width`) of
/// interleaved RGB from byte `offsets[i]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Where image `i` starts.
    pub offsets: Vec<usize>,
    /// `(height, width)` of image `i`.
    pub sizes: Vec<(usize, usize)>,
    /// How many images the hardware decoders took.
    pub on_hardware: usize,
}

impl Layout {
    /// Number of images.
    pub fn len(&self) -> usize {
        self.sizes.len()
    }

    /// Whether the batch has no image.
    pub fn is_empty(&self) -> bool {
        self.sizes.is_empty()
    }

    /// Bytes of the whole batch.
    pub fn bytes(&self) -> usize {
        self.sizes.iter().map(|(h, w)| h * w * 3).sum()
    }

    /// Each image's extent, as the fused augmentation reads a ragged batch
    /// ([`crate::ops::image::Augment::run_ragged`]).
    pub fn extents(&self) -> Vec<ImageExtent> {
        self.offsets
            .iter()
            .zip(&self.sizes)
            .map(|(&o, &(h, w))| ImageExtent {
                offset: o as u64,
                height: h as u32,
                width: w as u32,
            })
            .collect()
    }
}

/// A batch of RGB images of their own sizes, interleaved (`H x W x 3` each), one after the
/// other in one device buffer.
pub struct Decoded {
    /// Every image's bytes.
    pub data: CudaSlice<u8>,
    /// Where each image lies in `data`.
    pub layout: Layout,
}

/// Where a decoder's calls spent the host's time, summed since it was made.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HostTimes {
    /// Reading the files' headers (sizes and what each back end takes).
    pub headers: Duration,
    /// Waiting for the caller's stream before the hardware decoders (see the module).
    pub waiting: Duration,
    /// In nvJPEG's decoding calls (the hardware decoders' return about when they are done).
    pub decoding: Duration,
}

impl std::ops::Add for HostTimes {
    type Output = HostTimes;
    fn add(self, more: HostTimes) -> HostTimes {
        HostTimes {
            headers: self.headers + more.headers,
            waiting: self.waiting + more.waiting,
            decoding: self.decoding + more.decoding,
        }
    }
}

impl std::ops::Sub for HostTimes {
    type Output = HostTimes;
    fn sub(self, earlier: HostTimes) -> HostTimes {
        HostTimes {
            headers: self.headers.saturating_sub(earlier.headers),
            waiting: self.waiting.saturating_sub(earlier.waiting),
            decoding: self.decoding.saturating_sub(earlier.decoding),
        }
    }
}

/// Where each image of `headers` starts in a ragged RGB batch: `(layout, bytes of the batch)`.
pub(super) fn place(headers: &[FileHeader]) -> Result<(Layout, usize)> {
    let mut offsets = Vec::with_capacity(headers.len());
    let mut total = 0usize;
    for (i, h) in headers.iter().enumerate() {
        offsets.push(total);
        total = h
            .height()
            .checked_mul(h.width() * 3)
            .and_then(|b| total.checked_add(b))
            .ok_or_else(|| bad(i, "the batch's size overflows"))?;
    }
    Ok((
        Layout {
            offsets,
            sizes: headers.iter().map(|h| (h.height(), h.width())).collect(),
            on_hardware: 0,
        },
        total,
    ))
}

/// The error for file `i` of a batch.
pub(super) fn bad(i: usize, why: impl std::fmt::Display) -> Error {
    Error::arg(
        "files",
        format!("file {i} is not a JPEG nvJPEG can decode: {why}"),
    )
}
