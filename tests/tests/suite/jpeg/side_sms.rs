//! The decoder on SMs of its own ([`Gpu::with_side_sms`]): its decode no longer waits for
//! another stream's blocks that hold every SM the engine has, it writes the same bytes as the
//! decoder sharing every SM, and the engine's own kernels still run correctly on the rest.

use super::{decoder, photo, timed_decode};
use streamline::jpeg::{Backend, JpegDecoder};
use streamline::{Error, Gpu};
use streamline_tests::gpu;

/// SMs the tests keep for the decoder.
const SIDE: u32 = 8;

/// A device opened with SMs kept for the decoder, and a decoder on it; `None` after one line
/// without a GPU or nvJPEG.
fn split_decoder() -> Option<(Gpu, JpegDecoder)> {
    decoder(Backend::Hardware)?;
    let g = Gpu::with_side_sms(0, None, SIDE).unwrap();
    let d = JpegDecoder::new(&g, Backend::Hardware).unwrap();
    Some((g, d))
}

#[test]
fn the_split_counts_the_engines_sms_and_refuses_bad_sizes() {
    let Some(whole) = gpu() else {
        return;
    };
    let g = Gpu::with_side_sms(0, None, SIDE).unwrap();
    let s = g.split().expect("opened with a split");
    let total = whole.info().multiprocessors;
    assert!(
        s.side_sms >= SIDE,
        "{} SMs kept, {SIDE} asked for",
        s.side_sms
    );
    assert!(s.engine_sms + s.side_sms <= total && s.engine_sms >= total / 2);
    assert_eq!(g.info().multiprocessors, s.engine_sms);
    assert!(whole.split().is_none());
    for bad in [0, total / 2, total, u32::MAX] {
        match Gpu::with_side_sms(0, None, bad) {
            Err(Error::InvalidArgument { arg, reason }) => {
                assert_eq!(arg, "side_sms");
                assert!(reason.contains("1..="), "{reason}");
            }
            Err(e) => panic!("{bad} SMs: {e}"),
            Ok(_) => panic!("{bad} SMs were accepted of {total}"),
        }
    }
}

#[test]
fn a_decode_on_its_own_sms_does_not_wait_for_the_engines_blocks() {
    let Some((g, mut dec)) = split_decoder() else {
        return;
    };
    let engine_sms = g.split().unwrap().engine_sms as usize;
    let files: Vec<Vec<u8>> = (0..32)
        .map(|i| photo(320, 240, i % 5 == 0, 31 + i as u64))
        .collect();
    let refs: Vec<&[u8]> = files.iter().map(|f| f.as_slice()).collect();
    let (a, b) = (g.new_stream().unwrap(), g.new_stream().unwrap());
    let decode = |dec: &mut JpegDecoder| timed_decode(dec, &a, &refs);
    // Each of the decoder's two states allocates on its first use.
    decode(&mut dec);
    decode(&mut dec);
    let (alone, _) = decode(&mut dec);
    let n = 8 * engine_sms * streamline_abi::spin::SPIN_COPY_BLOCK as usize;
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let x = b.clone_htod(&x).unwrap();
    let mut y = b.alloc_zeros::<f32>(n).unwrap();
    b.synchronize().unwrap();
    // Eight blocks of 256 threads fill each of the engine's SMs for 50 ms.
    streamline::ops::spin::spin_copy(&g, &b, &x, &mut y, 50_000_000).unwrap();
    let (beside, ours) = decode(&mut dec);
    let copied = b.clone_dtoh(&y).unwrap();
    // Beside kernels that stream memory on the engine's SMs (copies of 1 GiB, about 50 ms in
    // all): printed, not asserted, since the hardware decoders share the memory system.
    let big = 256 << 20;
    let (bx, mut by) = (
        b.alloc_zeros::<f32>(big).unwrap(),
        b.alloc_zeros::<f32>(big).unwrap(),
    );
    b.synchronize().unwrap();
    let t = std::time::Instant::now();
    for _ in 0..100 {
        streamline::ops::spin::spin_copy(&g, &b, &bx, &mut by, 0).unwrap();
    }
    let (beside_copies, _) = decode(&mut dec);
    b.synchronize().unwrap();
    let copies = t.elapsed().as_secs_f64() * 1e3;
    drop((bx, by));
    eprintln!(
        "decode of 32 images beside {copies:.1} ms of copies streaming memory on the engine's SMs: {beside_copies:.2} ms"
    );
    eprintln!("decode of 32 images on {} SMs of its own: {alone:.2} ms alone, {beside:.2} ms with every other SM held for 50 ms", g.split().unwrap().side_sms);
    assert!(
        beside < alone + 25.0,
        "the decode took {beside:.1} ms beside a 50 ms kernel on the engine's SMs ({alone:.1} ms alone): it waited for them"
    );
    assert!(
        copied.iter().enumerate().all(|(i, &v)| v == i as f32),
        "the engine's kernel did not copy its input"
    );
    // The same bytes as the decoder sharing every SM.
    let whole = gpu().unwrap();
    let mut shared = decoder(Backend::Hardware).unwrap();
    let theirs = shared.decode(whole.stream(), &refs).unwrap();
    assert_eq!(ours.layout.sizes, theirs.layout.sizes);
    let ours = a.clone_dtoh(&ours.data).unwrap();
    let theirs = whole.stream().clone_dtoh(&theirs.data).unwrap();
    assert!(
        ours == theirs,
        "the decoders on kept SMs and on every SM disagree"
    );
}
