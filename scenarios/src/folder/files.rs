//! The folder's JPEG files as they are, for a decoder on the GPU: the loader's threads only
//! read them, checking the markers a JPEG starts and ends with, and the headers read once at
//! the start bound the memory a batch of them takes decoded.

use super::{ImageFolder, OnBadImage};
use std::path::Path;
use streamline::error::{Error, Result};

/// Bytes at the end of a JPEG file searched for its end-of-image marker (writers may append
/// a few bytes after it).
const TRAILER: usize = 1024;

/// What a batch of the folder's files takes at most: the largest file and the largest
/// decoded RGB image, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Largest {
    pub file: usize,
    pub image: usize,
}

/// Why `bytes` are not a whole JPEG, if they are not: empty, no start-of-image marker at the
/// front, or no end-of-image marker near the end (a truncated file).
pub fn jpeg_trouble(bytes: &[u8]) -> Option<&'static str> {
    if bytes.is_empty() {
        return Some("the file is empty");
    }
    if !bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        return Some("it does not start as a JPEG does");
    }
    let tail = &bytes[bytes.len().saturating_sub(TRAILER)..];
    if !tail.windows(2).any(|w| w == [0xFF, 0xD9]) {
        return Some("it has no end-of-image marker (truncated?)");
    }
    None
}

impl ImageFolder {
    /// The first file whose name does not end in `.jpg` or `.jpeg`, if any.
    pub fn first_not_jpeg(&self) -> Option<&Path> {
        self.files.iter().map(|p| p.as_path()).find(|p| {
            !p.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| matches!(e.to_ascii_lowercase().as_str(), "jpg" | "jpeg"))
        })
    }

    /// Reads every file's size and header: the largest file and decoded image. A file whose
    /// header does not read fails the call naming it, or (skipping bad images) is left out.
    pub fn largest(&self) -> Result<Largest> {
        let mut l = Largest::default();
        let mut good = 0;
        for path in &self.files {
            let read = std::fs::metadata(path)
                .map_err(|e| e.to_string())
                .and_then(|m| {
                    image::image_dimensions(path)
                        .map(|(w, h)| (m.len() as usize, w as usize * h as usize * 3))
                        .map_err(|e| e.to_string())
                });
            match read {
                Ok((file, image)) => {
                    l.file = l.file.max(file);
                    l.image = l.image.max(image);
                    good += 1;
                }
                Err(e) => self.bad(path, &e)?,
            }
        }
        if good == 0 {
            return Err(Error::arg(
                "input",
                format!("none of the {} images has a readable header", self.len()),
            ));
        }
        Ok(l)
    }

    /// Marks `path` bad: an error naming it when bad images fail the run, else listed as
    /// skipped (and passed over by later batches).
    pub fn bad(&self, path: &Path, why: &str) -> Result<()> {
        if self.on_bad == OnBadImage::Fail {
            return Err(Error::arg(
                "input",
                format!("cannot decode {}: {why}", path.display()),
            ));
        }
        let mut set = self.skipped.lock().unwrap_or_else(|p| p.into_inner());
        set.insert(path.to_path_buf());
        Ok(())
    }

    /// Whether `path` was left out as bad.
    fn is_skipped(&self, path: &Path) -> bool {
        let set = self.skipped.lock().unwrap_or_else(|p| p.into_inner());
        set.contains(path)
    }

    /// The files of batch `index` of `batch` (the same images [`ImageFolder::fill_batch`]
    /// decodes) read into `bytes` one after the other, file `j` ending at `ends[j].0` and
    /// being the folder's file `ends[j].1`, and their one-hot `targets`. A file that is not a whole JPEG ([`jpeg_trouble`]) or was left
    /// out before fails the batch naming it, or is passed over for the next one.
    pub fn fill_files(
        &self,
        index: usize,
        batch: usize,
        bytes: &mut [u8],
        ends: &mut Vec<(usize, usize)>,
        targets: &mut [f32],
    ) -> Result<()> {
        if batch == 0 || !targets.len().is_multiple_of(batch) {
            return Err(Error::arg(
                "targets",
                format!(
                    "a batch of {batch} needs a multiple of {batch} targets, got {}",
                    targets.len()
                ),
            ));
        }
        let classes = targets.len() / batch;
        targets.fill(0.0);
        ends.clear();
        let mut at = 0;
        for j in 0..batch {
            let mut k = (index * batch + j) % self.len();
            let mut tries = 0;
            let data = loop {
                if tries == self.len() {
                    return Err(Error::arg(
                        "input",
                        format!("none of the {} images is a whole JPEG", self.len()),
                    ));
                }
                tries += 1;
                let path = &self.files[k];
                if !self.is_skipped(path) {
                    let read = std::fs::read(path).map_err(|e| e.to_string());
                    match read.and_then(|d| jpeg_trouble(&d).map_or(Ok(d), |t| Err(t.into()))) {
                        Ok(d) => break d,
                        Err(e) => self.bad(path, &e)?,
                    }
                }
                k = (k + 1) % self.len();
            };
            let end = at + data.len();
            let room = bytes.len();
            let dst = bytes.get_mut(at..end).ok_or_else(|| {
                Error::arg(
                    "bytes",
                    format!("holds {room} bytes; the batch's files need more (at least {end})"),
                )
            })?;
            dst.copy_from_slice(&data);
            ends.push((end, k));
            at = end;
            targets[j * classes + self.label(k)] = 1.0;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_jpegs_only() {
        assert_eq!(jpeg_trouble(&[]), Some("the file is empty"));
        assert!(jpeg_trouble(b"\x89PNG").is_some());
        assert!(jpeg_trouble(&[0xFF, 0xD8, 0xFF, 0xE0, 1, 2]).is_some());
        assert_eq!(jpeg_trouble(&[0xFF, 0xD8, 0xFF, 0xE0, 0xFF, 0xD9]), None);
        // A trailer after the end marker is allowed.
        assert_eq!(jpeg_trouble(&[0xFF, 0xD8, 0xFF, 0xD9, 0, 0]), None);
    }

    #[test]
    fn files_are_read_whole_and_bad_ones_named_or_passed_over() {
        let d = std::env::temp_dir().join(format!("streamline-files-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        for (k, v) in [(0u8, 10u8), (2, 30)] {
            image::RgbImage::from_pixel(4, 2, image::Rgb([v; 3]))
                .save(d.join(format!("{k}.jpg")))
                .unwrap();
        }
        std::fs::write(d.join("1.jpg"), []).unwrap();
        let fail = ImageFolder::open(&d, 2).unwrap();
        assert_eq!(fail.first_not_jpeg(), None);
        let e = fail.largest().unwrap_err().to_string();
        assert!(e.contains("1.jpg"), "{e}");
        let (mut bytes, mut ends, mut t) = (vec![0u8; 4096], Vec::new(), vec![0f32; 3]);
        let e = fail
            .fill_files(0, 3, &mut bytes, &mut ends, &mut t)
            .unwrap_err()
            .to_string();
        assert!(e.contains("1.jpg") && e.contains("empty"), "{e}");
        let skip = ImageFolder::open_with(&d, 2, OnBadImage::Skip).unwrap();
        let l = skip.largest().unwrap();
        assert_eq!(l.image, 4 * 2 * 3);
        assert_eq!(skip.skipped(), [d.join("1.jpg")]);
        skip.fill_files(0, 3, &mut bytes, &mut ends, &mut t)
            .unwrap();
        // 0.jpg, 1.jpg -> 2.jpg, 2.jpg: three whole files.
        let f0 = std::fs::read(d.join("0.jpg")).unwrap();
        let f2 = std::fs::read(d.join("2.jpg")).unwrap();
        let (a, b) = (f0.len(), f2.len());
        assert_eq!(ends, [(a, 0), (a + b, 2), (a + 2 * b, 2)]);
        assert_eq!(&bytes[..a], &f0[..]);
        assert_eq!(&bytes[a..a + b], &f2[..]);
        // Too little room is an error naming the argument.
        let e = skip
            .fill_files(0, 3, &mut bytes[..10], &mut ends, &mut t)
            .unwrap_err()
            .to_string();
        assert!(e.contains("bytes"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
