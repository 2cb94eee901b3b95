//! What a JPEG file's markers say before it is handed to nvJPEG: whether its frame is
//! progressive, and whether it is a kind nvJPEG decodes to wrong pixels.

use std::io::{Read, Seek, SeekFrom};

/// Why nvJPEG must not decode `file`, if it must not: a progressive JPEG with restart markers.
/// nvJPEG (CUDA 13, both its decoders) decodes those to pixels tens of levels away from
/// libjpeg's and zune-jpeg's, which agree with each other; sequential files with restart
/// markers, and progressive files without, decode within the standard's tolerance (the suite's
/// `jpeg::encodings` tests). Only a progressive file is read past its first scan.
pub fn nvjpeg_trouble(file: &[u8]) -> Option<&'static str> {
    let mut progressive = false;
    let mut restarts = false;
    for (marker, payload) in Segments::new(file) {
        match marker {
            m if progressive_frame(m) => progressive = true,
            DRI => restarts |= payload.len() >= 2 && (payload[0] | payload[1]) != 0,
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
pub fn is_progressive(mut reader: impl Read + Seek) -> bool {
    frame_is_progressive(&mut reader).unwrap_or(false)
}

fn frame_is_progressive<R: Read + Seek>(r: &mut R) -> std::io::Result<bool> {
    let mut two = [0u8; 2];
    r.read_exact(&mut two)?;
    if two != [0xFF, 0xD8] {
        return Ok(false);
    }
    loop {
        let mut code = [0u8; 1];
        r.read_exact(&mut code)?;
        if code[0] != 0xFF {
            return Ok(false);
        }
        while code[0] == 0xFF {
            r.read_exact(&mut code)?;
        }
        match code[0] {
            c if progressive_frame(c) => return Ok(true),
            0xC0..=0xCF if !matches!(code[0], 0xC4 | 0xC8 | 0xCC) => return Ok(false),
            SOS | EOI => return Ok(false),
            0xD0..=0xD7 | 0x01 => {}
            _ => {
                r.read_exact(&mut two)?;
                let len = u16::from_be_bytes(two) as i64;
                r.seek(SeekFrom::Current((len - 2).max(0)))?;
            }
        }
    }
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

/// The marker segments of a JPEG file in order, `(marker, payload)`, skipping each scan's
/// entropy-coded data; ends at the end-of-image marker, or where the file stops parsing.
struct Segments<'a> {
    file: &'a [u8],
    at: usize,
}

impl<'a> Segments<'a> {
    fn new(file: &'a [u8]) -> Segments<'a> {
        let at = if file.starts_with(&[0xFF, 0xD8]) {
            2
        } else {
            file.len()
        };
        Segments { file, at }
    }
}

impl<'a> Iterator for Segments<'a> {
    type Item = (u8, &'a [u8]);

    fn next(&mut self) -> Option<(u8, &'a [u8])> {
        let f = self.file;
        // A marker: 0xFF (any number of fill bytes), then its code.
        if f.get(self.at) != Some(&0xFF) {
            return None;
        }
        while f.get(self.at) == Some(&0xFF) {
            self.at += 1;
        }
        let marker = *f.get(self.at)?;
        self.at += 1;
        if marker == EOI {
            self.at = f.len();
            return None;
        }
        // Markers without a length: restarts and TEM.
        if (0xD0..=0xD7).contains(&marker) || marker == 0x01 {
            return Some((marker, &[]));
        }
        let len = u16::from_be_bytes([*f.get(self.at)?, *f.get(self.at + 1)?]) as usize;
        let payload = f.get(self.at + 2..self.at + len.max(2))?;
        self.at += len.max(2);
        if marker == SOS {
            // Entropy-coded data runs to the next marker that is not a stuffed zero or a
            // restart.
            while self.at + 1 < f.len() {
                if f[self.at] == 0xFF
                    && f[self.at + 1] != 0
                    && !(0xD0..=0xD7).contains(&f[self.at + 1])
                {
                    break;
                }
                self.at += 1;
            }
            if self.at + 1 >= f.len() {
                self.at = f.len();
            }
        }
        Some((marker, payload))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

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
