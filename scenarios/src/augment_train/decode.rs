//! Decoding on the GPU (`--decode gpu`): the loader's threads only read a batch's JPEG files
//! into a page-locked slot; the first stage decodes them with nvJPEG straight into the device
//! ring, each image at its own size with its extents beside it, and the augmentation crops
//! each image from itself (the resize to the square a CPU loader does is part of its crop).

use super::feed::Slot;
use super::*;
use crate::folder::ImageFolder;
use streamline::engine::memory::h2d;
use streamline::engine::PinnedBuffer;
use streamline::jpeg::{Backend, JpegDecoder};
use streamline::ops::image::{
    check_extents, extent_words, Augment, DeviceRng, ImageExtent, EXTENT_WORDS,
};
use streamline::Gpu;

/// How `augment-train` decodes the images of `--input`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Decode {
    /// On the GPU where nvJPEG loads and every file is a JPEG, else on the CPU (one line of
    /// the report says which and why).
    #[default]
    Auto,
    /// On the GPU through nvJPEG (an error where it cannot).
    Gpu,
    /// On the loader's threads (the `image` crate), each image scaled to cover the square.
    Cpu,
}

/// Whether `o`'s images decode on the GPU, and the report's line saying so.
pub(super) fn choose(gpu: &Gpu, o: &Options) -> Result<(bool, String)> {
    let Some(dir) = &o.input else {
        return Ok((false, String::new()));
    };
    let why_not = || -> Option<String> {
        if o.gpus > 1 {
            return Some("GPU decoding runs on one GPU: give --gpus 1".into());
        }
        let f = match ImageFolder::open(dir, o.size) {
            Ok(f) => f,
            Err(e) => return Some(e.to_string()),
        };
        if let Some(p) = f.first_not_jpeg() {
            return Some(format!(
                "{} is not a JPEG, and nvJPEG decodes JPEGs only",
                p.display()
            ));
        }
        JpegDecoder::new(gpu, Backend::Hardware)
            .err()
            .map(|e| e.to_string())
    };
    match (o.decode, why_not()) {
        (Decode::Cpu, _) => Ok((false, "images decoded on the CPU (--decode cpu)".into())),
        (Decode::Gpu, Some(why)) => Err(Error::arg("decode", format!("gpu: {why}"))),
        (Decode::Auto, Some(why)) => Ok((false, format!("images decoded on the CPU: {why}"))),
        (_, None) => Ok((true, "images decoded on the GPU (nvJPEG)".into())),
    }
}

/// What the decode stage works with: the decoder, each ring slot's extents on the device, in
/// page-locked memory (the copy's source, so that queueing it never waits for the stream) and
/// as the host made them, and the augmentation of ragged batches.
pub(super) struct GpuDecode {
    decoder: JpegDecoder,
    pub(super) ring_e: Vec<DeviceBuffer<u32>>,
    staged_e: Vec<PinnedBuffer<u32>>,
    pub(super) extents: Vec<Vec<ImageExtent>>,
    pub(super) augment: Augment,
    /// Whether the hardware decoders take part, and if not why.
    pub(super) engine: String,
}

impl GpuDecode {
    pub(super) fn new(
        gpu: &Gpu,
        pool: &StreamPool,
        batch: usize,
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
        let ring_e = (0..DEPTH)
            .map(|_| DeviceBuffer::zeros(pool, 0, EXTENT_WORDS * batch))
            .collect::<Result<_>>()?;
        let staged_e = (0..DEPTH)
            .map(|_| PinnedBuffer::zeros(pool, EXTENT_WORDS * batch))
            .collect::<Result<_>>()?;
        Ok(GpuDecode {
            decoder,
            ring_e,
            staged_e,
            extents: vec![Vec::new(); DEPTH],
            augment,
            engine,
        })
    }

    /// Decodes the files of `slot` into ring slot `s` (`data`) and their extents beside it,
    /// on `stream`. A file nvJPEG cannot decode fails the batch naming it, or (skipping bad
    /// images) is left out for later batches, another image of the batch taking its place in
    /// this one, so that no batch is short.
    pub(super) fn decode(
        &mut self,
        folder: &ImageFolder,
        stream: &Arc<CudaStream>,
        slot: &Slot,
        s: usize,
        data: &mut DeviceBuffer<u8>,
    ) -> Result<()> {
        let bytes = slot.images.as_slice()?;
        let mut files: Vec<&[u8]> = Vec::with_capacity(slot.ends.len());
        let mut start = 0;
        for &(end, _) in &slot.ends {
            files.push(&bytes[start..end]);
            start = end;
        }
        let layout = match self.decoder.decode_into(stream, &files, data) {
            Ok(l) => l,
            Err(e) => {
                let which: Vec<usize> = slot.ends.iter().map(|&(_, k)| k).collect();
                self.leave_out_bad(folder, stream, &mut files, &which, &e)?;
                self.decoder.decode_into(stream, &files, data)?
            }
        };
        let ext = layout.extents();
        check_extents(&ext, CHANNELS, data.len())?;
        let words = extent_words(&ext);
        // Waits only for the copy from this slot three batches ago.
        let staged = &mut self.staged_e[s];
        staged
            .as_mut_slice()?
            .get_mut(..words.len())
            .ok_or_else(|| Error::arg("input", "a batch holds more images than the batch size"))?
            .copy_from_slice(&words);
        h2d(stream, &staged.view(0..words.len())?, &mut self.ring_e[s])?;
        self.extents[s] = ext;
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
                format!("no image of a batch decodes: {e}"),
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
