//! The fused augmentation on ragged batches (images of their own sizes in one buffer): against
//! the reference applied image by image, the device draw against its reference bit for bit,
//! replays of the engine's capture against eager runs, and extents that do not fit.

use super::augment::augment_cfg;
use super::*;
use std::sync::Arc;
use streamline::engine::{DeviceBuffer, StreamPool};
use streamline_testing::reference::image::Extent;

/// A ragged batch: sizes, the bytes (with `gap` bytes before each image, so that images
/// start at any alignment), and the extents.
fn ragged_batch(
    sizes: &[(usize, usize)],
    c: usize,
    gap: usize,
    seed: u64,
) -> (Vec<u8>, Vec<ImageExtent>, Vec<Extent>) {
    let mut x = Vec::new();
    let (mut ext, mut refs) = (Vec::new(), Vec::new());
    for (i, &(h, w)) in sizes.iter().enumerate() {
        x.extend(std::iter::repeat_n(0xA5u8, gap));
        ext.push(ImageExtent {
            offset: x.len() as u64,
            height: h as u32,
            width: w as u32,
        });
        refs.push(Extent {
            offset: x.len(),
            height: h,
            width: w,
        });
        x.extend(bytes(h * w * c, seed.wrapping_add(i as u64)));
    }
    (x, ext, refs)
}

/// A ragged case: image sizes, channels, configuration, layouts, bytes before each image,
/// seed.
type RaggedCase = (
    Vec<(usize, usize)>,
    usize,
    AugmentConfig,
    (Layout, Layout),
    usize,
    u64,
);

fn ragged_case() -> impl Strategy<Value = RaggedCase> {
    (
        prop::collection::vec((5usize..120, 5usize..120), 1..=4),
        prop::sample::select(vec![1usize, 2, 3, 4]),
        prop::sample::select(vec![(16usize, 8usize), (32, 16), (40, 17), (64, 32)]),
        prop::sample::select(vec![3usize, 7, 9]),
        any::<bool>(),
        any::<bool>(),
        (any::<bool>(), any::<bool>()),
        (0usize..4, any::<u64>()),
    )
        .prop_map(
            |(sizes, c, (size, crop), k, nearest, scale, (nhwc_in, nhwc_out), (gap, seed))| {
                let mut cfg = augment_cfg(c, size, crop, k, nearest);
                cfg.scale = scale;
                cfg.mean = (0..c).map(|i| 0.1 * i as f32).collect();
                cfg.std = (0..c).map(|i| 0.5 + 0.25 * i as f32).collect();
                let layout = |nhwc: bool| if nhwc { Layout::Nhwc } else { Layout::Nchw };
                (
                    sizes,
                    c,
                    cfg,
                    (layout(nhwc_in), layout(nhwc_out)),
                    gap,
                    seed,
                )
            },
        )
}

#[test]
fn ragged_batches_match_each_image_alone() {
    let strip = prop::sample::select(vec![None, Some(1), Some(3)]);
    gpu_property(
        30,
        (ragged_case(), strip, any::<bool>()),
        |(case, strip, per_image)| {
            let (sizes, c, cfg, (lin, lout), gap, seed) = case;
            let g = gpu().unwrap();
            let st = g.stream();
            let (x, ext, refs) = ragged_batch(&sizes, c, gap, seed);
            check_extents(&ext, c, x.len()).unwrap();
            let n = sizes.len();
            let rng = DeviceRng::new(st, seed).unwrap();
            let aug = Augment::ragged(st, n, c, &cfg, &rng, per_image)
                .unwrap()
                .with_layouts(lin, lout)
                .with_strip(strip)
                .unwrap();
            let out = aug.output_shape();
            prop_assert_eq!(out, Shape::new(n, c, cfg.size, cfg.size));
            let xd: CudaSlice<u8> = st.clone_htod(&x).unwrap();
            let ed: CudaSlice<u32> = st.clone_htod(&extent_words(&ext)).unwrap();
            let (delta, tol) = reference::augment_bound_ragged(
                &cfg,
                reference::ragged_most_samples(&sizes, cfg.size),
            );
            let vmax = if cfg.scale { 1.0 } else { 255.0 };
            for k in 0..2u64 {
                let mut y = poisoned(out.len());
                {
                    let mut yv = y.slice_mut(GUARD..GUARD + out.len());
                    aug.run_ragged(g, st, &xd, &ed, &mut yv).unwrap();
                }
                let got = aug.last_draw(st).unwrap();
                let want_draw =
                    reference::augment_device_draw_ragged(&cfg, &sizes, seed, k, per_image);
                prop_assert_eq!(&got, &want_draw, "draw {}", k);
                let f = reference::relayout(&fetch(&y, out.len())?, out, lout, Layout::Nchw);
                let (want, amb) = reference::augment_ragged(&x, &refs, c, lin, &cfg, &got, delta);
                for i in 0..out.len() {
                    if amb[i] {
                        prop_assert!(f[i].is_finite() && (f[i] as f64).abs() <= vmax / 0.5 + 1.0);
                        continue;
                    }
                    prop_assert!(
                    ((f[i] as f64) - want[i]).abs() <= tol,
                    "draw {}, element {} (image {}) is {} but the reference gives {} (tolerance {})",
                    k,
                    i,
                    i / (c * cfg.size * cfg.size),
                    f[i],
                    want[i],
                    tol
                );
                }
            }
            prop_assert_eq!(rng.draws(st).unwrap(), 2);
            Ok(())
        },
    );
}

/// A ragged run captured by the engine replays as the same sequence of eager runs, reading
/// the batch and its extents anew at every replay.
#[test]
fn ragged_runs_replay_as_eager_runs() {
    gpu_property(6, (ragged_case(), any::<bool>()), |(case, per_image)| {
        let (sizes, c, cfg, (lin, lout), gap, seed) = case;
        let g = gpu().unwrap();
        let pool =
            StreamPool::new(g, &[streamline::engine::pool::StreamSpec::new("ragged")]).unwrap();
        let st = pool.stream(0).unwrap();
        let n = sizes.len();
        // Room for the largest batch of the replays: the sizes below, transposed.
        let batches: Vec<Vec<(usize, usize)>> = (0..3)
            .map(|r| {
                sizes
                    .iter()
                    .map(|&(h, w)| if r % 2 == 1 { (w, h) } else { (h, w) })
                    .collect()
            })
            .collect();
        let bytes_of = |b: &[(usize, usize)]| ragged_batch(b, c, gap, seed).0.len();
        let room = batches.iter().map(|b| bytes_of(b)).max().unwrap();
        let mut xd = DeviceBuffer::zeros(&pool, 0, room).unwrap();
        let mut ed = DeviceBuffer::zeros(&pool, 0, EXTENT_WORDS * n).unwrap();
        let len = c * n * cfg.size * cfg.size;
        let poison = vec![f32::from_bits(POISON_F32); len];
        let mut y = DeviceBuffer::from_slice(&pool, 0, &poison).unwrap();
        let mut want = DeviceBuffer::zeros(&pool, 0, len).unwrap();
        let made = |rng: &Arc<DeviceRng>| {
            Augment::ragged(st, n, c, &cfg, rng, per_image).map(|a| a.with_layouts(lin, lout))
        };
        let eager = made(&DeviceRng::new(st, seed).unwrap()).unwrap();
        let captured_rng = DeviceRng::new(st, seed).unwrap();
        pool.synchronize().unwrap();
        // Made inside the capture, as a captured call makes it: its arrays are uploaded into
        // memory the graph keeps.
        let cap = pool.begin_capture(0).unwrap();
        made(&captured_rng)
            .and_then(|a| a.run_ragged(g, st, &xd, &ed, &mut y))
            .unwrap();
        let graph = cap.end().unwrap();
        // The graph keeps the generator alive on its own.
        drop(captured_rng);
        for (r, b) in batches.iter().enumerate() {
            let (mut x, ext, _) = ragged_batch(b, c, gap, seed ^ r as u64);
            x.resize(room, 0);
            streamline::engine::memory::h2d(st, &x, &mut xd).unwrap();
            streamline::engine::memory::h2d(st, &extent_words(&ext), &mut ed).unwrap();
            streamline::engine::memory::h2d(st, &poison, &mut y).unwrap();
            eager.run_ragged(g, st, &xd, &ed, &mut want).unwrap();
            graph.launch().unwrap();
            pool.synchronize().unwrap();
            let (got, e) = (y.to_vec(st).unwrap(), want.to_vec(st).unwrap());
            prop_assert!(
                !got.iter().any(|v| v.to_bits() == POISON_F32),
                "replay {}: unwritten",
                r
            );
            prop_assert!(bitwise_eq(&got, &e), "replay {} differs from eager", r);
            prop_assert!(
                got.iter().all(|v| v.is_finite()),
                "replay {}: not finite",
                r
            );
        }
        Ok(())
    });
}

/// An extent that is empty or reaches past the input makes only its image NaN; the launcher
/// refuses extents of another count and batches of one size, naming the argument.
#[test]
fn extents_that_do_not_fit_make_their_image_nan() {
    let Some(g) = gpu() else { return };
    let st = g.stream();
    let cfg = augment_cfg(3, 16, 8, 7, true);
    let sizes = [(20usize, 24usize), (17, 30), (33, 18)];
    let (x, mut ext, _) = ragged_batch(&sizes, 3, 1, 7);
    let rng = DeviceRng::new(st, 1).unwrap();
    let aug = Augment::ragged(st, 3, 3, &cfg, &rng, false).unwrap();
    // Image 1 reaches one byte past the batch; image 2 is empty.
    ext[1].offset = (x.len() - 17 * 30 * 3 + 1) as u64;
    ext[2].height = 0;
    let e = check_extents(&ext, 3, x.len()).unwrap_err().to_string();
    assert!(e.contains("extents") && e.contains("image 1"), "{e}");
    let xd: CudaSlice<u8> = st.clone_htod(&x).unwrap();
    let ed: CudaSlice<u32> = st.clone_htod(&extent_words(&ext)).unwrap();
    let per = 3 * 16 * 16;
    let mut y: CudaSlice<f32> = st.alloc_zeros(3 * per).unwrap();
    aug.run_ragged(g, st, &xd, &ed, &mut y).unwrap();
    let v = st.clone_dtoh(&y).unwrap();
    assert!(v[..per].iter().all(|v| v.is_finite()));
    assert!(v[per..].iter().all(|v| v.is_nan()));
    // Arguments.
    let short: CudaSlice<u32> = st.clone_htod(&[0u32; 8]).unwrap();
    let e = aug
        .run_ragged(g, st, &xd, &short, &mut y)
        .unwrap_err()
        .to_string();
    assert!(e.contains("extents"), "{e}");
    let e = aug.run_fused(g, st, &xd, &mut y).unwrap_err().to_string();
    assert!(e.contains("run_ragged"), "{e}");
    let square = Augment::drawn_on_device(st, Shape::new(3, 3, 16, 16), &cfg, &rng, false).unwrap();
    let e = square
        .run_ragged(g, st, &xd, &ed, &mut y)
        .unwrap_err()
        .to_string();
    assert!(e.contains("Augment::ragged"), "{e}");
}
