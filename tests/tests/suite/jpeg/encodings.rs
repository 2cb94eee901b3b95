//! Generated JPEGs of random sizes, chroma subsamplings (4:4:4, 4:4:0, 4:2:2, 4:2:0, 4:1:1,
//! 4:1:0, gray), qualities, sequential or progressive coding, restart intervals and Huffman
//! tables, decoded on the GPU (each back end) against the CPU's decoder.
//!
//! Error analysis. JPEG fixes each component's samples to within one level of the exact
//! inverse DCT (a conforming decoder's IDCT error is at most 1 per sample), so the two decoders'
//! samples differ by at most 2. It leaves chroma upsampling to the decoder, and RGB is computed
//! from the samples once, each channel rounded (0.5) and clamped. Hence:
//! - Luma recomputed from RGB (`0.299 R + 0.587 G + 0.114 B`) is the luma sample plus at most
//!   0.5 of rounding (the chroma terms cancel exactly), so the decoders agree within
//!   2 + 2 x 0.5 = 3 levels at every pixel where neither clamped a channel, whatever the
//!   subsampling; gray files within 2 (no conversion).
//! - Chroma is made constant over 32 x 32 blocks (a whole number of any subsampling's MCUs),
//!   so the encoder's downsampled chroma is exact and every upsampling filter (each reads
//!   samples within one sample, at most 4 pixels, of its pixel) returns the block's value more
//!   than 8 pixels inside a block. There, Cb and Cr recomputed from RGB (rounding at most
//!   0.5 x (0.169 + 0.331 + 0.5) = 0.5 per decoder) agree within 2 + 1 = 3 levels.
//!
//! A swapped or misplaced channel, plane or image fails both by tens of levels.
//!
//! nvJPEG decodes progressive files with restart markers tens of levels away from libjpeg and
//! zune-jpeg (which agree with each other), so the decoder refuses them
//! ([`streamline::jpeg::nvjpeg_trouble`]); the tests check that it does.

use super::{decoder, BACKENDS};
use jpeg_encoder::{ColorType, Encoder, SamplingFactor};
use proptest::prelude::*;
use streamline_tests::{gpu, gpu_property};

/// The subsamplings tried (4:4:0 and 4:1:0 halve chroma vertically too).
const SAMPLINGS: [SamplingFactor; 6] = [
    SamplingFactor::R_4_4_4,
    SamplingFactor::R_4_4_0,
    SamplingFactor::R_4_2_2,
    SamplingFactor::R_4_2_0,
    SamplingFactor::R_4_1_1,
    SamplingFactor::R_4_1_0,
];

/// The lowest quality generated. Below about 50 the dequantized coefficients leave the range the
/// standard's accuracy test of the inverse DCT covers, and nvJPEG's was found more than one
/// level from the exact transform there (the results history has the file), so the bounds
/// would not follow from the analysis.
const MIN_QUALITY: u8 = 50;

/// Side of the blocks over which chroma is constant, and the margin inside them where it is
/// compared.
const BLOCK: usize = 32;
const MARGIN: usize = 8;

/// How one file is encoded.
#[derive(Clone, Copy, Debug)]
struct Coding {
    width: usize,
    height: usize,
    /// `None`: gray.
    sampling: Option<usize>,
    quality: u8,
    progressive: bool,
    restart: u16,
    optimized: bool,
    seed: u64,
}

fn coding() -> impl Strategy<Value = Coding> {
    (
        (1usize..=160, 1usize..=160),
        prop::option::weighted(0.85, 0usize..SAMPLINGS.len()),
        MIN_QUALITY..=100,
        prop::bool::weighted(0.3),
        prop_oneof![Just(0u16), 1u16..=6],
        any::<bool>(),
        any::<u64>(),
    )
        .prop_map(
            |((width, height), sampling, quality, progressive, restart, optimized, seed)| Coding {
                width,
                height,
                sampling,
                quality,
                progressive,
                // The CPU's decoder (zune-jpeg) misplaces 4:1:1 chroma after a restart marker,
                // where libjpeg does not; the encoder's optimized tables and restart markers do
                // not go together.
                restart: if sampling == Some(R_4_1_1) {
                    0
                } else {
                    restart
                },
                optimized: optimized && restart == 0,
                seed,
            },
        )
}

/// Where 4:1:1 is in [`SAMPLINGS`].
const R_4_1_1: usize = 4;

/// A small deterministic generator (xorshift).
struct Noise(u64);

impl Noise {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// The file for `c`: photo-like luma (gradients, a disc, noise) in 60..200, and chroma
/// constant over each 32 x 32 block, within 30 levels of neutral.
fn encode(c: &Coding) -> Vec<u8> {
    let mut noise = Noise(c.seed | 1);
    let (w, h) = (c.width, c.height);
    let blocks_x = w.div_ceil(BLOCK);
    let chroma: Vec<[u8; 2]> = (0..blocks_x * h.div_ceil(BLOCK))
        .map(|_| {
            [
                98 + (noise.next() % 61) as u8,
                98 + (noise.next() % 61) as u8,
            ]
        })
        .collect();
    let (cx, cy, r) = (w as f32 * 0.4, h as f32 * 0.6, w.min(h) as f32 * 0.3);
    let channels = if c.sampling.is_some() { 3 } else { 1 };
    let mut px = Vec::with_capacity(w * h * channels);
    for y in 0..h {
        for x in 0..w {
            let inside = ((x as f32 - cx).powi(2) + (y as f32 - cy).powi(2)).sqrt() < r;
            let luma = 70.0
                + 80.0 * (x as f32 / w as f32) * (1.0 - y as f32 / h as f32)
                + if inside { 35.0 } else { 0.0 }
                + (noise.next() % 11) as f32
                - 5.0;
            px.push(luma.clamp(60.0, 200.0) as u8);
            if channels == 3 {
                px.extend_from_slice(&chroma[(y / BLOCK) * blocks_x + x / BLOCK]);
            }
        }
    }
    let mut out = Vec::new();
    let mut e = Encoder::new(&mut out, c.quality);
    if let Some(s) = c.sampling {
        e.set_sampling_factor(SAMPLINGS[s]);
    }
    e.set_progressive(c.progressive);
    if c.restart > 0 {
        e.set_restart_interval(c.restart);
    }
    e.set_optimized_huffman_tables(c.optimized);
    let color = if channels == 3 {
        ColorType::Ycbcr
    } else {
        ColorType::Luma
    };
    e.encode(&px, w as u16, h as u16, color).unwrap();
    out
}

/// Luma, Cb and Cr of an RGB pixel (JFIF's conversion).
fn ycc(p: &[u8]) -> [f64; 3] {
    let (r, g, b) = (p[0] as f64, p[1] as f64, p[2] as f64);
    [
        0.299 * r + 0.587 * g + 0.114 * b,
        128.0 - 0.168736 * r - 0.331264 * g + 0.5 * b,
        128.0 + 0.5 * r - 0.418688 * g - 0.081312 * b,
    ]
}

/// The bounds of the module's analysis: gray, luma and chroma (levels).
const GRAY_BOUND: f64 = 2.0;
const LUMA_BOUND: f64 = 3.0;
const CHROMA_BOUND: f64 = 3.0;

/// The differences the analysis bounds at pixel `(x, y)` of a file coded as `c`, decoded to `g`
/// and `p`: luma (gray files: the gray level), unless a channel was clamped; chroma, where it
/// is compared. A gray file decoded to colour is an error.
fn pixel_diffs(
    c: &Coding,
    (x, y): (usize, usize),
    g: &[u8],
    p: &[u8],
) -> Result<(Option<f64>, Option<f64>), String> {
    if c.sampling.is_none() {
        if g[0] != g[1] || g[1] != g[2] {
            return Err(format!("gray file decoded to colour {g:?} at ({x}, {y})"));
        }
        return Ok((Some(g[0].abs_diff(p[0]) as f64), None));
    }
    if g.iter().chain(p).any(|&v| v == 0 || v == 255) {
        return Ok((None, None));
    }
    let (a, b) = (ycc(g), ycc(p));
    let inner = |v: usize| (MARGIN..BLOCK - MARGIN).contains(&(v % BLOCK));
    let chroma = (inner(x) && inner(y)).then(|| (a[1] - b[1]).abs().max((a[2] - b[2]).abs()));
    Ok((Some((a[0] - b[0]).abs()), chroma))
}

/// One decoded image against the CPU's: the largest luma (or gray) and chroma differences
/// where they are compared, and the first place one exceeds its bound.
fn compare_all(c: &Coding, gpu_rgb: &[u8], cpu_rgb: &[u8]) -> (f64, f64, Option<String>) {
    let (mut luma, mut chroma, mut first) = (0.0f64, 0.0f64, None);
    let luma_bound = if c.sampling.is_none() {
        GRAY_BOUND
    } else {
        LUMA_BOUND
    };
    for y in 0..c.height {
        for x in 0..c.width {
            let at = 3 * (y * c.width + x);
            match pixel_diffs(c, (x, y), &gpu_rgb[at..at + 3], &cpu_rgb[at..at + 3]) {
                Err(e) => {
                    first.get_or_insert(e);
                }
                Ok((l, ch)) => {
                    if let Some(l) = l {
                        if l > luma_bound {
                            first.get_or_insert(format!("luma differs by {l:.2} at ({x}, {y})"));
                        }
                        luma = luma.max(l);
                    }
                    if let Some(ch) = ch {
                        if ch > CHROMA_BOUND {
                            first.get_or_insert(format!("chroma differs by {ch:.2} at ({x}, {y})"));
                        }
                        chroma = chroma.max(ch);
                    }
                }
            }
        }
    }
    (luma, chroma, first)
}

/// [`compare_all`] as a result: the largest differences, or the first failure.
fn compare(c: &Coding, gpu_rgb: &[u8], cpu_rgb: &[u8]) -> Result<(f64, f64), String> {
    match compare_all(c, gpu_rgb, cpu_rgb) {
        (l, ch, None) => Ok((l, ch)),
        (_, _, Some(why)) => Err(why),
    }
}

proptest! {
    /// The size the frame header gives, which a decode given headers read elsewhere is
    /// checked against, is the image's as the CPU's decoder reads it, for every kind of file.
    #[test]
    fn the_frame_header_gives_the_cpu_decoders_size(c in coding()) {
        let f = encode(&c);
        prop_assert_eq!(streamline::jpeg::frame_size(&f), Some((c.height, c.width)));
        let (w, h) = image::ImageReader::new(std::io::Cursor::new(&f))
            .with_guessed_format()
            .unwrap()
            .into_dimensions()
            .unwrap();
        prop_assert_eq!((h as usize, w as usize), (c.height, c.width));
    }
}

#[test]
fn every_encoding_matches_the_cpu_decoder_within_the_standard() {
    gpu_property(
        16,
        (
            prop::collection::vec(coding(), 1..=4),
            0usize..BACKENDS.len(),
        ),
        |(codings, b)| {
            let (backend, share) = BACKENDS[b];
            let Some(mut dec) = decoder(backend) else {
                return Ok(());
            };
            dec.set_hardware_share(share).unwrap();
            let files: Vec<Vec<u8>> = codings.iter().map(encode).collect();
            let refs: Vec<&[u8]> = files.iter().map(|f| f.as_slice()).collect();
            let s = gpu().unwrap().stream();
            // A progressive file with restart markers is refused, naming the first.
            if let Some(i) = codings.iter().position(|c| c.progressive && c.restart > 0) {
                let e = dec.decode(s, &refs).err().expect("refused").to_string();
                prop_assert!(e.contains(&format!("file {i} ")), "{}", e);
                return Ok(());
            }
            let d = dec.decode(s, &refs).unwrap();
            let host = s.clone_dtoh(&d.data).unwrap();
            for (i, c) in codings.iter().enumerate() {
                prop_assert_eq!(d.layout.sizes[i], (c.height, c.width), "file {}", i);
                let cpu = image::load_from_memory(&files[i]).unwrap().to_rgb8();
                let at = d.layout.offsets[i];
                let got = &host[at..at + 3 * c.width * c.height];
                if let Err(why) = compare(c, got, cpu.as_raw()) {
                    prop_assert!(false, "file {} ({:?}): {}", i, c, why);
                }
            }
            Ok(())
        },
    );
}

/// The checks themselves fail on a decoding that swaps Cb and Cr or shifts luma.
#[test]
fn the_comparison_fails_on_swapped_chroma_and_shifted_luma() {
    let c = Coding {
        width: 64,
        height: 48,
        sampling: Some(3),
        quality: 90,
        progressive: false,
        restart: 0,
        optimized: false,
        seed: 5,
    };
    let cpu = image::load_from_memory(&encode(&c)).unwrap().to_rgb8();
    let rgb = cpu.as_raw();
    assert_eq!(compare(&c, rgb, rgb), Ok((0.0, 0.0)));
    let swapped: Vec<u8> = rgb.chunks(3).flat_map(|p| [p[2], p[1], p[0]]).collect();
    assert!(compare(&c, &swapped, rgb).is_err());
    let brighter: Vec<u8> = rgb.iter().map(|v| v.saturating_add(5)).collect();
    assert!(compare(&c, &brighter, rgb).is_err());
}

/// Every subsampling, sequential and progressive, with and without restart markers, at low,
/// middle and high quality, through each back end: the largest differences of each kind of file
/// in one table, so that a failure shows which kinds differ and by how much.
#[test]
fn each_kind_of_file_within_the_standard_table() {
    let mut kinds = Vec::new();
    for sampling in (0..SAMPLINGS.len()).map(Some).chain([None]) {
        for progressive in [false, true] {
            for restart in [0u16, 2] {
                if sampling == Some(R_4_1_1) && restart > 0 {
                    continue;
                }
                kinds.push((sampling, progressive, restart));
            }
        }
    }
    let codings = |k: usize| -> Vec<Coding> {
        let (sampling, progressive, restart) = kinds[k];
        [
            (MIN_QUALITY, 61usize, 47usize),
            (75, 130, 97),
            (95, 33, 150),
        ]
        .iter()
        .map(|&(quality, width, height)| Coding {
            width,
            height,
            sampling,
            quality,
            progressive,
            restart,
            optimized: false,
            seed: 1000 * k as u64 + quality as u64,
        })
        .collect()
    };
    // The files nvJPEG decodes wrongly are exactly the progressive ones with restart markers
    // (checked without a GPU too).
    for (k, &(_, progressive, restart)) in kinds.iter().enumerate() {
        for c in codings(k) {
            let trouble = streamline::jpeg::nvjpeg_trouble(&encode(&c));
            assert_eq!(trouble.is_some(), progressive && restart > 0, "{c:?}");
        }
    }
    let mut table = Vec::new();
    let mut failed = false;
    for &(backend, share) in &BACKENDS {
        let Some(mut dec) = decoder(backend) else {
            return;
        };
        dec.set_hardware_share(share).unwrap();
        for (k, &(sampling, progressive, restart)) in kinds.iter().enumerate() {
            let codings = codings(k);
            let files: Vec<Vec<u8>> = codings.iter().map(encode).collect();
            let refs: Vec<&[u8]> = files.iter().map(|f| f.as_slice()).collect();
            let s = gpu().unwrap().stream();
            let row = match dec.decode(s, &refs) {
                Err(e) if progressive && restart > 0 && e.to_string().contains("file 0 ") => {
                    "refused, as it should be".to_string()
                }
                Err(e) => {
                    failed = true;
                    format!("error: {e}")
                }
                Ok(_) if progressive && restart > 0 => {
                    failed = true;
                    "decoded, but nvJPEG decodes these wrongly: it should be refused".to_string()
                }
                Ok(d) => {
                    let host = s.clone_dtoh(&d.data).unwrap();
                    let (mut luma, mut chroma, mut why) = (0.0f64, 0.0f64, None);
                    for (i, c) in codings.iter().enumerate() {
                        let cpu = image::load_from_memory(&files[i]).unwrap().to_rgb8();
                        let at = d.layout.offsets[i];
                        let got = &host[at..at + 3 * c.width * c.height];
                        let (l, ch, w) = compare_all(c, got, cpu.as_raw());
                        (luma, chroma) = (luma.max(l), chroma.max(ch));
                        if let Some(w) = w {
                            why.get_or_insert(format!("q{}: {w}", c.quality));
                        }
                    }
                    failed |= why.is_some();
                    format!(
                        "luma {luma:.2} chroma {chroma:.2}{}",
                        why.map_or(String::new(), |w| format!("  FAILS ({w})"))
                    )
                }
            };
            table.push(format!(
                "{backend:?} share {share}: {} {} restart {restart}: {row}",
                sampling.map_or("gray".to_string(), |s| format!("{:?}", SAMPLINGS[s])),
                if progressive {
                    "progressive"
                } else {
                    "sequential"
                },
            ));
        }
    }
    assert!(!failed, "\n{}", table.join("\n"));
}
