//! JPEG files decoded on the GPU through NVIDIA's nvJPEG, loaded at run time like the driver
//! (`STREAMLINE_NVJPEG`, the system's `libnvjpeg.so.13`, or the `nvidia-nvjpeg` wheel's):
//! batches split between the GPU's hardware JPEG decoders and nvJPEG's CUDA decoder, decoded
//! into one ragged batch of RGB images in stream order.

mod decoder;
mod headers;
mod library;
mod markers;

pub use decoder::{Backend, Decoded, HostTimes, JpegDecoder, Layout};
pub use headers::{FileHeader, HeaderReader};
pub use markers::{frame_size, is_progressive, nvjpeg_trouble};
