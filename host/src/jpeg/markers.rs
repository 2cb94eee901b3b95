//! What a JPEG file's markers say before it is handed to nvJPEG: whether its frame is
//! progressive, and whether it is a kind nvJPEG decodes to wrong pixels.

use std::io::{Cursor, Read, Seek};

/// Why nvJPEG must not decode `file`, if it must not: a progressive JPEG with restart markers.
/// nvJPEG (CUDA 13, both its decoders) decodes those to pixels tens of levels away from
/// libjpeg's and zune-jpeg's, which agree with each other; sequential files with restart
/// markers, and progressive files without, decode within the standard's tolerance (the suite's
/// `jpeg::encodings` tests). Only a progressive file is read past its first scan.
pub fn nvjpeg_trouble(file: &[u8]) -> Option<&'static str> {
    let mut m = Markers::new(Cursor::new(file));
    let (mut progressive, mut restarts) = (false, false);
    // A stream that ends early has said all it can.
    while let Ok(Some((marker, len))) = m.next() {
        match marker {
            c if progressive_frame(c) => progressive = true,
            DRI if len >= 2 => match m.bytes::<2>() {
                Ok(interval) => restarts |= interval != [0, 0],
                Err(_) => break,
            },
            SOS if !progressive => return None,
            _ => {}
        }
        if progressive && restarts {
            return Some("a progressive JPEG with restart markers, which nvJPEG decodes wrongly");
        }
    }
    None
}

/// Whether the frame of the JPEG that `reader` holds is progressive. Only the heads of the
/// marker segments before the frame header are read (an EXIF block of any size is skipped, not
/// read); a stream that is not a JPEG, or ends before its frame header, is not.
pub fn is_progressive(reader: impl Read + Seek) -> bool {
    let mut m = Markers::new(reader);
    while let Ok(Some((marker, _))) = m.next() {
        match marker {
            c if progressive_frame(c) => return true,
            // Any other start of frame (0xC4, 0xC8 and 0xCC are other segments), or a scan.
            0xC0..=0xCF if !matches!(marker, 0xC4 | 0xC8 | 0xCC) => return false,
            SOS => return false,
            _ => {}
        }
    }
    false
}

/// The `(height, width)` a JPEG's one frame header gives before its first scan: what a decoder
/// writes for it (its first component at full size). `None` where `file` has no frame header
/// there, or more than one, or one cut short.
pub fn frame_size(file: &[u8]) -> Option<(usize, usize)> {
    let mut m = Markers::new(Cursor::new(file));
    let mut size = None;
    while let Ok(Some((marker, len))) = m.next() {
        match marker {
            0xC0..=0xCF if !matches!(marker, 0xC4 | 0xC8 | 0xCC) => {
                if len < 5 || size.is_some() {
                    return None;
                }
                let [_, y0, y1, x0, x1] = m.bytes::<5>().ok()?;
                let (h, w) = (u16::from_be_bytes([y0, y1]), u16::from_be_bytes([x0, x1]));
                size = Some((h as usize, w as usize));
            }
            SOS => return size,
            _ => {}
        }
    }
    None
}

/// Whether start-of-frame marker `code` begins a progressive frame (Huffman or arithmetic,
/// plain or differential).
fn progressive_frame(code: u8) -> bool {
    matches!(code, 0xC2 | 0xC6 | 0xCA | 0xCE)
}

/// Define restart interval.
const DRI: u8 = 0xDD;
/// Start of scan: entropy-coded data follows its header.
const SOS: u8 = 0xDA;
/// End of image.
const EOI: u8 = 0xD9;

/// The marker segments of a JPEG stream in order. [`Markers::next`] gives each marker and its
/// payload's length with the reader at the payload's start; the next call goes on from the
/// payload's end, seeking past what was not read, and past a scan's entropy-coded data. It
/// ends at the end-of-image marker; a stream that is not a JPEG has no segments.
struct Markers<R> {
    r: R,
    /// Bytes read so far, and where the next marker is looked for.
    at: u64,
    resume: u64,
    in_scan: bool,
}

impl<R: Read + Seek> Markers<R> {
    fn new(r: R) -> Markers<R> {
        Markers {
            r,
            at: 0,
            resume: 0,
            in_scan: false,
        }
    }

    /// The next `N` bytes.
    fn bytes<const N: usize>(&mut self) -> std::io::Result<[u8; N]> {
        let mut b = [0u8; N];
        self.r.read_exact(&mut b)?;
        self.at += N as u64;
        Ok(b)
    }

    fn byte(&mut self) -> std::io::Result<u8> {
        self.bytes::<1>().map(|[b]| b)
    }

    /// The next marker and its payload's length; `None` at the end of the image or where the
    /// stream stops being a JPEG.
    fn next(&mut self) -> std::io::Result<Option<(u8, usize)>> {
        if self.at == 0 {
            if self.bytes::<2>()? != [0xFF, 0xD8] {
                return Ok(None);
            }
        } else if self.resume != self.at {
            self.r.seek_relative(self.resume as i64 - self.at as i64)?;
            self.at = self.resume;
        }
        let code = if self.in_scan {
            // Entropy-coded data runs to a marker that is not a stuffed zero or a restart
            // (fill bytes may come before it).
            let mut prev = 0;
            loop {
                let b = self.byte()?;
                if prev == 0xFF && b != 0 && b != 0xFF && !(0xD0..=0xD7).contains(&b) {
                    break b;
                }
                prev = b;
            }
        } else {
            if self.byte()? != 0xFF {
                return Ok(None);
            }
            let mut b = self.byte()?;
            while b == 0xFF {
                b = self.byte()?;
            }
            b
        };
        self.in_scan = false;
        if code == EOI {
            return Ok(None);
        }
        // Markers without a length: restarts and TEM.
        if (0xD0..=0xD7).contains(&code) || code == 0x01 {
            self.resume = self.at;
            return Ok(Some((code, 0)));
        }
        let len = (u16::from_be_bytes(self.bytes::<2>()?) as usize).saturating_sub(2);
        self.resume = self.at + len as u64;
        self.in_scan = code == SOS;
        Ok(Some((code, len)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Progressive start of frame (Huffman).
    const SOF2: u8 = 0xC2;

    /// A file of the given segments (marker and payload), a scan of `scan` data bytes after
    /// each start of scan.
    fn file(segments: &[(u8, &[u8])], scan: &[u8]) -> Vec<u8> {
        let mut f = vec![0xFF, 0xD8];
        for &(m, p) in segments {
            f.extend([0xFF, m]);
            f.extend(((p.len() + 2) as u16).to_be_bytes());
            f.extend(p);
            if m == SOS {
                f.extend(scan);
            }
        }
        f.extend([0xFF, EOI]);
        f
    }

    #[test]
    fn the_frame_header_gives_the_size() {
        // Precision 8, height 0x0123, width 0x0456, one component.
        let sof = [8, 0x01, 0x23, 0x04, 0x56, 1, 1, 0x11, 0];
        let scan = [0x12, 0x34];
        let exif = vec![0u8; 300];
        let f = file(&[(0xE1, &exif), (0xC0, &sof), (SOS, &[1])], &scan);
        assert_eq!(frame_size(&f), Some((0x123, 0x456)));
        let p = file(&[(SOF2, &sof), (SOS, &[1])], &scan);
        assert_eq!(frame_size(&p), Some((0x123, 0x456)));
        // No frame before the scan, a frame header cut short, not a JPEG.
        assert_eq!(frame_size(&file(&[(SOS, &[1])], &scan)), None);
        assert_eq!(frame_size(&file(&[(0xC0, &sof[..3])], &scan)), None);
        let twice = file(&[(0xC0, &sof), (0xC1, &sof), (SOS, &[1])], &scan);
        assert_eq!(frame_size(&twice), None);
        assert_eq!(frame_size(b"not a jpeg"), None);
        assert_eq!(frame_size(&[]), None);
    }

    #[test]
    fn progressive_files_with_restart_markers_are_named() {
        // Stuffed zeros and restart markers inside the scans are data, not segments.
        let scan = [1, 0xFF, 0x00, 2, 0xFF, 0xD0, 3];
        let sof = [8, 0, 1, 0, 1, 1, 1, 0x11, 0];
        let seq = file(
            &[(0xC0, &sof), (DRI, &[0, 4]), (SOS, &[1]), (SOS, &[1])],
            &scan,
        );
        assert_eq!(nvjpeg_trouble(&seq), None);
        assert!(!is_progressive(Cursor::new(&seq)));
        let prog = file(&[(SOF2, &sof), (SOS, &[1]), (SOS, &[1])], &scan);
        assert_eq!(nvjpeg_trouble(&prog), None);
        assert!(is_progressive(Cursor::new(&prog)));
        // A large block before the frame header is skipped; a stream cut short is not
        // progressive.
        let exif = vec![7u8; 60_000];
        let big = file(&[(0xE1, &exif), (SOF2, &sof), (SOS, &[1])], &scan);
        assert!(is_progressive(Cursor::new(&big)));
        assert!(!is_progressive(Cursor::new(&big[..1000])));
        assert!(!is_progressive(Cursor::new(b"\x89PNG")));
        // A restart interval defined between scans, and one set back to 0.
        let late = file(
            &[(SOF2, &sof), (SOS, &[1]), (DRI, &[0, 2]), (SOS, &[1])],
            &scan,
        );
        assert!(nvjpeg_trouble(&late).is_some());
        let zero = file(&[(DRI, &[0, 0]), (SOF2, &sof), (SOS, &[1])], &scan);
        assert_eq!(nvjpeg_trouble(&zero), None);
        // Not a JPEG, or cut short: nothing to say (nvJPEG's own checks name it).
        assert_eq!(nvjpeg_trouble(b"\x89PNG"), None);
        assert_eq!(nvjpeg_trouble(&late[..9]), None);
        assert_eq!(nvjpeg_trouble(&[]), None);
    }
}
