//! Batched JPEG decoding on the GPU through nvJPEG, into one ragged batch of RGB images.
//!
//! The GPU's hardware JPEG decoders (H100 and H200 carry them) take every image they can
//! (baseline JPEG of one scan); nvJPEG's CUDA decoder (its GPU-hybrid back end: Huffman decoding
//! on the GPU for batches of more than 50 baseline images, on the host otherwise) takes the
//! rest, at the same time on a stream of its own, and a share of what the hardware could take
//! where one is asked for (as NVIDIA's DALI splits a batch). The caller's stream is ordered
//! after both.
//!
//! Each back end keeps two decoding states, used in turn and each reused only once the decode
//! that last used it has finished: where nvJPEG's call returns before its batch is decoded,
//! the host's part of the next batch (parsing, staging the files) overlaps it. The hardware
//! decoders' call returns about when its batch is decoded, so a program that queues other work
//! on the same thread waits for it (BENCHMARKS.md has the host's share). The back ends'
//! streams run at the device's greatest priority: their kernels are short, and whatever the
//! caller does next waits for them. On a [`Gpu`] opened with SMs kept for side work
//! ([`Gpu::with_side_sms`]), the decoder's streams and calls are in the kept SMs' context, so
//! that its kernels do not queue for SMs behind the blocks of the caller's other work.
//!
//! The hardware decoders write when their call is made, whatever the stream still has queued
//! before it (contrary to nvJPEG's documentation; the test suite's
//! `jpeg::a_decode_waits_for_the_work_queued_before_it` fails without the remedy), so the host
//! waits for the caller's stream before handing them a batch. A state's first decode allocates
//! its buffers, which waits for the whole device.

use super::batch::{bad, place, Decoded, HostTimes, Layout};
use super::headers::{FileHeader, HeaderReader};
use super::library::{nvjpeg, Image, BACKEND_GPU_HYBRID, BACKEND_HARDWARE, MAX_COMPONENT};
use super::part::Part;
use crate::error::{DriverContext, Error, Result};
use crate::runtime::Gpu;
use cudarc::driver::{CudaContext, CudaStream, DevicePtrMut};
use std::sync::Arc;
use std::time::Instant;

/// Which decoders a [`JpegDecoder`] uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Backend {
    /// The hardware decoders for every image they take, the CUDA decoder for the rest (the
    /// default; the CUDA decoder alone where the GPU has no hardware decoder).
    Hardware,
    /// nvJPEG's CUDA decoder alone.
    Cuda,
}

/// Decodes batches of JPEG files on one GPU (see the module's documentation).
pub struct JpegDecoder {
    ctx: Arc<CudaContext>,
    /// The context header readers bind: one any number of threads may have current.
    host_ctx: Arc<CudaContext>,
    times: HostTimes,
    /// Reads headers for the decoder's own layouts.
    reader: HeaderReader,
    hardware: Option<Part>,
    cuda: Part,
    /// Of the images the hardware takes, the share it decodes; the CUDA decoder the rest.
    hardware_share: f64,
    /// Why the hardware decoders are not used, where they are not.
    pub no_hardware: Option<String>,
}

// SAFETY: the nvJPEG handles are used only through `&mut self` (one thread at a time), which
// nvJPEG allows from any thread.
unsafe impl Send for JpegDecoder {}

impl JpegDecoder {
    /// A decoder on `gpu` using `backend`. Where the hardware decoders are asked for but the GPU
    /// has none, the CUDA decoder takes every image and [`JpegDecoder::no_hardware`] says why.
    pub fn new(gpu: &Gpu, backend: Backend) -> Result<JpegDecoder> {
        let lib = nvjpeg()?;
        let ctx = gpu.side_context();
        ctx.bind_to_thread().op("cuCtxSetCurrent")?;
        let cuda = Part::new(lib, ctx, BACKEND_GPU_HYBRID)?;
        let (hardware, no_hardware) = match backend {
            Backend::Cuda => (None, Some("not asked for".to_string())),
            Backend::Hardware => match Part::new(lib, ctx, BACKEND_HARDWARE) {
                Ok(p) => (Some(p), None),
                Err(e) => (None, Some(e.to_string())),
            },
        };
        let host_ctx = gpu.host_context().clone();
        let reader = HeaderReader::new(
            &host_ctx,
            &cuda.handle,
            hardware.as_ref().map(|p| &p.handle),
        )?;
        Ok(JpegDecoder {
            ctx: ctx.clone(),
            host_ctx,
            times: HostTimes::default(),
            reader,
            hardware,
            cuda,
            hardware_share: 1.0,
            no_hardware,
        })
    }

    /// Where this decoder's calls have spent the host's time so far.
    pub fn host_times(&self) -> HostTimes {
        self.times
    }

    /// Where nvJPEG was loaded from.
    pub fn library(&self) -> &'static str {
        self.cuda.lib.origin.as_str()
    }

    /// Of the images the hardware decoders can take, the share they decode (`0..=1`, default
    /// 1); the CUDA decoder takes the rest at the same time.
    pub fn set_hardware_share(&mut self, share: f64) -> Result<()> {
        if !(0.0..=1.0).contains(&share) {
            return Err(Error::arg(
                "hardware_share",
                format!("{share}: must be 0..=1"),
            ));
        }
        self.hardware_share = share;
        Ok(())
    }

    /// A reader of files' headers for this decoder, for another thread (one per thread): a
    /// program that reads its files on several threads reads their headers there, and hands
    /// them to [`JpegDecoder::decode_into_with`].
    pub fn header_reader(&self) -> Result<HeaderReader> {
        HeaderReader::new(
            &self.host_ctx,
            &self.cuda.handle,
            self.hardware.as_ref().map(|p| &p.handle),
        )
    }

    /// The headers of `files`: an error names the first file whose header nvJPEG cannot read,
    /// or that nvJPEG would decode wrongly ([`super::nvjpeg_trouble`]), by its index.
    pub fn headers(&mut self, files: &[&[u8]]) -> Result<Vec<FileHeader>> {
        let t = Instant::now();
        let r = files
            .iter()
            .enumerate()
            .map(|(i, f)| self.reader.read(f).map_err(|e| bad(i, e)))
            .collect();
        self.times.headers += t.elapsed();
        r
    }

    /// The sizes of `files` as their headers give them, and where each starts in a ragged RGB
    /// batch: `(layout, bytes of the batch)`. A file whose header nvJPEG cannot read, or that
    /// nvJPEG would decode wrongly ([`super::nvjpeg_trouble`]), is an error naming its index.
    pub fn layout(&mut self, files: &[&[u8]]) -> Result<(Layout, usize)> {
        let headers = self.headers(files)?;
        place(&headers)
    }

    /// Decodes `files` (JPEG bytes) into a new ragged RGB batch, ordered before later work on
    /// `stream`. A file whose header nvJPEG cannot read is an error naming its index; one that
    /// fails later fails the batch.
    pub fn decode(&mut self, stream: &Arc<CudaStream>, files: &[&[u8]]) -> Result<Decoded> {
        let headers = self.headers(files)?;
        let (layout, total) = place(&headers)?;
        // SAFETY: every byte is written by the decoders before any read is ordered after them.
        let mut data = unsafe { stream.alloc::<u8>(total.max(1)) }.op("cuMemAllocAsync")?;
        let layout = self.decode_at(stream, files, &headers, layout, &mut data)?;
        Ok(Decoded { data, layout })
    }

    /// Decodes `files` into the front of `data`, as [`JpegDecoder::layout`] places them,
    /// ordered after the work already queued on `stream` (the host waits for it first when the
    /// hardware decoders take part, see the module) and before later work on it; returns that
    /// layout with the count of images the hardware decoders took. Every byte of the batch is
    /// written, none after it.
    pub fn decode_into(
        &mut self,
        stream: &Arc<CudaStream>,
        files: &[&[u8]],
        data: &mut impl DevicePtrMut<u8>,
    ) -> Result<Layout> {
        let headers = self.headers(files)?;
        self.decode_placed(stream, files, &headers, data)
    }

    /// [`JpegDecoder::decode_into`] with the files' headers already read (by
    /// [`JpegDecoder::headers`] or a [`HeaderReader`] of this decoder), one per file.
    pub fn decode_into_with(
        &mut self,
        stream: &Arc<CudaStream>,
        files: &[&[u8]],
        headers: &[FileHeader],
        data: &mut impl DevicePtrMut<u8>,
    ) -> Result<Layout> {
        if headers.len() != files.len() {
            return Err(Error::arg(
                "headers",
                format!("{} headers for {} files", headers.len(), files.len()),
            ));
        }
        // The decoders write each image at the size nvJPEG reads from its file: a header of
        // another size would place it over its neighbours. The frame header says so cheaply;
        // where it is not plain (none found, or another size), nvJPEG reads the file again.
        for (i, (f, h)) in files.iter().zip(headers).enumerate() {
            let size = (h.height(), h.width());
            if super::frame_size(f) == Some(size) {
                continue;
            }
            let t = Instant::now();
            let read = self.reader.read(f);
            self.times.headers += t.elapsed();
            let read = read.map_err(|e| bad(i, e))?;
            if (read.height(), read.width()) != size {
                return Err(Error::arg(
                    "headers",
                    format!(
                        "header {i} says {} x {}, file {i} is {} x {}",
                        size.1,
                        size.0,
                        read.width(),
                        read.height()
                    ),
                ));
            }
        }
        self.decode_placed(stream, files, headers, data)
    }

    /// [`JpegDecoder::decode_into`] with `headers` known to be `files`' own: placed as
    /// [`place`] places them, into `data` if it holds them.
    fn decode_placed(
        &mut self,
        stream: &Arc<CudaStream>,
        files: &[&[u8]],
        headers: &[FileHeader],
        data: &mut impl DevicePtrMut<u8>,
    ) -> Result<Layout> {
        let (layout, total) = place(headers)?;
        if data.len() < total {
            return Err(Error::arg(
                "data",
                format!("holds {} bytes; the batch needs {total}", data.len()),
            ));
        }
        self.decode_at(stream, files, headers, layout, data)
    }

    /// [`JpegDecoder::decode_into`] with the files' headers and the layout [`place`] gave for
    /// them, which `data` holds.
    fn decode_at(
        &mut self,
        stream: &Arc<CudaStream>,
        files: &[&[u8]],
        headers: &[FileHeader],
        mut layout: Layout,
        data: &mut impl DevicePtrMut<u8>,
    ) -> Result<Layout> {
        self.ctx.bind_to_thread().op("cuCtxSetCurrent")?;
        // Which images go to the hardware decoders: the share asked for of those they take.
        let mut to_hardware = vec![false; files.len()];
        if self.hardware.is_some() {
            let supported: Vec<usize> = (0..files.len())
                .filter(|&i| headers[i].on_hardware())
                .collect();
            let take = (supported.len() as f64 * self.hardware_share).round() as usize;
            for &i in &supported[..take] {
                to_hardware[i] = true;
            }
        }
        let base = {
            let (ptr, _sync) = data.device_ptr_mut(stream);
            ptr
        };
        let image = |i: usize| {
            let (_, w) = layout.sizes[i];
            let mut im = Image {
                channel: [std::ptr::null_mut(); MAX_COMPONENT],
                pitch: [0; MAX_COMPONENT],
            };
            im.channel[0] = (base + layout.offsets[i] as u64) as *mut u8;
            im.pitch[0] = w * 3;
            im
        };
        // Each part with the images it decodes.
        let mut parts: Vec<(&mut Part, Vec<usize>)> = Vec::new();
        if let Some(hw) = &mut self.hardware {
            parts.push((hw, (0..files.len()).filter(|&i| to_hardware[i]).collect()));
        }
        parts.push((
            &mut self.cuda,
            (0..files.len()).filter(|&i| !to_hardware[i]).collect(),
        ));
        // nvJPEG's hardware decoders write their images when the call is made, not when the
        // stream reaches the decode: a stream wait does not hold them back. So before they get
        // any image, the host waits for `stream`, which waits for every earlier access to
        // `data` it knows of (the caller's own work, and the tracked readers of `data`).
        let t = Instant::now();
        if parts.iter().any(|(p, idx)| p.hardware && !idx.is_empty()) {
            stream.synchronize().op("cuStreamSynchronize")?;
        }
        self.times.waiting += t.elapsed();
        let t = Instant::now();
        let mut queued = Ok(());
        for (part, idx) in &mut parts {
            let inputs: Vec<&[u8]> = idx.iter().map(|&i| files[i]).collect();
            let mut images: Vec<Image> = idx.iter().map(|&i| image(i)).collect();
            queued = part
                .stream
                .join(stream)
                .op("cuStreamWaitEvent")
                .and_then(|()| {
                    // SAFETY: each image's plane is its own `h x 3w` bytes of `data` (the layout
                    // of these files' headers, which `data` holds), written only by this decode;
                    // `stream` waits for it below, whatever happens, before anything else uses
                    // `data`.
                    unsafe { part.decode(&inputs, &mut images) }
                });
            if queued.is_err() {
                break;
            }
        }
        // Joined even after a failure: a part may have queued writes into `data`, which must
        // not be freed or reused before they end.
        for (part, _) in &parts {
            stream.join(&part.stream).op("cuStreamWaitEvent")?;
        }
        drop(parts);
        self.times.decoding += t.elapsed();
        queued?;
        // The decoders wrote `data`: recorded now, after the joins, so that a reader on another
        // stream waits for them too.
        drop(data.device_ptr_mut(stream));
        layout.on_hardware = to_hardware.iter().filter(|&&t| t).count();
        Ok(layout)
    }
}
