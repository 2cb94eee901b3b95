//! JPEG files decoded on the GPU (nvJPEG) against the CPU's decoder (the `image` crate):
//! batches of photo-like colour and gray images of awkward sizes (from one pixel, odd sides),
//! through each back end; every byte of the ragged batch written (decoded twice over two
//! poisons) and the bytes past it untouched; a file that is not a JPEG refused, naming its
//! index. Skipped, with one line, without a GPU or nvJPEG.
//!
//! Error analysis: both decoders implement baseline JPEG, whose inverse DCT a conforming
//! decoder computes to within one level of the exact transform per sample, and whose colour
//! conversion each rounds once. The `image` crate encodes without chroma subsampling (4:4:4),
//! so upsampling, which JPEG leaves to each decoder, plays no part here (`streamline decode
//! --check` compares subsampled files in luma, which upsampling leaves alone). The mean
//! absolute difference over a batch is therefore bounded by 2 levels; a misplaced row, channel
//! or image gives tens.
//!
//! `encodings` decodes files of every chroma subsampling, quality, progressive or sequential
//! coding and restart interval, against the JPEG standard's tolerances.

mod encodings;
mod headers;
mod side_sms;

use image::codecs::jpeg::JpegEncoder;
use image::ExtendedColorType;
use proptest::prelude::*;
use streamline::jpeg::{Backend, JpegDecoder};
use streamline::Error;
use streamline_tests::{gpu, gpu_property};

/// A decoder on the test GPU, or `None` after one line where there is no GPU or no nvJPEG.
pub(super) fn decoder(backend: Backend) -> Option<JpegDecoder> {
    let g = gpu()?;
    match JpegDecoder::new(g, backend) {
        Ok(d) => Some(d),
        Err(e @ Error::MissingLibrary { .. }) => {
            eprintln!("skipping nvJPEG test: {e}");
            None
        }
        Err(e) => panic!("{e}"),
    }
}

/// `files` decoded on `stream` and the stream waited for: milliseconds on the host's clock, and
/// the batch.
pub(super) fn timed_decode(
    dec: &mut JpegDecoder,
    stream: &std::sync::Arc<cudarc::driver::CudaStream>,
    files: &[&[u8]],
) -> (f64, streamline::jpeg::Decoded) {
    let t = std::time::Instant::now();
    let d = dec.decode(stream, files).unwrap();
    stream.synchronize().unwrap();
    (t.elapsed().as_secs_f64() * 1e3, d)
}

/// A photo-like `w x h` image (a gradient, a soft disc, a little noise) as JPEG at quality 90.
pub(super) fn photo(w: usize, h: usize, gray: bool, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    let mut noise = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % 9) as f32 - 4.0
    };
    let channels = if gray { 1 } else { 3 };
    let mut px = Vec::with_capacity(w * h * channels);
    let (cx, cy, r) = (w as f32 * 0.6, h as f32 * 0.4, (w.min(h) as f32) * 0.3);
    for y in 0..h {
        for x in 0..w {
            let (fx, fy) = (x as f32 / w as f32, y as f32 / h as f32);
            let inside = ((x as f32 - cx).powi(2) + (y as f32 - cy).powi(2)).sqrt() < r;
            let base = [
                40.0 + 150.0 * fy + if inside { 50.0 } else { 0.0 },
                90.0 + 100.0 * fx,
                200.0 - 120.0 * fy + if inside { -60.0 } else { 0.0 },
            ];
            for v in &base[..channels] {
                px.push((v + noise()).clamp(0.0, 255.0) as u8);
            }
        }
    }
    let mut out = Vec::new();
    let color = if gray {
        ExtendedColorType::L8
    } else {
        ExtendedColorType::Rgb8
    };
    JpegEncoder::new_with_quality(&mut out, 90)
        .encode(&px, w as u32, h as u32, color)
        .unwrap();
    out
}

/// The back ends tried, with the share of what the hardware can take that it decodes (a share
/// below 1 splits a batch between the two decoders).
const BACKENDS: [(Backend, f64); 3] = [
    (Backend::Hardware, 1.0),
    (Backend::Cuda, 1.0),
    (Backend::Hardware, 0.5),
];

/// Bytes after the batch that the decode must leave alone.
const GUARD: usize = 61;

#[test]
fn batches_match_the_cpu_decoder_every_byte_written() {
    gpu_property(
        12,
        (
            prop::collection::vec((1usize..=300, 1usize..=300, any::<bool>()), 1..=6),
            any::<u64>(),
            0usize..3,
        ),
        |(dims, seed, b)| {
            let (backend, share) = BACKENDS[b];
            let Some(mut dec) = decoder(backend) else {
                return Ok(());
            };
            dec.set_hardware_share(share).unwrap();
            let files: Vec<Vec<u8>> = dims
                .iter()
                .enumerate()
                .map(|(i, &(w, h, gray))| photo(w, h, gray, seed.wrapping_add(i as u64)))
                .collect();
            let refs: Vec<&[u8]> = files.iter().map(|f| f.as_slice()).collect();
            let s = gpu().unwrap().stream();
            let (layout, total) = dec.layout(&refs).unwrap();
            let mut runs = Vec::new();
            for poison in [0x00u8, 0xff] {
                let mut data = s.clone_htod(&vec![poison; total + GUARD]).unwrap();
                let got = dec.decode_into(s, &refs, &mut data).unwrap();
                prop_assert_eq!(&got.sizes, &layout.sizes);
                let host = s.clone_dtoh(&data).unwrap();
                prop_assert!(
                    host[total..].iter().all(|&v| v == poison),
                    "bytes past the batch were written"
                );
                runs.push(host);
            }
            prop_assert!(
                runs[0][..total] == runs[1][..total],
                "some byte of the batch was not written (it kept the poison)"
            );
            let (mut sum, mut count) = (0u64, 0u64);
            for (i, f) in files.iter().enumerate() {
                let cpu = image::load_from_memory(f).unwrap().to_rgb8();
                let (h, w) = layout.sizes[i];
                prop_assert_eq!((h, w), (dims[i].1, dims[i].0));
                prop_assert_eq!((cpu.height() as usize, cpu.width() as usize), (h, w));
                let at = layout.offsets[i];
                for (a, c) in runs[0][at..at + h * w * 3].iter().zip(cpu.as_raw()) {
                    sum += a.abs_diff(*c) as u64;
                }
                count += (h * w * 3) as u64;
            }
            let mean = sum as f64 / count as f64;
            prop_assert!(mean <= 2.0, "mean |GPU - CPU| {mean:.3} levels");
            Ok(())
        },
    );
}

/// The decode is ordered after the work queued before it on its stream, on every back end: a
/// slow kernel, then a clear of the destination, then the decode; the destination must hold
/// the images, not zeros. (nvJPEG's hardware decoders write when their call is made, whatever
/// the stream still holds; the decoder waits for the stream first. Under tools that serialize
/// the device, such as compute-sanitizer, the hazard cannot show and the test passes either
/// way.)
#[test]
fn a_decode_waits_for_the_work_queued_before_it() {
    for (backend, share) in BACKENDS {
        let Some(mut dec) = decoder(backend) else {
            return;
        };
        dec.set_hardware_share(share).unwrap();
        let g = gpu().unwrap();
        let files: Vec<Vec<u8>> = (0..8)
            .map(|i| photo(96 + 8 * i, 64 + 4 * i, false, 7 + i as u64))
            .collect();
        let refs: Vec<&[u8]> = files.iter().map(|f| f.as_slice()).collect();
        let s = g.stream();
        let (_, total) = dec.layout(&refs).unwrap();
        // Twice: each of the decoder's two states allocates on its first use, which waits
        // for the whole device and would hide the hazard.
        let mut want = s.alloc_zeros::<u8>(total).unwrap();
        dec.decode_into(s, &refs, &mut want).unwrap();
        dec.decode_into(s, &refs, &mut want).unwrap();
        let want = s.clone_dtoh(&want).unwrap();
        let mut data = s.clone_htod(&vec![0x55u8; total]).unwrap();
        let (x, mut y) = (
            s.alloc_zeros::<f32>(1).unwrap(),
            s.alloc_zeros::<f32>(1).unwrap(),
        );
        s.synchronize().unwrap();
        streamline::ops::spin::spin_copy(g, s, &x, &mut y, 50_000_000).unwrap();
        s.memset_zeros(&mut data).unwrap();
        dec.decode_into(s, &refs, &mut data).unwrap();
        let got = s.clone_dtoh(&data).unwrap();
        let differ = got.iter().zip(&want).filter(|(a, b)| a != b).count();
        assert_eq!(
            differ, 0,
            "{backend:?} (share {share}): {differ} of {total} bytes differ from the same decode \
             without the earlier work; the decode did not wait for it"
        );
    }
}

/// Decoding overlaps work on other streams: once the decoder's states have their memory, a
/// kernel of one block waiting 200 ms on another stream does not hold a decode back. Also
/// prints how long the same decode takes while every SM is held by another stream's blocks for
/// 50 ms: the decoders' kernels wait for SMs like any other.
#[test]
fn a_decode_overlaps_other_streams() {
    let Some(mut dec) = decoder(Backend::Hardware) else {
        return;
    };
    let g = gpu().unwrap();
    let files: Vec<Vec<u8>> = (0..32)
        .map(|i| photo(320, 240, false, 11 + i as u64))
        .collect();
    let refs: Vec<&[u8]> = files.iter().map(|f| f.as_slice()).collect();
    let (a, b) = (g.new_stream().unwrap(), g.new_stream().unwrap());
    let decode = |dec: &mut JpegDecoder| timed_decode(dec, &a, &refs).0;
    // Each of the decoder's two states allocates on its first use, which waits for the device.
    decode(&mut dec);
    decode(&mut dec);
    let alone = decode(&mut dec);
    let spin = |blocks: usize, ns: u64| {
        let n = blocks * streamline_abi::spin::SPIN_COPY_BLOCK as usize;
        let (x, mut y) = (
            b.alloc_zeros::<f32>(n).unwrap(),
            b.alloc_zeros::<f32>(n).unwrap(),
        );
        b.synchronize().unwrap();
        streamline::ops::spin::spin_copy(g, &b, &x, &mut y, ns).unwrap();
        (x, y)
    };
    let held = spin(1, 200_000_000);
    let beside_one = decode(&mut dec);
    b.synchronize().unwrap();
    drop(held);
    // Eight blocks of 256 threads fill an SM's 2048 threads.
    let held = spin(8 * g.info().multiprocessors as usize, 50_000_000);
    let beside_all = decode(&mut dec);
    b.synchronize().unwrap();
    drop(held);
    eprintln!(
        "decode of 32 images: {alone:.2} ms alone, {beside_one:.2} ms beside one busy block, \
         {beside_all:.2} ms with every SM held for 50 ms"
    );
    assert!(
        beside_one < 100.0,
        "the decode took {beside_one:.1} ms beside a 200 ms kernel of one block on another \
         stream ({alone:.1} ms alone): it waited for the whole device"
    );
}

#[test]
fn a_file_that_is_not_a_jpeg_is_named() {
    let Some(mut dec) = decoder(Backend::Hardware) else {
        return;
    };
    let good = photo(40, 30, false, 7);
    let s = gpu().unwrap().stream();
    for bad in [&b"not a jpeg at all"[..], &[][..], &good[..20]] {
        let e = dec.decode(s, &[&good, bad]).err().expect("refused");
        assert!(e.to_string().contains("file 1"), "{e}");
    }
    // The decoder still works after a refused batch.
    let d = dec.decode(s, &[&good]).unwrap();
    assert_eq!(d.layout.sizes, [(30, 40)]);
}
