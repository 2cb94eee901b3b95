//! Where the batches come from, filled on the loader's threads into page-locked slots: generated
//! batches, or a folder's images decoded there, or its JPEG files as they are (with their
//! headers) for the GPU to decode; each GPU of a data-parallel run its own part of each batch.

use super::feed::lock;
use super::*;
use crate::folder::{Entry, ImageFolder};
use rand::{rngs::StdRng, Rng, SeedableRng};
use std::sync::Mutex;
use streamline::engine::loader::HostSlot;
use streamline::engine::PinnedBuffer;
use streamline::error::{Error, Result};
use streamline::jpeg::{FileHeader, HeaderReader};

/// Which part of each global batch a GPU trains on: part `index` of `count` (the whole batch
/// on one GPU). Each part is a batch of its own, drawn or read apart from the others.
#[derive(Clone, Copy, Debug)]
pub(super) struct Shard {
    pub(super) index: usize,
    pub(super) count: usize,
    /// Whether the step is one GPU's part of a data-parallel step (its model in buckets, its
    /// gradient in the type it travels in), also on a world of one.
    pub(super) exchange: bool,
}

impl Shard {
    pub(super) const WHOLE: Shard = Shard {
        index: 0,
        count: 1,
        exchange: false,
    };

    /// The seed of this part's data and draws (the whole batch's for part 0).
    pub(super) fn seed(&self, seed: u64) -> u64 {
        seed + 7919 * self.index as u64
    }
}

/// Where the batches come from: filled on the loader's threads, the same batch for the same
/// index every time (the check rebuilds the last one).
pub(super) enum Source {
    /// [`DATA`] generated batches (uint8 NHWC and one-hot targets), cycled through.
    Generated { images: Vec<u8>, targets: Vec<f32> },
    /// Decoded from a folder: this GPU's part of each global batch.
    Folder(ImageFolder, Shard),
    /// Read from a folder of JPEGs as they are, for the GPU to decode.
    Files(ImageFolder, Shard),
}

impl Source {
    pub(super) fn new(
        o: &Options,
        batch: usize,
        seed: u64,
        shard: Shard,
        gpu_decode: bool,
    ) -> Result<Source> {
        if let Some(dir) = &o.input {
            let f = ImageFolder::open_with(dir, o.size, o.on_bad_image)?;
            if f.classes().len() > o.train.classes {
                return Err(Error::arg(
                    "input",
                    format!(
                        "{} holds {} class folders, more than the model's {} classes",
                        dir.display(),
                        f.classes().len(),
                        o.train.classes
                    ),
                ));
            }
            return Ok(if gpu_decode {
                Source::Files(f, shard)
            } else {
                Source::Folder(f, shard)
            });
        }
        let per = batch * CHANNELS * o.size * o.size;
        let mut rng = StdRng::seed_from_u64(shard.seed(seed));
        let images: Vec<u8> = (0..per * DATA).map(|_| rng.gen()).collect();
        let mut targets = vec![0.0f32; batch * o.train.classes * DATA];
        for row in targets.chunks_mut(o.train.classes) {
            row[rng.gen_range(0..o.train.classes)] = 1.0;
        }
        Ok(Source::Generated { images, targets })
    }

    /// The files of a folder left out so far because they did not decode.
    pub(super) fn skipped(&self) -> Vec<std::path::PathBuf> {
        match self {
            Source::Folder(f, _) | Source::Files(f, _) => f.skipped(),
            Source::Generated { .. } => Vec::new(),
        }
    }

    /// Batch `i` into `images` (NHWC) and `targets`.
    pub(super) fn fill(
        &self,
        i: usize,
        batch: usize,
        images: &mut [u8],
        targets: &mut [f32],
    ) -> Result<()> {
        match self {
            Source::Generated {
                images: all,
                targets: t,
            } => {
                let k = i % DATA;
                let (n, m) = (images.len(), targets.len());
                images.copy_from_slice(&all[k * n..(k + 1) * n]);
                targets.copy_from_slice(&t[k * m..(k + 1) * m]);
                Ok(())
            }
            Source::Folder(f, s) | Source::Files(f, s) => {
                f.fill_batch(i * s.count + s.index, batch, images, targets)
            }
        }
    }

    /// Batch `i` into a loader's slot: decoded images, or the files as they are for the GPU
    /// to decode, with their headers where `readers` has a reader to spare and every JPEG's
    /// header reads (else the decoder reads them, and names a bad file).
    pub(super) fn fill_slot(
        &self,
        i: usize,
        batch: usize,
        slot: &mut Slot,
        readers: &Mutex<Vec<HeaderReader>>,
    ) -> Result<()> {
        match self {
            Source::Files(f, s) => {
                f.fill_files(
                    i * s.count + s.index,
                    batch,
                    slot.images.as_mut_slice()?,
                    &mut slot.entries,
                    slot.targets.as_mut_slice()?,
                )?;
                slot.headers = None;
                let Some(mut reader) = lock(readers).pop() else {
                    return Ok(());
                };
                let bytes = slot.images.as_slice()?;
                let mut start = 0;
                let mut headers = Vec::with_capacity(slot.entries.len());
                for e in &slot.entries {
                    let file = &bytes[start..e.end];
                    start = e.end;
                    if e.decoded.is_some() {
                        continue;
                    }
                    match reader.read(file) {
                        Ok(h) => headers.push(h),
                        Err(_) => break,
                    }
                }
                lock(readers).push(reader);
                let jpegs = slot.entries.iter().filter(|e| e.decoded.is_none()).count();
                slot.headers = (headers.len() == jpegs).then_some(headers);
                Ok(())
            }
            _ => self.fill(
                i,
                batch,
                slot.images.as_mut_slice()?,
                slot.targets.as_mut_slice()?,
            ),
        }
    }

    /// The folder of JPEGs the GPU decodes, if that is the source.
    pub(super) fn files(&self) -> Option<&ImageFolder> {
        match self {
            Source::Files(f, _) => Some(f),
            _ => None,
        }
    }
}

/// A page-locked slot: one batch's images (decoded, or the files as `entries` place them) and
/// targets.
pub(super) struct Slot {
    pub(super) images: PinnedBuffer<u8>,
    pub(super) targets: PinnedBuffer<f32>,
    pub(super) entries: Vec<Entry>,
    /// The headers of the slot's JPEGs (the entries not decoded on the host), in order, where
    /// the loader's thread read them all.
    pub(super) headers: Option<Vec<FileHeader>>,
}

/// A slot is idle when both of its page-locked buffers are.
impl HostSlot for Slot {
    fn is_idle(&mut self) -> Result<bool> {
        Ok(self.images.is_idle()? && self.targets.is_idle()?)
    }
    fn wait_idle(&mut self) -> Result<()> {
        self.images.wait_idle()?;
        self.targets.wait_idle()
    }
}
