//! Decoding on the GPU (`--decode gpu`): the loader's threads only read a batch's JPEG files
//! into a page-locked slot; the first stage decodes them with nvJPEG straight into the device
//! ring, each image at its own size with its extents beside it, and the augmentation crops
//! each image from itself (the resize to the square a CPU loader does is part of its crop).
//! A file that is not a JPEG (a PNG) is decoded on the loader's thread and copied into the
//! ring after the decoded ones.

use super::ahead::{Set, AHEAD};
use super::feed::Slot;
use super::*;
use crate::folder::ImageFolder;
use std::sync::Mutex;
use streamline::engine::memory::h2d;
use streamline::engine::PinnedBuffer;
use streamline::jpeg::{Backend, HeaderReader, HostTimes, JpegDecoder};
use streamline::ops::image::{
    check_extents, extent_words, Augment, DeviceRng, ImageExtent, EXTENT_WORDS,
};
use streamline::Gpu;

/// How `augment-train` decodes the images of `--input`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Decode {
    /// On the GPU where nvJPEG loads and the folder holds JPEGs (files that are not JPEGs on
    /// the loader's threads), else on the CPU (one line of the report says which and why).
    #[default]
    Auto,
    /// On the GPU through nvJPEG (an error where it cannot); files that are not JPEGs on the
    /// loader's threads.
    Gpu,
    /// On the loader's threads (the `image` crate), each image scaled to cover the square.
    Cpu,
}

/// Whether `o`'s images decode on the GPU, and the report's line saying so.
pub(super) fn choose(gpu: &Gpu, o: &Options) -> Result<(bool, String)> {
    let Some(dir) = &o.input else {
        return Ok((false, String::new()));
    };
    let folder = ImageFolder::open(dir, o.size);
    let why_not = || -> Option<String> {
        if o.gpus > 1 {
            return Some("GPU decoding runs on one GPU: give --gpus 1".into());
        }
        if let Ok(f) = &folder {
            if f.not_jpeg() == f.len() {
                return Some("none of its files is named as a JPEG".into());
            }
        }
        JpegDecoder::new(gpu, Backend::Hardware)
            .err()
            .map(|e| e.to_string())
    };
    let on_host = match &folder {
        Ok(f) if f.not_jpeg() > 0 => format!(
            ", but for the {} of {} files not named as JPEGs, decoded on the loader's threads",
            f.not_jpeg(),
            f.len()
        ),
        _ => String::new(),
    };
    match (o.decode, why_not()) {
        (Decode::Cpu, _) => Ok((false, "images decoded on the CPU (--decode cpu)".into())),
        (Decode::Gpu, Some(why)) => Err(Error::arg("decode", format!("gpu: {why}"))),
        (Decode::Auto, Some(why)) => {
            let idle = match gpu.split() {
                Some(s) => format!(
                    "; the {} SMs kept for the decoder stay idle (--decoder-sms 0 gives them back)",
                    s.side_sms
                ),
                None => String::new(),
            };
            Ok((false, format!("images decoded on the CPU: {why}{idle}")))
        }
        (_, None) => {
            let sms = match gpu.split() {
                Some(s) => format!(
                    " on {} SMs of its own, the other work on the other {}",
                    s.side_sms, s.engine_sms
                ),
                None => " sharing every SM with the other work".to_string(),
            };
            Ok((
                true,
                format!("images decoded on the GPU (nvJPEG{sms}){on_host}"),
            ))
        }
    }
}

/// One ring slot's extents: on the device (what the augmentation reads), in page-locked memory
/// (the copy's source, so that queueing it never waits for the stream) and as the host made
/// them (what the check reads).
pub(super) struct Extents {
    pub(super) dev: DeviceBuffer<u32>,
    staged: PinnedBuffer<u32>,
    pub(super) host: Vec<ImageExtent>,
}

impl Extents {
    pub(super) fn new(pool: &StreamPool, batch: usize) -> Result<Extents> {
        Ok(Extents {
            dev: DeviceBuffer::zeros(pool, 0, EXTENT_WORDS * batch)?,
            staged: PinnedBuffer::zeros(pool, EXTENT_WORDS * batch)?,
            host: Vec::new(),
        })
    }
}

/// What the decode stage works with: the decoder (shared with the thread that decodes ahead,
/// see [`super::ahead`]), each ring slot's extents, the spare sets that thread decodes into,
/// and the augmentation of ragged batches.
pub(super) struct GpuDecode {
    pub(super) files: Arc<Mutex<FileDecoder>>,
    pub(super) slots: Vec<Extents>,
    pub(super) spares: Vec<Set>,
    pub(super) augment: Augment,
    /// Whether the hardware decoders take part, and if not why.
    pub(super) engine: String,
}

impl GpuDecode {
    pub(super) fn new(
        gpu: &Gpu,
        pool: &StreamPool,
        batch: usize,
        sizes: (usize, usize),
        cfg: &streamline::ops::image::AugmentConfig,
        seed: u64,
    ) -> Result<GpuDecode> {
        let decoder = JpegDecoder::new(gpu, Backend::Hardware)?;
        let engine = match &decoder.no_hardware {
            None => "the hardware JPEG decoders and the CUDA decoder".to_string(),
            Some(why) => format!("nvJPEG's CUDA decoder (no hardware decoders: {why})"),
        };
        let stream = pool.stream(0)?;
        let rng = DeviceRng::new(stream, seed)?;
        let augment = Augment::ragged(stream, batch, CHANNELS, cfg, &rng, false)?;
        let (images, targets) = sizes;
        let spares = (0..AHEAD)
            .map(|_| {
                Ok(Set {
                    images: DeviceBuffer::zeros(pool, 0, images)?,
                    targets: DeviceBuffer::zeros(pool, 0, targets)?,
                    extents: Extents::new(pool, batch)?,
                })
            })
            .collect::<Result<_>>()?;
        Ok(GpuDecode {
            files: Arc::new(Mutex::new(FileDecoder { decoder })),
            slots: (0..DEPTH)
                .map(|_| Extents::new(pool, batch))
                .collect::<Result<_>>()?,
            spares,
            augment,
            engine,
        })
    }
}

/// nvJPEG's side of the decode stage: a batch's files into the ring.
pub(super) struct FileDecoder {
    decoder: JpegDecoder,
}

impl FileDecoder {
    /// Where the decoder's calls have spent the host's time so far.
    pub(super) fn host_times(&self) -> HostTimes {
        self.decoder.host_times()
    }

    /// A reader of files' headers for a loader thread.
    pub(super) fn header_reader(&self) -> Result<HeaderReader> {
        self.decoder.header_reader()
    }

    /// Decodes the files of `slot` into `data` and their extents into `x`, on `stream`: the
    /// JPEGs by nvJPEG at the front, the images the loader decoded copied after them. A JPEG
    /// nvJPEG cannot decode fails the batch naming it, or (skipping bad images) is left out
    /// for later batches, another JPEG of the batch taking its place in this one, so that no
    /// batch is short.
    pub(super) fn decode(
        &mut self,
        folder: &ImageFolder,
        stream: &Arc<CudaStream>,
        slot: &Slot,
        x: &mut Extents,
        data: &mut DeviceBuffer<u8>,
    ) -> Result<()> {
        let bytes = slot.images.as_slice()?;
        let mut spans = Vec::with_capacity(slot.entries.len());
        let mut start = 0;
        for e in &slot.entries {
            spans.push(start..e.end);
            start = e.end;
        }
        let jpegs: Vec<usize> = (0..spans.len())
            .filter(|&j| slot.entries[j].decoded.is_none())
            .collect();
        let mut files: Vec<&[u8]> = jpegs.iter().map(|&j| &bytes[spans[j].clone()]).collect();
        let all = data.len();
        let first = match &slot.headers {
            Some(h) => {
                self.decoder
                    .decode_into_with(stream, &files, h, &mut data.view_mut(0..all)?)
            }
            None => self
                .decoder
                .decode_into(stream, &files, &mut data.view_mut(0..all)?),
        };
        let layout = match first {
            Ok(l) => l,
            Err(e) => {
                let which: Vec<usize> = jpegs.iter().map(|&j| slot.entries[j].file).collect();
                self.leave_out_bad(folder, stream, &mut files, &which, &e)?;
                self.decoder
                    .decode_into(stream, &files, &mut data.view_mut(0..all)?)?
            }
        };
        // Each image's extent in batch order; the host's images after the decoded ones.
        let decoded = layout.extents();
        let mut ext = Vec::with_capacity(spans.len());
        let (mut at, mut next) = (layout.bytes(), 0);
        for (j, e) in slot.entries.iter().enumerate() {
            let Some((h, w)) = e.decoded else {
                ext.push(decoded[next]);
                next += 1;
                continue;
            };
            let end = at + h * w * CHANNELS;
            if end > all {
                return Err(Error::arg(
                    "input",
                    format!("a batch's images take more than the {all} bytes its ring slot holds"),
                ));
            }
            h2d(
                stream,
                &slot.images.view(spans[j].clone())?,
                &mut data.view_mut(at..end)?,
            )?;
            ext.push(ImageExtent {
                offset: at as u64,
                height: h as u32,
                width: w as u32,
            });
            at = end;
        }
        check_extents(&ext, CHANNELS, all)?;
        let words = extent_words(&ext);
        // Waits only for the copy from this set's last batch.
        let staged = &mut x.staged;
        staged
            .as_mut_slice()?
            .get_mut(..words.len())
            .ok_or_else(|| Error::arg("input", "a batch holds more images than the batch size"))?
            .copy_from_slice(&words);
        h2d(stream, &staged.view(0..words.len())?, &mut x.dev)?;
        x.host = ext;
        Ok(())
    }

    /// After batch decoding failed with `e`: finds the files that do not decode alone (file
    /// `i` being the folder's `which[i]`), and fails naming the first, or marks them bad and
    /// puts a good file of the batch in their places.
    fn leave_out_bad(
        &mut self,
        folder: &ImageFolder,
        stream: &Arc<CudaStream>,
        files: &mut [&[u8]],
        which: &[usize],
        e: &Error,
    ) -> Result<()> {
        let mut bad = Vec::new();
        for (i, f) in files.iter().enumerate() {
            if self.decoder.decode(stream, &[f]).is_err() {
                bad.push(i);
            }
        }
        let Some(good) = (0..files.len()).find(|i| !bad.contains(i)) else {
            return Err(Error::arg(
                "input",
                format!("no JPEG of a batch decodes: {e}"),
            ));
        };
        for &i in &bad {
            folder.bad(&folder.files()[which[i]], &format!("nvJPEG: {e}"))?;
            files[i] = files[good];
        }
        if bad.is_empty() {
            return Err(Error::arg(
                "input",
                format!("a batch failed to decode though each image decodes alone: {e}"),
            ));
        }
        Ok(())
    }
}
