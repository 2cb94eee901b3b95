//! Images from a folder, decoded to uint8 RGB batches: what torchvision's `ImageFolder` and a
//! `DataLoader` give a training loop, for [`streamline::engine::Loader`]'s threads to run.

mod files;

pub use files::{jpeg_trouble, Entry, Largest};

use image::imageops::FilterType;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use streamline::error::{Error, Result};

/// What a batch does with an image that does not decode (corrupt, truncated, empty).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum OnBadImage {
    /// The run stops with an error naming the file.
    #[default]
    Fail,
    /// The file is left out: the next image of the folder that decodes takes its place, so
    /// the batch stays full, and the file is listed in the report.
    Skip,
}

/// Whether `p` names a PNG or JPEG file.
fn is_image(p: &Path) -> bool {
    p.is_file()
        && p.extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| matches!(e.to_ascii_lowercase().as_str(), "png" | "jpg" | "jpeg"))
}

fn entries(dir: &Path) -> Result<Vec<PathBuf>> {
    let io = |source| Error::Io {
        path: dir.display().to_string(),
        source,
    };
    let mut v = std::fs::read_dir(dir)
        .map_err(io)?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(io)?;
    v.sort();
    Ok(v)
}

/// The PNG and JPEG files directly in `dir`, sorted by name.
pub fn list_images(dir: &Path) -> Result<Vec<PathBuf>> {
    Ok(entries(dir)?.into_iter().filter(|p| is_image(p)).collect())
}

/// A folder of images, each decoded to `size x size` RGB.
#[derive(Clone, Debug)]
pub struct ImageFolder {
    files: Vec<PathBuf>,
    labels: Vec<usize>,
    classes: Vec<String>,
    size: usize,
    on_bad: OnBadImage,
    /// Files left out so far (shared by the clones the loader's threads use).
    skipped: Arc<Mutex<BTreeSet<PathBuf>>>,
}

impl ImageFolder {
    /// The images of `dir`. Where `dir` has subfolders holding images, each such subfolder is
    /// a class (sorted by name, as torchvision's `ImageFolder` numbers them) and its images
    /// are labelled with it; otherwise the images directly in `dir` all have class 0.
    pub fn open(dir: &Path, size: usize) -> Result<ImageFolder> {
        ImageFolder::open_with(dir, size, OnBadImage::Fail)
    }

    /// [`ImageFolder::open`], with images that do not decode handled as `on_bad` says.
    pub fn open_with(dir: &Path, size: usize, on_bad: OnBadImage) -> Result<ImageFolder> {
        if !(1..=1 << 14).contains(&size) {
            return Err(Error::arg(
                "size",
                format!("must be in 1..=16384, got {size}"),
            ));
        }
        let mut files = Vec::new();
        let mut labels = Vec::new();
        let mut classes = Vec::new();
        for sub in entries(dir)?.into_iter().filter(|p| p.is_dir()) {
            let imgs = list_images(&sub)?;
            if !imgs.is_empty() {
                labels.extend(std::iter::repeat_n(classes.len(), imgs.len()));
                files.extend(imgs);
                classes.push(
                    sub.file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                );
            }
        }
        if files.is_empty() {
            files = list_images(dir)?;
            labels = vec![0; files.len()];
            classes = vec![String::new()];
        }
        if files.is_empty() {
            return Err(Error::arg(
                "input",
                format!(
                    "no PNG or JPEG files in {} or its subfolders",
                    dir.display()
                ),
            ));
        }
        Ok(ImageFolder {
            files,
            labels,
            classes,
            size,
            on_bad,
            skipped: Arc::default(),
        })
    }

    /// The files left out so far because they did not decode, sorted.
    pub fn skipped(&self) -> Vec<PathBuf> {
        let set = self.skipped.lock().unwrap_or_else(|e| e.into_inner());
        set.iter().cloned().collect()
    }

    /// The image files, in the order the batches take them.
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// Number of images.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Always false: a folder is opened only with images.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Class names (one empty name for a folder without class subfolders).
    pub fn classes(&self) -> &[String] {
        &self.classes
    }

    /// Class of image `k`.
    pub fn label(&self, k: usize) -> usize {
        self.labels[k % self.labels.len()]
    }

    /// Side of the decoded images.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Decodes image `k` (modulo the count) into `out`, `size x size x 3` bytes in HWC order,
    /// as decoders give them. An image of another size is scaled (triangle filter) to cover
    /// the square and centre-cropped, keeping its aspect ratio.
    pub fn decode(&self, k: usize, out: &mut [u8]) -> Result<()> {
        let s = self.size;
        if out.len() != s * s * 3 {
            return Err(Error::arg(
                "out",
                format!("holds {} bytes, an image needs {}", out.len(), s * s * 3),
            ));
        }
        let path = &self.files[k % self.files.len()];
        let img = image::open(path)
            .map_err(|e| Error::arg("input", format!("cannot decode {}: {e}", path.display())))?;
        let side = s as u32;
        let img = if (img.width(), img.height()) == (side, side) {
            img
        } else {
            img.resize_to_fill(side, side, FilterType::Triangle)
        };
        out.copy_from_slice(img.to_rgb8().as_raw());
        Ok(())
    }

    /// Batch `index` of `batch` images (images `index * batch + j`, cycling through the
    /// folder epoch after epoch) into `images` (NHWC) and its one-hot `targets`
    /// (`batch x classes`).
    pub fn fill_batch(
        &self,
        index: usize,
        batch: usize,
        images: &mut [u8],
        targets: &mut [f32],
    ) -> Result<()> {
        let per = self.size * self.size * 3;
        if images.len() != batch * per || batch == 0 || !targets.len().is_multiple_of(batch) {
            return Err(Error::arg(
                "images",
                format!(
                    "a batch of {batch} needs {} bytes and a multiple of {batch} targets, got {} and {}",
                    batch * per,
                    images.len(),
                    targets.len()
                ),
            ));
        }
        let classes = targets.len() / batch;
        if classes < self.classes.len() {
            return Err(Error::arg(
                "classes",
                format!(
                    "{} class folders need at least {} outputs, got {classes}",
                    self.classes.len(),
                    self.classes.len()
                ),
            ));
        }
        targets.fill(0.0);
        for j in 0..batch {
            let k = self.decode_from(
                (index * batch + j) % self.len(),
                &mut images[j * per..(j + 1) * per],
            )?;
            targets[j * classes + self.label(k)] = 1.0;
        }
        Ok(())
    }

    /// Decodes image `k`, or with [`OnBadImage::Skip`] the first image from `k` on (cycling)
    /// that decodes; returns the one decoded.
    fn decode_from(&self, k: usize, out: &mut [u8]) -> Result<usize> {
        let mut first = None;
        for step in 0..self.len() {
            let at = (k + step) % self.len();
            match self.decode(at, out) {
                Ok(()) => return Ok(at),
                Err(e) if self.on_bad == OnBadImage::Fail => return Err(e),
                Err(e) => {
                    let mut set = self.skipped.lock().unwrap_or_else(|p| p.into_inner());
                    set.insert(self.files[at].clone());
                    first.get_or_insert(e);
                }
            }
        }
        Err(Error::arg(
            "input",
            format!(
                "none of the {} images decodes (the first error: {})",
                self.len(),
                first.map_or_else(String::new, |e| e.to_string())
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("streamline-folder-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn classes_from_subfolders_and_images_cropped_to_the_square() {
        let d = folder("classes");
        for (class, n) in [("cat", 2), ("dog", 1)] {
            std::fs::create_dir_all(d.join(class)).unwrap();
            for k in 0..n {
                // 8 x 4, left half dark, right half bright: the centre crop keeps both.
                let img = image::RgbImage::from_fn(8, 4, |x, _| {
                    image::Rgb(if x < 4 { [10, 20, 30] } else { [200, 210, 220] })
                });
                img.save(d.join(class).join(format!("{k}.png"))).unwrap();
            }
        }
        std::fs::write(d.join("cat").join("notes.txt"), "not an image").unwrap();
        let f = ImageFolder::open(&d, 4).unwrap();
        assert_eq!(f.len(), 3);
        assert_eq!(f.classes(), ["cat", "dog"]);
        let (mut images, mut targets) = (vec![0u8; 2 * 48], vec![9f32; 2 * 3]);
        // Batch 1 of 2: images 2 and 3 % 3 = 0, the dog and the first cat.
        f.fill_batch(1, 2, &mut images, &mut targets).unwrap();
        assert_eq!(targets, [0.0, 1.0, 0.0, 1.0, 0.0, 0.0]);
        // An 8 x 4 image covers 4 x 4 as it is: its centre 4 columns are kept, two dark and
        // two bright.
        assert_eq!(&images[0..3], &[10, 20, 30]);
        assert_eq!(&images[9..12], &[200, 210, 220]);
        assert!(f.fill_batch(0, 2, &mut images, &mut targets[..2]).is_err());
        assert!(f.fill_batch(0, 2, &mut images[..10], &mut targets).is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn flat_folders_broken_files_and_empty_folders() {
        let d = folder("flat");
        image::RgbImage::from_pixel(3, 3, image::Rgb([1, 2, 3]))
            .save(d.join("a.png"))
            .unwrap();
        std::fs::write(d.join("b.jpg"), "not a jpeg").unwrap();
        let f = ImageFolder::open(&d, 3).unwrap();
        assert_eq!((f.len(), f.classes().len()), (2, 1));
        let mut out = vec![0u8; 27];
        f.decode(0, &mut out).unwrap();
        assert!(out.chunks(3).all(|p| p == [1, 2, 3]));
        let e = f.decode(1, &mut out).unwrap_err().to_string();
        assert!(e.contains("input") && e.contains("b.jpg"), "{e}");
        let empty = folder("empty");
        let e = ImageFolder::open(&empty, 3).unwrap_err().to_string();
        assert!(e.contains("no PNG or JPEG"), "{e}");
        assert!(ImageFolder::open(&d.join("missing"), 3).is_err());
        assert!(ImageFolder::open(&d, 0).is_err());
        std::fs::remove_dir_all(&d).unwrap();
        std::fs::remove_dir_all(&empty).unwrap();
    }

    #[test]
    fn bad_images_fail_with_their_path_or_are_skipped_and_listed() {
        let d = folder("bad");
        for (k, v) in [(0u8, 10u8), (2, 30)] {
            image::RgbImage::from_pixel(2, 2, image::Rgb([v; 3]))
                .save(d.join(format!("{k}.png")))
                .unwrap();
        }
        std::fs::write(d.join("1.jpg"), []).unwrap();
        std::fs::write(d.join("3.jpg"), [0xff, 0xd8, 0xff]).unwrap();
        let (mut images, mut targets) = (vec![0u8; 4 * 12], vec![0f32; 4]);
        let fail = ImageFolder::open(&d, 2).unwrap();
        let e = fail
            .fill_batch(0, 4, &mut images, &mut targets)
            .unwrap_err()
            .to_string();
        assert!(e.contains("1.jpg"), "{e}");
        let skip = ImageFolder::open_with(&d, 2, OnBadImage::Skip).unwrap();
        skip.fill_batch(0, 4, &mut images, &mut targets).unwrap();
        // 0.png, 1.jpg -> 2.png, 2.png, 3.jpg -> 0.png: every slot holds a decoded image.
        let firsts: Vec<u8> = images.chunks(12).map(|im| im[0]).collect();
        assert_eq!(firsts, [10, 30, 30, 10]);
        assert_eq!(skip.skipped(), [d.join("1.jpg"), d.join("3.jpg")]);
        // The loader's clones share the list.
        assert_eq!(skip.clone().skipped().len(), 2);
        let all_bad = folder("all-bad");
        std::fs::write(all_bad.join("x.jpg"), []).unwrap();
        let f = ImageFolder::open_with(&all_bad, 2, OnBadImage::Skip).unwrap();
        let e = f
            .fill_batch(0, 1, &mut images[..12], &mut targets[..1])
            .unwrap_err();
        assert!(
            e.to_string().contains("none of the 1 images decodes"),
            "{e}"
        );
        std::fs::remove_dir_all(&d).unwrap();
        std::fs::remove_dir_all(&all_bad).unwrap();
    }
}
