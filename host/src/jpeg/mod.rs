//! JPEG files decoded on the GPU through NVIDIA's nvJPEG, loaded at run time like the driver
//! (`STREAMLINE_NVJPEG`, the system's `libnvjpeg.so.13`, or the `nvidia-nvjpeg` wheel's):
//! batches split between the GPU's hardware JPEG decoders and nvJPEG's CUDA decoder, decoded
//! into one ragged batch of RGB images in stream order. In the order a decode needs them:
//!
//! 1. `library`: nvJPEG's entry points, found at run time.
//! 2. [`markers`](frame_size): what a file's markers say before nvJPEG sees it (its frame's
//!    size, a kind nvJPEG decodes wrongly).
//! 3. [`headers`](HeaderReader): each file's header as the decoder needs it, read on any thread.
//! 4. [`batch`](Layout): where each image lies in the ragged batch, and where the host's time
//!    went.
//! 5. `part`: one back end, its handle, its decoding states used in turn, and its stream.
//! 6. [`decoder`](JpegDecoder): a batch split between the back ends, in stream order.

mod batch;
mod decoder;
mod headers;
mod library;
mod markers;
mod part;

pub use batch::{Decoded, HostTimes, Layout};
pub use decoder::{Backend, JpegDecoder};
pub use headers::{FileHeader, HeaderReader};
pub use markers::{frame_size, is_progressive, nvjpeg_trouble};
