//! Headers read on other threads ([`JpegDecoder::header_reader`]): the same as the decoder's
//! own, and a decode given them writes the same bytes as one that reads them itself.

use super::{decoder, photo};
use streamline::jpeg::{Backend, FileHeader};
use streamline::Error;
use streamline_tests::gpu;

#[test]
fn headers_read_on_other_threads_decode_the_same_batch() {
    let Some(mut dec) = decoder(Backend::Hardware) else {
        return;
    };
    let g = gpu().unwrap();
    let files: Vec<Vec<u8>> = (0..12)
        .map(|i| photo(17 + 29 * i, 9 + 13 * i, i % 4 == 1, 70 + i as u64))
        .collect();
    let refs: Vec<&[u8]> = files.iter().map(|f| f.as_slice()).collect();
    let own = dec.headers(&refs).unwrap();
    // Two readers on two threads, each reading every file.
    let readers = [dec.header_reader().unwrap(), dec.header_reader().unwrap()];
    let theirs: Vec<Vec<FileHeader>> = std::thread::scope(|s| {
        let handles: Vec<_> = readers
            .into_iter()
            .map(|mut r| {
                let refs = &refs;
                s.spawn(move || refs.iter().map(|f| r.read(f).unwrap()).collect())
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for t in &theirs {
        assert_eq!(t, &own);
    }
    assert!(own.iter().all(|h| h.height() > 0 && h.width() > 0));
    let s = g.stream();
    let decoded = dec.decode(s, &refs).unwrap();
    let total = decoded.data.len();
    let mut into = s.alloc_zeros::<u8>(total).unwrap();
    let layout = dec
        .decode_into_with(s, &refs, &theirs[0], &mut into)
        .unwrap();
    assert_eq!(layout.sizes, decoded.layout.sizes);
    assert_eq!(
        s.clone_dtoh(&into).unwrap(),
        s.clone_dtoh(&decoded.data).unwrap(),
        "a decode given the headers wrote other bytes"
    );
    // Headers that do not match the files are refused before anything is queued: too few,
    // or another file's size (which would place an image over its neighbours).
    let mut swapped = theirs[0].clone();
    swapped.swap(0, 1);
    for wrong in [&theirs[0][1..], &swapped[..]] {
        match dec.decode_into_with(s, &refs, wrong, &mut into) {
            Err(Error::InvalidArgument { arg, reason }) => {
                assert_eq!(arg, "headers", "{reason}")
            }
            other => panic!("{:?}", other.map(|l| l.sizes)),
        }
    }
}

#[test]
fn a_reader_names_why_a_file_does_not_read() {
    let Some(dec) = decoder(Backend::Hardware) else {
        return;
    };
    let mut r = dec.header_reader().unwrap();
    let good = photo(40, 30, false, 3);
    for bad in [&b"not a jpeg"[..], &[][..], &good[..20]] {
        assert!(r.read(bad).is_err());
    }
    let h = r.read(&good).unwrap();
    assert_eq!((h.height(), h.width()), (30, 40));
    drop(dec);
    // The reader keeps what it needs alive after its decoder goes.
    assert_eq!(r.read(&good).unwrap(), h);
}
