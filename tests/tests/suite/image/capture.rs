//! Per-call parameters uploaded inside the engine's capture, and the device's random draw.

use super::*;

/// Every launcher whose parameters are uploaded per call, with the uploads inside a capture
/// of the engine: each replay (after new input values and poisoned outputs) equals the eager
/// calls on the same inputs bit for bit, and the augmentation drawn on the device draws at
/// every replay what the same sequence of eager runs draws.
#[test]
fn uploads_inside_a_capture_replay_as_eager_calls() {
    use streamline::engine::{DeviceBuffer, StreamPool};
    use streamline::Result;
    gpu_property(
        6,
        (1usize..=4, 8usize..=70, 8usize..=70, any::<u64>()),
        |(n, h, w, seed)| {
            let g = gpu().unwrap();
            let pool = StreamPool::with_streams(g, 1).unwrap();
            let st = pool.stream(0).unwrap();
            let s = Shape::new(n, 3, h, w);
            let angles: Vec<f32> = (0..n).map(|i| 37.0 * i as f32 - 50.0).collect();
            let pairs: Vec<f32> = (0..2 * n).map(|i| 0.3 + 0.2 * i as f32).collect();
            let boxes: Vec<[f32; 5]> = (0..n)
                .map(|i| [i as f32, 0.5, 1.0, w as f32 - 2.0, h as f32 - 1.5])
                .collect();
            let (mean, std) = ([0.4, 0.5, 0.6], [0.2, 0.3, 0.25]);
            let crop = h.min(w) / 2;
            let cfg = AugmentConfig {
                crop,
                size: 2 * crop,
                ..AugmentConfig::seed003(2 * crop, 3)
            };
            let draw = AugmentDraw::random_per_image(&cfg, n, h, w, seed);
            let o = RoiAlign {
                out_h: 5,
                out_w: 6,
                spatial_scale: 1.0,
                sampling_ratio: -1,
                aligned: false,
            };
            let aug_len = cfg.size * cfg.size * 3 * n;
            let lens = [
                s.len(),
                s.len(),
                s.len(),
                n * 3 * 30,
                aug_len,
                aug_len,
                n * 3 * 30,
            ];
            let flat: Vec<f32> = boxes.iter().flatten().copied().collect();
            let on_device = DeviceBuffer::from_slice(&pool, 0, &flat).unwrap();
            let calls = |x: &DeviceBuffer<f32>,
                         x8: &DeviceBuffer<u8>,
                         rng: &std::sync::Arc<DeviceRng>,
                         y: &mut [DeviceBuffer<f32>]|
             -> Result<()> {
                let stats = ChannelStats::upload(st, &mean, &std)?;
                normalize(g, st, s, x, &stats, &mut y[0])?;
                let a = PerImage::upload(st, "angles", &angles)?;
                rotate(g, st, s, x, &a, Interp::Bilinear, Some(2.0), &mut y[1])?;
                let p = PerImage::upload(st, "sigma", &pairs)?;
                gaussian_blur(g, st, s, x, (5, 7), Sigma::PerImage(&p), &mut y[2])?;
                let b = RoiBoxes::upload(st, &boxes)?;
                roi_align(g, st, s, x, &b, o, &mut y[3])?;
                Augment::new(st, s, &cfg, &draw)?.run_fused(g, st, x8, &mut y[4])?;
                Augment::drawn_on_device(st, s, &cfg, rng, true)?
                    .run_fused(g, st, x8, &mut y[5])?;
                // SAFETY: `on_device` outlives every launch and graph of this test.
                let d = unsafe { RoiBoxes::on_device(&on_device, st)? };
                roi_align(g, st, s, x, &d, o, &mut y[6])
            };
            let data = |r: u64| {
                (
                    values(s.len(), seed ^ r),
                    bytes(s.len(), seed.wrapping_add(r)),
                )
            };
            let (v, b) = data(0);
            let mut x = DeviceBuffer::from_slice(&pool, 0, &v).unwrap();
            let mut x8 = DeviceBuffer::from_slice(&pool, 0, &b).unwrap();
            let poison = |len: usize| vec![f32::from_bits(POISON_F32); len];
            let mut ys: Vec<DeviceBuffer<f32>> = lens
                .iter()
                .map(|&l| DeviceBuffer::from_slice(&pool, 0, &poison(l)).unwrap())
                .collect();
            let mut want: Vec<DeviceBuffer<f32>> = lens
                .iter()
                .map(|&l| DeviceBuffer::zeros(&pool, 0, l).unwrap())
                .collect();
            let eager_rng = DeviceRng::new(st, seed).unwrap();
            let captured_rng = DeviceRng::new(st, seed).unwrap();
            pool.synchronize().unwrap();
            let cap = pool.begin_capture(0).unwrap();
            calls(&x, &x8, &captured_rng, &mut ys).unwrap();
            let graph = cap.end().unwrap();
            // The graph keeps the generator (made before the capture) alive on its own.
            drop(captured_rng);
            for r in 0..3u64 {
                let (v, b) = data(r + 1);
                streamline::engine::memory::h2d(st, &v, &mut x).unwrap();
                streamline::engine::memory::h2d(st, &b, &mut x8).unwrap();
                for (y, &l) in ys.iter_mut().zip(&lens) {
                    streamline::engine::memory::h2d(st, &poison(l), y).unwrap();
                }
                calls(&x, &x8, &eager_rng, &mut want).unwrap();
                graph.launch().unwrap();
                pool.synchronize().unwrap();
                for (i, (y, e)) in ys.iter().zip(&want).enumerate() {
                    let (y, e) = (y.to_vec(st).unwrap(), e.to_vec(st).unwrap());
                    prop_assert!(
                        !y.iter().any(|v| v.to_bits() == POISON_F32),
                        "replay {}, output {}: unwritten",
                        r,
                        i
                    );
                    prop_assert!(
                        bitwise_eq(&y, &e),
                        "replay {}, output {}: differs from eager",
                        r,
                        i
                    );
                }
            }
            prop_assert_eq!(eager_rng.draws(st).unwrap(), 3);
            // The boxes on the device give the uploaded boxes' results.
            let (a, b) = (want[3].to_vec(st).unwrap(), want[6].to_vec(st).unwrap());
            prop_assert!(
                bitwise_eq(&a, &b),
                "boxes on the device differ from uploaded ones"
            );
            Ok(())
        },
    );
}

/// The device's draw is the CPU reference's, bit for bit, and advances once per run.
#[test]
fn device_draws_match_the_reference() {
    gpu_property(
        12,
        (
            1usize..=300,
            20usize..=90,
            20usize..=90,
            any::<u64>(),
            any::<bool>(),
        ),
        |(n, h, w, seed, per_image)| {
            let g = gpu().unwrap();
            let st = g.stream();
            let s = Shape::new(n, 1, h, w);
            let crop = h.min(w) / 3;
            let cfg = AugmentConfig {
                crop,
                size: 2 * crop,
                degrees: 30.0,
                sigma: (0.2, 1.7),
                ..AugmentConfig::seed003(2 * crop, 1)
            };
            let rng = DeviceRng::new(st, seed).unwrap();
            let aug = Augment::drawn_on_device(st, s, &cfg, &rng, per_image).unwrap();
            let x: CudaSlice<u8> = st.clone_htod(&bytes(s.len(), seed)).unwrap();
            let mut y: CudaSlice<f32> = st.alloc_zeros(aug.output_shape().len()).unwrap();
            for k in 0..3u64 {
                aug.run_fused(g, st, &x, &mut y).unwrap();
                let got = aug.last_draw(st).unwrap();
                let want = reference::augment_device_draw(&cfg, (n, h, w), seed, k, per_image);
                prop_assert_eq!(&got, &want, "draw {}", k);
            }
            prop_assert_eq!(rng.draws(st).unwrap(), 3);
            prop_assert!(aug.run_separate(g, st, &x, &mut None, &mut y).is_err());
            Ok(())
        },
    );
}
