//! Seed 003's fused augmentation against the reference and the chain of single operations.

use super::*;

fn augment_case() -> impl Strategy<Value = (Shape, AugmentConfig, (Layout, Layout), u64)> {
    (
        1usize..=3,
        prop::sample::select(vec![1usize, 2, 3, 4]),
        prop::sample::select(vec![
            (8usize, 5usize, 9usize),
            (33, 16, 40),
            (64, 32, 64),
            (40, 40, 71),
            (37, 20, 33),
            // Enlarged exactly twofold: with whole-pixel boxes, the kernels whose crop and
            // resize are composed in integers (`augment_dyadic`), boxes at the image's last
            // row and column included.
            (37, 18, 36),
            (9, 4, 8),
            // Not enlarged: a 7-tap kernel's 38 x 38 haloed tile needs more crop pixels than a
            // window holds, so it goes through them in parts, at every angle.
            (100, 100, 100),
        ]),
        // Every kernel past the 7-tap fast path needs more than 48 KiB of shared memory (the
        // opt-in path); 9 is the smallest of them, 33 and more have weights written by more
        // than one warp, 63 is the largest (capped below by the output size).
        prop::sample::select(vec![1usize, 3, 5, 7, 9, 15, 31, 33, 63]),
        any::<bool>(),
        any::<bool>(),
        (any::<bool>(), any::<bool>()),
        any::<u64>(),
    )
        .prop_map(
            |(n, c, (side, crop, size), k, nearest, scale, (nhwc_in, nhwc_out), seed)| {
                let mut cfg = augment_cfg(c, size, crop, k.min(2 * size - 1), nearest);
                cfg.scale = scale;
                cfg.mean = (0..c).map(|i| 0.1 * i as f32).collect();
                cfg.std = (0..c).map(|i| 0.5 + 0.25 * i as f32).collect();
                let layout = |nhwc: bool| if nhwc { Layout::Nhwc } else { Layout::Nchw };
                (
                    Shape::new(n, c, side, side),
                    cfg,
                    (layout(nhwc_in), layout(nhwc_out)),
                    seed,
                )
            },
        )
}

#[test]
fn augment_fused_matches_reference_and_chain() {
    // The fused kernel's strip: the GPU's default, one tile per block, or several (the last
    // strip of a column shorter than the others where 3 does not divide the tiles).
    let strip = prop::sample::select(vec![None, Some(1), Some(2), Some(3), Some(8)]);
    // Whole-pixel boxes of the crop's size (a random crop: every crop pixel the mean of four
    // input pixels), or boxes a third of a pixel shorter (crop pixels blended with weights of
    // any fraction).
    let cases = (augment_case(), strip, any::<bool>());
    gpu_property(40, cases, |(case, strip, shorter)| {
        let (s, cfg, (lin, lout), seed) = case;
        let g = gpu().unwrap();
        let st = g.stream();
        // The input as stored (layout `lin`) and as the reference reads it (NCHW).
        let stored: Vec<u8> = (0..s.len())
            .map(|i| ((i as u64).wrapping_mul(2654435761) ^ seed) as u8)
            .collect();
        let bytes = reference::relayout(&stored, s, lin, Layout::Nchw);
        let mut draw = AugmentDraw::random(&cfg, s.n, s.h, s.w, seed);
        if shorter {
            for b in &mut draw.boxes {
                b[2] -= 1.0 / 3.0;
                b[3] -= 1.0 / 3.0;
            }
        }
        let aug = Augment::new(st, s, &cfg, &draw)
            .unwrap()
            .with_layouts(lin, lout)
            .with_strip(strip)
            .unwrap();
        let out = aug.output_shape();
        let x: CudaSlice<u8> = st.clone_htod(&stored).unwrap();
        let mut fused = poisoned(out.len());
        let mut chain = poisoned(out.len());
        let mut scratch = None;
        {
            let mut fv = fused.slice_mut(GUARD..GUARD + out.len());
            match aug.run_fused(g, st, &x, &mut fv) {
                // A GPU with less shared memory per block than this kernel size needs refuses
                // it by name before launching (H100/H200 take every size).
                Err(streamline::error::Error::InvalidArgument {
                    arg: "kernel_size", ..
                }) => return Ok(()),
                r => r.unwrap(),
            }
            let mut cv = chain.slice_mut(GUARD..GUARD + out.len());
            let ran = aug.run_separate(g, st, &x, &mut scratch, &mut cv);
            // The chain writes NCHW only, and says so naming the argument.
            match lout {
                Layout::Nchw => ran.unwrap(),
                Layout::Nhwc => prop_assert!(
                    matches!(
                        ran,
                        Err(streamline::error::Error::InvalidArgument {
                            arg: "output layout",
                            ..
                        })
                    ),
                    "{:?}",
                    ran
                ),
            }
        }
        let f = reference::relayout(&fetch(&fused, out.len())?, out, lout, Layout::Nchw);
        let c = match lout {
            Layout::Nchw => Some(fetch(&chain, out.len())?),
            Layout::Nhwc => None,
        };
        // The error budget of `reference::augment_bound` (stds of at least 0.5 here).
        let vmax = if cfg.scale { 1.0 } else { 255.0 };
        let (delta, tol) = reference::augment_bound(&cfg);
        let (want, amb) = reference::augment(&bytes, s, &cfg, &draw, delta);
        for i in 0..out.len() {
            if amb[i] {
                // A nearest-neighbour tie within delta: the value of either neighbour is
                // right; both stay within the data range.
                let lim = vmax / 0.5 + 1.0;
                prop_assert!(f[i].is_finite() && (f[i] as f64).abs() <= lim);
                continue;
            }
            prop_assert!(
                ((f[i] as f64) - want[i]).abs() <= tol,
                "fused element {} is {} but the reference gives {} (tolerance {})",
                i,
                f[i],
                want[i],
                tol
            );
            if let Some(c) = &c {
                prop_assert!(
                    ((c[i] as f64) - want[i]).abs() <= tol,
                    "chain element {} is {} but the reference gives {} (tolerance {})",
                    i,
                    c[i],
                    want[i],
                    tol
                );
            }
        }
        Ok(())
    });
}

/// Seed 003's exact workload: 256 x 256 images, crop 128, blur 7, batch 32.
#[test]
fn augment_seed003_batch() {
    let Some(g) = gpu() else { return };
    let st = g.stream();
    let s = Shape::new(32, 3, 256, 256);
    let cfg = AugmentConfig::seed003(256, 3);
    let draw = AugmentDraw::random(&cfg, s.n, s.h, s.w, 3);
    let aug = Augment::new(st, s, &cfg, &draw).unwrap();
    let bytes: Vec<u8> = (0..s.len()).map(|i| (i * 7 % 251) as u8).collect();
    let x: CudaSlice<u8> = st.clone_htod(&bytes).unwrap();
    let out = aug.output_shape();
    let mut fused = poisoned(out.len());
    let mut chain = poisoned(out.len());
    let mut scratch = None;
    {
        let mut fv = fused.slice_mut(GUARD..GUARD + out.len());
        aug.run_fused(g, st, &x, &mut fv).unwrap();
        let mut cv = chain.slice_mut(GUARD..GUARD + out.len());
        aug.run_separate(g, st, &x, &mut scratch, &mut cv).unwrap();
    }
    let f = fetch(&fused, out.len()).unwrap();
    let c = fetch(&chain, out.len()).unwrap();
    // Same stages, same f32 rules: the two differ only by the blur's summation order
    // ((4k + 24)u of 255) except near nearest-neighbour ties, where a blurred window may take
    // the other neighbour (at most 255 times the largest weight); require that of nearly all.
    let tol = (4.0 * 7.0 + 24.0) * U * 255.0 * 4.0;
    let off = f
        .iter()
        .zip(&c)
        .filter(|(a, b)| ((**a - **b) as f64).abs() > tol)
        .count();
    assert!(
        off * 1000 <= out.len(),
        "{off} of {} fused values differ from the chain by more than {tol}",
        out.len()
    );
    // The layouts change the addressing only: NHWC in or out gives the same bits.
    let nhwc: Vec<u8> = reference::relayout(&bytes, s, Layout::Nchw, Layout::Nhwc);
    let xh: CudaSlice<u8> = st.clone_htod(&nhwc).unwrap();
    for (lin, lout) in [
        (Layout::Nhwc, Layout::Nchw),
        (Layout::Nhwc, Layout::Nhwc),
        (Layout::Nchw, Layout::Nhwc),
    ] {
        let aug = Augment::new(st, s, &cfg, &draw)
            .unwrap()
            .with_layouts(lin, lout);
        let src = if lin == Layout::Nhwc { &xh } else { &x };
        let mut y = poisoned(out.len());
        {
            let mut yv = y.slice_mut(GUARD..GUARD + out.len());
            aug.run_fused(g, st, src, &mut yv).unwrap();
        }
        let got = reference::relayout(&fetch(&y, out.len()).unwrap(), out, lout, Layout::Nchw);
        assert!(
            bitwise_eq(&got, &f),
            "{lin} in, {lout} out differs from NCHW in and out"
        );
    }
    // The strip changes which block rotates a row, not how: every strip gives the same bits
    // (3 leaves a shorter strip at the bottom of each column of 8 tiles).
    for strip in [1, 2, 3, 8] {
        let aug = Augment::new(st, s, &cfg, &draw)
            .unwrap()
            .with_strip(Some(strip))
            .unwrap();
        let mut y = poisoned(out.len());
        {
            let mut yv = y.slice_mut(GUARD..GUARD + out.len());
            aug.run_fused(g, st, &x, &mut yv).unwrap();
        }
        let got = fetch(&y, out.len()).unwrap();
        assert!(
            bitwise_eq(&got, &f),
            "strips of {strip} tiles differ from the default"
        );
    }
    // A strip of no tiles is refused by name.
    assert!(matches!(
        Augment::new(st, s, &cfg, &draw)
            .unwrap()
            .with_strip(Some(0)),
        Err(streamline::error::Error::InvalidArgument { arg: "strip", .. })
    ));
}

/// Seed 003's augmentation of `c` channels to `size`, with crop side `crop`, kernel size `k`
/// and nearest (or bilinear) rotation.
pub(super) fn augment_cfg(
    c: usize,
    size: usize,
    crop: usize,
    k: usize,
    nearest: bool,
) -> AugmentConfig {
    let mut cfg = AugmentConfig::seed003(size, c);
    cfg.crop = crop;
    cfg.kernel_size = k;
    cfg.interp = if nearest {
        Interp::Nearest
    } else {
        Interp::Bilinear
    };
    cfg
}

/// The fused kernel reads its uint8 input at any byte alignment (a view into a larger buffer,
/// say): the same images from an aligned buffer and from one a byte into another give the same
/// bits, in both input layouts, for every channel count, one tile and strips per block, windows
/// at every border and, with a crop no larger than its output, parts of the haloed tile.
#[test]
fn augment_input_at_any_alignment() {
    let Some(g) = gpu() else { return };
    let st = g.stream();
    // (images, channels, side, crop, size, kernel size, nearest)
    let cases = [
        (3, 3, 256, 128, 256, 7, true),
        (2, 1, 64, 40, 96, 5, false),
        (2, 2, 48, 24, 80, 7, true),
        (2, 4, 32, 32, 64, 3, false),
        (1, 3, 80, 80, 80, 7, true),
        (1, 3, 64, 40, 100, 15, true),
    ];
    for (n, c, side, crop, size, k, nearest) in cases {
        let s = Shape::new(n, c, side, side);
        let cfg = augment_cfg(c, size, crop, k, nearest);
        let draw = AugmentDraw::random(&cfg, n, side, side, (side * c + k) as u64);
        let stored: Vec<u8> = (0..s.len()).map(|i| (i * 29 % 251) as u8).collect();
        let out = s.with_size(size, size);
        for layout in [Layout::Nchw, Layout::Nhwc] {
            let bytes = if layout == Layout::Nhwc {
                reference::relayout(&stored, s, Layout::Nchw, Layout::Nhwc)
            } else {
                stored.clone()
            };
            let aligned: CudaSlice<u8> = st.clone_htod(&bytes).unwrap();
            let mut shifted_bytes = vec![0u8];
            shifted_bytes.extend_from_slice(&bytes);
            let shifted: CudaSlice<u8> = st.clone_htod(&shifted_bytes).unwrap();
            let shifted = shifted.slice(1..);
            for strip in [1, 2, 3] {
                let aug = Augment::new(st, s, &cfg, &draw)
                    .unwrap()
                    .with_layouts(layout, Layout::Nchw)
                    .with_strip(Some(strip))
                    .unwrap();
                let run = |x: &CudaView<u8>| {
                    let mut y = poisoned(out.len());
                    {
                        let mut yv = y.slice_mut(GUARD..GUARD + out.len());
                        aug.run_fused(g, st, x, &mut yv).unwrap();
                    }
                    fetch(&y, out.len()).unwrap()
                };
                let (a, b) = (run(&aligned.slice(..)), run(&shifted));
                assert!(
                    bitwise_eq(&a, &b),
                    "case {s:?} {layout} crop {crop} size {size} k {k} strip {strip}: the \
                     aligned input gives other bits than the same bytes one byte on"
                );
            }
        }
    }
}

/// Strips of tiles through every path of the kernels: the 7-tap kernels' parts (a crop not
/// enlarged), the wider kernels (staged and through parts), bilinear rotation, the halo rows
/// kept in a ring and copied up, NHWC in and out, and image heights that leave the last strip
/// of a column short. Every strip gives the bits of one tile per block.
#[test]
fn augment_strips_match_one_tile() {
    let Some(g) = gpu() else { return };
    let st = g.stream();
    // (images, channels, side, crop, size, kernel size, nearest, layouts)
    let nchw = (Layout::Nchw, Layout::Nchw);
    let cases = [
        (2, 3, 100, 100, 100, 7, true, nchw),
        (2, 3, 70, 40, 140, 31, true, nchw),
        (1, 2, 64, 32, 150, 15, false, nchw),
        (3, 4, 90, 50, 97, 7, false, (Layout::Nhwc, Layout::Nhwc)),
        (2, 1, 48, 30, 200, 63, true, (Layout::Nchw, Layout::Nhwc)),
        // The nearest 7-tap strips that copy their halo rows up (1, 2 and 4 channels): a short
        // last strip, the window in parts (a crop not enlarged), a kernel of fewer taps.
        (2, 1, 100, 50, 100, 7, true, nchw),
        (2, 2, 90, 90, 90, 7, true, (Layout::Nhwc, Layout::Nchw)),
        (2, 4, 100, 100, 100, 7, true, nchw),
        (2, 4, 120, 60, 150, 5, true, (Layout::Nhwc, Layout::Nhwc)),
    ];
    for (n, c, side, crop, size, k, nearest, (lin, lout)) in cases {
        let s = Shape::new(n, c, side, side);
        let cfg = augment_cfg(c, size, crop, k, nearest);
        let draw = AugmentDraw::random(&cfg, n, side, side, (side * k) as u64);
        let stored: Vec<u8> = (0..s.len()).map(|i| (i * 37 % 253) as u8).collect();
        let x: CudaSlice<u8> = st.clone_htod(&stored).unwrap();
        let out = s.with_size(size, size);
        let run = |strip: usize| {
            let aug = Augment::new(st, s, &cfg, &draw)
                .unwrap()
                .with_layouts(lin, lout)
                .with_strip(Some(strip))
                .unwrap();
            let mut y = poisoned(out.len());
            {
                let mut yv = y.slice_mut(GUARD..GUARD + out.len());
                aug.run_fused(g, st, &x, &mut yv).unwrap();
            }
            fetch(&y, out.len()).unwrap()
        };
        let one = run(1);
        for strip in [2, 3, 8] {
            assert!(
                bitwise_eq(&run(strip), &one),
                "case {s:?} crop {crop} size {size} k {k}: strips of {strip} differ from one tile"
            );
        }
    }
}
