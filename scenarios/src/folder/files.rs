//! The folder's JPEG files as they are, for a decoder on the GPU: the loader's threads only
//! read them, checking the markers a JPEG starts and ends with, and the headers read once at
//! the start bound the memory a batch of them takes decoded. A file that is not a JPEG (a PNG)
//! is decoded on the loader's thread instead, into RGB pixels the GPU only copies.

use super::{ImageFolder, OnBadImage};
use std::io::Seek;
use std::path::Path;
use streamline::error::{Error, Result};

/// Bytes at the end of a JPEG file searched for its end-of-image marker (writers may append
/// a few bytes after it).
const TRAILER: usize = 1024;

/// What a batch of the folder's files takes at most: the largest file and the largest
/// decoded RGB image, in bytes, and the largest image of a file that may be decoded on the
/// host (not a JPEG, or a progressive one; 0 if there is none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Largest {
    pub file: usize,
    pub image: usize,
    pub on_host: usize,
}

impl Largest {
    /// Bytes an image of a batch takes at most in a loader's slot: the file as it is, or the
    /// pixels of one decoded on the host.
    pub fn slot(&self) -> usize {
        self.file.max(self.on_host)
    }
}

/// One image of a batch of files read into a slot: where its bytes end, which of the folder's
/// files it is, and for a file decoded on the host (not a JPEG) its `(height, width)`, its
/// bytes then being its RGB pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub end: usize,
    pub file: usize,
    pub decoded: Option<(usize, usize)>,
}

/// Whether `bytes` start as a JPEG does (the start-of-image marker and another marker).
fn starts_as_jpeg(bytes: &[u8]) -> bool {
    bytes.starts_with(&[0xFF, 0xD8, 0xFF])
}

/// One file's bytes for a batch, and for an image decoded here its `(height, width)`.
type ForBatch = (Vec<u8>, Option<(usize, usize)>);

/// The bytes of one file for the batch: a whole JPEG as it is, or any other image (or a JPEG
/// nvJPEG would decode wrongly) decoded to RGB with its `(height, width)`; why not, for a file
/// that does not decode.
fn read_for_batch(path: &Path) -> std::result::Result<ForBatch, String> {
    let data = std::fs::read(path).map_err(|e| e.to_string())?;
    if data.is_empty() || starts_as_jpeg(&data) {
        if let Some(t) = jpeg_trouble(&data) {
            return Err(t.into());
        }
        if streamline::jpeg::nvjpeg_trouble(&data).is_none() {
            return Ok((data, None));
        }
    }
    let rgb = image::load_from_memory(&data)
        .map_err(|e| e.to_string())?
        .to_rgb8();
    let hw = (rgb.height() as usize, rgb.width() as usize);
    Ok((rgb.into_raw(), Some(hw)))
}

/// Why `bytes` are not a whole JPEG, if they are not: empty, no start-of-image marker at the
/// front, or no end-of-image marker near the end (a truncated file).
pub fn jpeg_trouble(bytes: &[u8]) -> Option<&'static str> {
    if bytes.is_empty() {
        return Some("the file is empty");
    }
    if !starts_as_jpeg(bytes) {
        return Some("it does not start as a JPEG does");
    }
    let tail = &bytes[bytes.len().saturating_sub(TRAILER)..];
    if !tail.windows(2).any(|w| w == [0xFF, 0xD9]) {
        return Some("it has no end-of-image marker (truncated?)");
    }
    None
}

impl ImageFolder {
    /// How many files' names do not end in `.jpg` or `.jpeg`.
    pub fn not_jpeg(&self) -> usize {
        self.files
            .iter()
            .filter(|p| {
                !p.extension()
                    .and_then(|e| e.to_str())
                    .is_some_and(|e| matches!(e.to_ascii_lowercase().as_str(), "jpg" | "jpeg"))
            })
            .count()
    }

    /// Reads every file's size and header: the largest file and decoded image, and the
    /// largest image of a file that may be decoded on the host. A file whose header does not
    /// read fails the call naming it, or (skipping bad images) is left out.
    pub fn largest(&self) -> Result<Largest> {
        let mut l = Largest::default();
        let mut good = 0;
        for path in &self.files {
            let read = (|| -> std::result::Result<_, String> {
                let e = |e: std::io::Error| e.to_string();
                let file = std::fs::File::open(path).map_err(e)?;
                let size = file.metadata().map_err(e)?.len() as usize;
                let mut f = std::io::BufReader::new(file);
                // A progressive JPEG may be one nvJPEG decodes wrongly, decoded here.
                let progressive = streamline::jpeg::is_progressive(&mut f);
                f.seek(std::io::SeekFrom::Start(0)).map_err(e)?;
                let r = image::ImageReader::new(f)
                    .with_guessed_format()
                    .map_err(e)?;
                let on_gpu = r.format() == Some(image::ImageFormat::Jpeg) && !progressive;
                let (w, h) = r.into_dimensions().map_err(|e| e.to_string())?;
                Ok((size, w as usize * h as usize * 3, on_gpu))
            })();
            match read {
                Ok((file, image, on_gpu)) => {
                    l.file = l.file.max(file);
                    l.image = l.image.max(image);
                    if !on_gpu {
                        l.on_host = l.on_host.max(image);
                    }
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
    /// decodes) read into `bytes` one after the other as `entries` place them, and their
    /// one-hot `targets`. A JPEG is read as it is; another image is decoded here to RGB. A
    /// JPEG that is not whole ([`jpeg_trouble`]), another file that does not decode, or a
    /// file left out before fails the batch naming it, or is passed over for the next one.
    pub fn fill_files(
        &self,
        index: usize,
        batch: usize,
        bytes: &mut [u8],
        entries: &mut Vec<Entry>,
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
        entries.clear();
        let mut at = 0;
        for j in 0..batch {
            let mut k = (index * batch + j) % self.len();
            let mut tries = 0;
            let (data, decoded) = loop {
                if tries == self.len() {
                    return Err(Error::arg(
                        "input",
                        format!("none of the {} images reads", self.len()),
                    ));
                }
                tries += 1;
                let path = &self.files[k];
                if !self.is_skipped(path) {
                    match read_for_batch(path) {
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
            entries.push(Entry {
                end,
                file: k,
                decoded,
            });
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
        assert_eq!(fail.not_jpeg(), 0);
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
        assert_eq!(l.on_host, 0);
        assert_eq!(skip.skipped(), [d.join("1.jpg")]);
        skip.fill_files(0, 3, &mut bytes, &mut ends, &mut t)
            .unwrap();
        // 0.jpg, 1.jpg -> 2.jpg, 2.jpg: three whole files.
        let f0 = std::fs::read(d.join("0.jpg")).unwrap();
        let f2 = std::fs::read(d.join("2.jpg")).unwrap();
        let (a, b) = (f0.len(), f2.len());
        let e = |end, file| Entry {
            end,
            file,
            decoded: None,
        };
        assert_eq!(ends, [e(a, 0), e(a + b, 2), e(a + 2 * b, 2)]);
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

    #[test]
    fn other_images_are_decoded_here_among_the_jpegs() {
        let d = std::env::temp_dir().join(format!("streamline-mixed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        image::RgbImage::from_pixel(4, 2, image::Rgb([10; 3]))
            .save(d.join("0.jpg"))
            .unwrap();
        let png = image::RgbImage::from_fn(5, 3, |x, y| image::Rgb([x as u8, y as u8, 7]));
        png.save(d.join("1.png")).unwrap();
        // A PNG under a JPEG's name is read as what it is.
        png.save_with_format(d.join("2.jpg"), image::ImageFormat::Png)
            .unwrap();
        std::fs::write(d.join("3.png"), b"not an image").unwrap();
        // A progressive JPEG with restart markers, which nvJPEG decodes wrongly.
        let mut prog = Vec::new();
        let mut e = jpeg_encoder::Encoder::new(&mut prog, 90);
        e.set_progressive(true);
        e.set_restart_interval(1);
        e.encode(&[9u8; 8 * 6 * 3], 8, 6, jpeg_encoder::ColorType::Rgb)
            .unwrap();
        std::fs::write(d.join("4.jpg"), &prog).unwrap();
        let f = ImageFolder::open(&d, 2).unwrap();
        assert_eq!(f.not_jpeg(), 2);
        let e = f.largest().unwrap_err().to_string();
        assert!(e.contains("3.png"), "{e}");
        let f = ImageFolder::open_with(&d, 2, OnBadImage::Skip).unwrap();
        let l = f.largest().unwrap();
        // The progressive JPEG, decoded on the host, is the largest image.
        assert_eq!((l.image, l.on_host), (8 * 6 * 3, 8 * 6 * 3));
        assert!(l.slot() >= l.file && l.slot() >= l.on_host);
        let (mut bytes, mut entries, mut t) = (vec![0u8; 4096], Vec::new(), vec![0f32; 5]);
        f.fill_files(0, 5, &mut bytes, &mut entries, &mut t)
            .unwrap();
        let f0 = std::fs::read(d.join("0.jpg")).unwrap();
        let a = f0.len();
        let (px, pp) = (png.as_raw().len(), 8 * 6 * 3);
        // 3.png was left out by `largest`: 4.jpg takes its place, decoded here.
        let e = |end, file, decoded| Entry { end, file, decoded };
        let want = [
            e(a, 0, None),
            e(a + px, 1, Some((3, 5))),
            e(a + 2 * px, 2, Some((3, 5))),
            e(a + 2 * px + pp, 4, Some((6, 8))),
            e(a + 2 * px + 2 * pp, 4, Some((6, 8))),
        ];
        assert_eq!(entries, want);
        assert_eq!(&bytes[a..a + px], &png.as_raw()[..]);
        assert_eq!(f.skipped(), [d.join("3.png")]);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
