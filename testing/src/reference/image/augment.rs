//! Reference of seed 003's augmentation.

use super::{gaussian_blur, normalize, resize, roi_align, rotate, to_float};
use streamline::spec::image::{AugmentConfig, AugmentDraw, ResizeMode, Shape};

/// The bound of the fused augmentation against [`augment`], from its error analysis: `(delta,
/// tol)`, the rotation's coordinate error to pass to [`augment`] and the largest difference
/// allowed for an output not near a nearest-neighbour tie, for standard deviations of at
/// least 0.5. The budget, in units of the largest value `v` (255, or 1 scaled) over that std:
/// crop samples `10u`; resize (`delta_r = 4u crop`) `2 delta_r + 8u`; rotation (`delta = 32u
/// (2 size + 2)`, with a quarter more margin) `4 delta + 16u`; blur `(4k + 24)u`; normalise
/// `4u`.
pub fn augment_bound(cfg: &AugmentConfig) -> (f64, f64) {
    let u = f64::powi(2.0, -24);
    let vmax = if cfg.scale { 1.0 } else { 255.0 };
    let delta = 32.0 * u * (2 * cfg.size + 2) as f64 * 1.25;
    let k = cfg.kernel_size as f64;
    let tol = (10.0 * u
        + 8.0 * u * cfg.crop as f64
        + 8.0 * u
        + 4.0 * delta
        + 16.0 * u
        + (4.0 * k + 24.0) * u
        + 4.0 * u)
        * vmax
        / 0.5;
    (delta, tol)
}

/// Seed 003's transform composed from the references above: to float, `roi_align` crop
/// (aligned=False, sampling_ratio=-1), resize up (antialiased bilinear), rotate (zero fill),
/// blur, normalize. Returns the values and, for nearest rotation, the set of outputs whose blur
/// window contains an ambiguous rotated pixel (see [`rotate`]).
pub fn augment(
    x: &[u8],
    s: Shape,
    cfg: &AugmentConfig,
    draw: &AugmentDraw,
    delta: f64,
) -> (Vec<f64>, Vec<bool>) {
    let f: Vec<f64> = to_float(x, cfg.scale).iter().map(|&v| v as f64).collect();
    let crop = roi_align(&f, s, &draw.roi_boxes(), &cfg.crop_options());
    let cs = s.with_size(cfg.crop, cfg.crop);
    let z = resize(&crop, cs, cfg.size, cfg.size, ResizeMode::BilinearAntialias);
    let os = s.with_size(cfg.size, cfg.size);
    let r = rotate(&z, os, &draw.angles, cfg.interp, None, delta);
    let sig: Vec<(f64, f64)> = draw.sigmas.iter().map(|&v| (v as f64, v as f64)).collect();
    let k = cfg.kernel_size;
    let b = gaussian_blur(&r.values, os, k, k, &sig);
    let y = normalize(&b, os, &cfg.mean, &cfg.std);
    // Outputs depending on an ambiguous rotated pixel.
    let mut amb = vec![false; os.len()];
    let rad = (k / 2) as i64;
    for &key in r.ambiguous.keys() {
        let j = key % os.w;
        let i = (key / os.w) % os.h;
        let plane = key / (os.w * os.h);
        for a in -rad..=rad {
            for bb in -rad..=rad {
                // Every output whose reflected window reaches (i, j).
                for (oi, oj) in [(i as i64 + a, j as i64 + bb)] {
                    for ri in [oi, -oi, 2 * (os.h as i64 - 1) - oi] {
                        for rj in [oj, -oj, 2 * (os.w as i64 - 1) - oj] {
                            if ri >= 0 && rj >= 0 && (ri as usize) < os.h && (rj as usize) < os.w {
                                amb[(plane * os.h + ri as usize) * os.w + rj as usize] = true;
                            }
                        }
                    }
                }
            }
        }
    }
    (y, amb)
}
