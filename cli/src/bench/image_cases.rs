//! Seed 003's image cases of `streamline bench`, named as in the anchors: each batch size of
//! 8, 32 and 128 images of 3 x 256 x 256, inputs rotated over enough buffer sets to exceed L2,
//! bytes counted as the least traffic the operation needs.

use super::{round, Bench, Timing};
use anyhow::Result;
use cudarc::driver::CudaSlice;
use serde_json::{json, Value};
use streamline::ops::image::*;
use streamline_testing::data::randn_f32;

const SIZE: usize = 256;
const CROP: usize = 128;

/// The case names this module runs for batch `b`.
pub fn names(b: usize) -> Vec<String> {
    [
        "roi_align_crop128",
        "resize_bilinear_128to256",
        "rotate_nearest",
        "rotate_bilinear",
        "gaussian_blur_k7",
        "normalize",
        "augment_pipeline",
    ]
    .iter()
    .map(|c| format!("{c}_b{b}"))
    .collect()
}

/// Number of input/output sets so that together they exceed 4x L2.
fn sets(b: &Bench, bytes_per_set: usize) -> usize {
    (4 * b.gpu.info().l2_bytes as usize)
        .div_ceil(bytes_per_set.max(1))
        .max(1)
}

fn f32_sets(
    b: &Bench,
    s_in: Shape,
    s_out: Shape,
    seed: u64,
) -> Result<Vec<(CudaSlice<f32>, CudaSlice<f32>)>> {
    let n = sets(b, 4 * (s_in.len() + s_out.len()));
    let mut v = Vec::with_capacity(n);
    for i in 0..n {
        let x = b
            .stream
            .clone_htod(&randn_f32(s_in.len(), seed + i as u64))?;
        let y = b.stream.alloc_zeros::<f32>(s_out.len())?;
        v.push((x, y));
    }
    Ok(v)
}

/// Sets of random uint8 inputs and f32 outputs of `shape` (the fused augmentation's), enough
/// of them to exceed 4x L2.
fn u8_sets(b: &Bench, shape: Shape, seed: u64) -> Result<Vec<(CudaSlice<u8>, CudaSlice<f32>)>> {
    let n = sets(b, shape.len() + 4 * shape.len());
    let mut v = Vec::with_capacity(n);
    for i in 0..n {
        let bytes: Vec<u8> = randn_f32(shape.len(), seed + i as u64)
            .iter()
            .map(|x| (x.abs() * 80.0).min(255.0) as u8)
            .collect();
        v.push((
            b.stream.clone_htod(&bytes)?,
            b.stream.alloc_zeros::<f32>(shape.len())?,
        ));
    }
    Ok(v)
}

/// Records an image case with the time of a device-to-device copy of the same bytes
/// ([`Bench::copy_same_bytes`]) beside it.
fn record(b: &mut Bench, case: &str, t: Timing, bytes: f64, mut extra: Value) -> Result<()> {
    let copy = b.copy_same_bytes(bytes)?;
    if let Value::Object(e) = &mut extra {
        e.insert("copy_same_bytes_ms".into(), json!(round(copy.ms)));
        e.insert(
            "copy_same_bytes_device_ms".into(),
            json!(copy.device_ms.map(round)),
        );
    }
    b.record(case, t, bytes, extra);
    Ok(())
}

/// Runs the cases of batch `batch` that `wanted` accepts.
pub fn run(b: &mut Bench, batch: usize, wanted: &dyn Fn(&str) -> bool) -> Result<()> {
    let gpu = b.gpu;
    let st = b.stream.clone();
    let full = Shape::new(batch, 3, SIZE, SIZE);
    let crop = full.with_size(CROP, CROP);
    let plane_bytes = |s: Shape| (4 * s.len()) as f64;
    let mut rng_seed = 0x5eed_0003u64 + batch as u64;
    let mut next = || {
        rng_seed = rng_seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        rng_seed
    };

    // The single operations' inputs: a crop box and an angle per image, ImageNet's statistics.
    let boxes: Vec<[f32; 5]> = (0..batch)
        .map(|i| {
            let (t, l) = (
                (next() >> 33) % (SIZE - CROP + 1) as u64,
                (next() >> 33) % (SIZE - CROP + 1) as u64,
            );
            [
                i as f32,
                l as f32,
                t as f32,
                (l as usize + CROP) as f32,
                (t as usize + CROP) as f32,
            ]
        })
        .collect();
    let boxes = RoiBoxes::upload(&st, &boxes)?;
    let crop_options = RoiAlign {
        out_h: CROP,
        out_w: CROP,
        spatial_scale: 1.0,
        sampling_ratio: -1,
        aligned: false,
    };
    let angles: Vec<f32> = (0..batch)
        .map(|_| ((next() >> 40) as f64 / (1u64 << 24) as f64 * 90.0 - 45.0) as f32)
        .collect();
    let angles = PerImage::upload(&st, "angles", &angles)?;
    let stats = ChannelStats::upload(&st, &[0.485, 0.456, 0.406], &[0.229, 0.224, 0.225])?;

    // Each single operation: its case name, what it runs, its input and output shapes, the
    // seed of its inputs, and the least traffic it must move.
    #[derive(Clone, Copy)]
    enum Single {
        RoiAlign,
        Resize,
        Rotate(Interp),
        Blur,
        Normalize,
    }
    // roi_align reads the (crop + 1)^2 window of every plane and writes the crop.
    let window = (batch * 3 * (CROP + 1) * (CROP + 1) * 4) as f64;
    let cases = [
        (
            "roi_align_crop128",
            Single::RoiAlign,
            full,
            crop,
            100,
            window + plane_bytes(crop),
        ),
        (
            "resize_bilinear_128to256",
            Single::Resize,
            crop,
            full,
            200,
            plane_bytes(crop) + plane_bytes(full),
        ),
        (
            "rotate_nearest",
            Single::Rotate(Interp::Nearest),
            full,
            full,
            300,
            2.0 * plane_bytes(full),
        ),
        (
            "rotate_bilinear",
            Single::Rotate(Interp::Bilinear),
            full,
            full,
            300,
            2.0 * plane_bytes(full),
        ),
        (
            "gaussian_blur_k7",
            Single::Blur,
            full,
            full,
            400,
            2.0 * plane_bytes(full),
        ),
        (
            "normalize",
            Single::Normalize,
            full,
            full,
            500,
            2.0 * plane_bytes(full),
        ),
    ];
    for (name, op, s_in, s_out, seed, bytes) in cases {
        let case = format!("{name}_b{batch}");
        if !wanted(&case) {
            continue;
        }
        b.bar.set_message(case.clone());
        let mut bufs = f32_sets(b, s_in, s_out, seed)?;
        let n = bufs.len();
        // NCHW in and out (the row named `streamline`), then the layouts image decoders produce
        // and CV-CUDA computes in: the same values read as NHWC, written NHWC (CV-CUDA's
        // rows) and, for the crop and the rotations, NCHW (what a model takes; CV-CUDA's crop
        // writes NCHW too).
        let nhwc_to_nchw = matches!(op, Single::RoiAlign | Single::Rotate(_));
        let pairs = [
            (Layout::Nchw, Layout::Nchw, "streamline", true),
            (Layout::Nhwc, Layout::Nhwc, "streamline-nhwc", true),
            (
                Layout::Nhwc,
                Layout::Nchw,
                "streamline-nhwc-to-nchw",
                nhwc_to_nchw,
            ),
        ];
        for (from, to, name, wanted) in pairs {
            if !wanted {
                continue;
            }
            let t = b.time(|i| {
                let (x, y) = &mut bufs[i % n];
                let (x, y) = ((&*x, from), (y, to));
                match op {
                    Single::RoiAlign => {
                        roi_align_relayout(gpu, &st, s_in, x, &boxes, crop_options, y)
                    }
                    Single::Resize => resize_relayout(
                        gpu,
                        &st,
                        s_in,
                        x,
                        (SIZE, SIZE),
                        ResizeMode::BilinearAntialias,
                        y,
                    ),
                    Single::Rotate(mode) => {
                        rotate_relayout(gpu, &st, s_in, x, &angles, mode, None, y)
                    }
                    Single::Blur => {
                        let sigma = Sigma::Global(1.5, 1.5);
                        gaussian_blur_in(gpu, &st, from, s_in, x.0, (7, 7), sigma, y.0)
                    }
                    Single::Normalize => normalize_in(gpu, &st, from, s_in, x.0, &stats, y.0),
                }
            })?;
            let mut extra = json!({"impl": name, "batch": batch, "buffer_sets": n});
            if from != Layout::Nchw || to != Layout::Nchw {
                extra["layout"] = json!(format!("{from}->{to}"));
            }
            if matches!(op, Single::Resize) {
                extra["antialias"] = json!(true);
            }
            record(b, &case, t, bytes, extra)?;
        }
    }

    let case = format!("augment_pipeline_b{batch}");
    if wanted(&case) {
        b.bar.set_message(case.clone());
        let cfg = AugmentConfig::seed003(SIZE, 3);
        let draw = AugmentDraw::random(&cfg, batch, SIZE, SIZE, next());
        let aug = Augment::new(&st, full, &cfg, &draw)?;
        let mut bufs = u8_sets(b, full, 600)?;
        let n = bufs.len();
        // The fused kernel needs only the (crop + 1)^2 window of each uint8 plane and writes
        // the f32 output once.
        let bytes = (batch * 3 * (CROP + 1) * (CROP + 1)) as f64 + plane_bytes(full);
        // NCHW in and out (the row named `streamline`), then the layouts image decoders produce
        // (NHWC uint8) and CV-CUDA computes in: the same random bytes read as NHWC, written
        // NCHW (what a model takes) and NHWC.
        for (layouts, name) in [
            ((Layout::Nchw, Layout::Nchw), "streamline"),
            ((Layout::Nhwc, Layout::Nchw), "streamline-nhwc-to-nchw"),
            ((Layout::Nhwc, Layout::Nhwc), "streamline-nhwc"),
        ] {
            let aug = Augment::new(&st, full, &cfg, &draw)?.with_layouts(layouts.0, layouts.1);
            let t = b.time(|i| {
                let (x, y) = &mut bufs[i % n];
                aug.run_fused(gpu, &st, x, y)
            })?;
            record(
                b,
                &case,
                t,
                bytes,
                json!({"impl": name, "batch": batch, "buffer_sets": n, "fused": true, "layout": format!("{}->{}", layouts.0, layouts.1)}),
            )?;
        }
        let mut scratch = None;
        let t = b.time(|i| {
            let (x, y) = &mut bufs[i % n];
            aug.run_separate(gpu, &st, x, &mut scratch, y)
        })?;
        record(
            b,
            &case,
            t,
            bytes,
            json!({"impl": "streamline-separate", "batch": batch, "buffer_sets": n, "fused": false}),
        )?;
        // The other channel counts (a kernel instance each), NCHW in and out: `streamline-c1`
        // and so on.
        for c in [1, 2, 4] {
            let shape = Shape { c, ..full };
            let cfg = AugmentConfig::seed003(SIZE, c);
            let aug = Augment::new(&st, shape, &cfg, &draw)?;
            let mut bufs = u8_sets(b, shape, 700)?;
            let n = bufs.len();
            let t = b.time(|i| {
                let (x, y) = &mut bufs[i % n];
                aug.run_fused(gpu, &st, x, y)
            })?;
            let bytes = (batch * c * (CROP + 1) * (CROP + 1)) as f64 + plane_bytes(shape);
            let name = format!("streamline-c{c}");
            record(
                b,
                &case,
                t,
                bytes,
                json!({"impl": name, "batch": batch, "buffer_sets": n, "fused": true, "channels": c}),
            )?;
        }
    }
    Ok(())
}
