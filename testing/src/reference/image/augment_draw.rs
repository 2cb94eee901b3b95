//! The fused augmentation's draw on the device, on the CPU: Philox4x32-10 written from its
//! paper (Salmon et al., SC 2011, and the Random123 library's `philox4x32_R`) with 128-bit
//! products, and the draw's formula as `AugmentDrawParams` states it.

use streamline::spec::image::{AugmentConfig, AugmentDraw};

/// Philox4x32 with `rounds` rounds of the counter `ctr` under `key`.
pub fn philox4x32(rounds: u32, ctr: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    const MUL: [u128; 2] = [0xD251_1F53, 0xCD9E_8D57];
    const BUMP: [u32; 2] = [0x9E37_79B9, 0xBB67_AE85];
    let mut x = ctr;
    let mut k = key;
    for r in 0..rounds {
        if r > 0 {
            k[0] = k[0].wrapping_add(BUMP[0]);
            k[1] = k[1].wrapping_add(BUMP[1]);
        }
        let p0 = MUL[0] * x[0] as u128;
        let p1 = MUL[1] * x[2] as u128;
        let (hi0, lo0) = ((p0 >> 32) as u32, (p0 & 0xFFFF_FFFF) as u32);
        let (hi1, lo1) = ((p1 >> 32) as u32, (p1 & 0xFFFF_FFFF) as u32);
        x = [hi1 ^ x[1] ^ k[0], lo1, hi0 ^ x[3] ^ k[1], lo0];
    }
    x
}

/// The draw that the device makes for `n` images of `h x w` under `cfg` from a generator with
/// `seed` that has made `draws` draws before (`Augment::drawn_on_device`).
pub fn augment_device_draw(
    cfg: &AugmentConfig,
    (n, h, w): (usize, usize, usize),
    seed: u64,
    draws: u64,
    per_image_sigma: bool,
) -> AugmentDraw {
    let key = [seed as u32, (seed >> 32) as u32];
    let words = |i: usize| philox4x32(10, [draws as u32, (draws >> 32) as u32, i as u32, 0], key);
    // Top 24 bits over 2^24, and the high word of a 64-bit product: both exact in f64.
    let unit = |v: u32| ((v >> 8) as f64 / 16_777_216.0) as f32;
    let below = |v: u32, m: usize| ((v as u64 * m as u64) >> 32) as f32;
    let (lo, hi) = cfg.sigma;
    let span = if hi > lo { hi - lo } else { 0.0 };
    let deg = cfg.degrees;
    let c = cfg.crop as f32;
    let batch = words(0)[3];
    let mut d = AugmentDraw {
        boxes: Vec::with_capacity(n),
        angles: Vec::with_capacity(n),
        sigmas: Vec::with_capacity(n),
    };
    for i in 0..n {
        let v = words(i);
        let top = below(v[0], h - cfg.crop + 1);
        let left = below(v[1], w - cfg.crop + 1);
        d.boxes.push([left, top, left + c, top + c]);
        d.angles.push((2.0 * deg).mul_add(unit(v[2]), -deg));
        let s = if per_image_sigma { v[3] } else { batch };
        d.sigmas.push(span.mul_add(unit(s), lo));
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random123's known-answer vectors for philox4x32_10 (`kat_vectors`).
    #[test]
    fn philox_matches_the_published_vectors() {
        assert_eq!(
            philox4x32(10, [0; 4], [0; 2]),
            [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]
        );
        assert_eq!(
            philox4x32(10, [u32::MAX; 4], [u32::MAX; 2]),
            [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]
        );
        assert_eq!(
            philox4x32(
                10,
                [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
                [0xa409_3822, 0x299f_31d0]
            ),
            [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]
        );
    }

    #[test]
    fn the_device_code_gives_the_same_words() {
        use streamline_device::random::philox4x32_10;
        for i in 0..1000u32 {
            let c = [i.wrapping_mul(2_654_435_761), i, !i, i << 7];
            let k = [i ^ 0x5555_5555, i.rotate_left(13)];
            assert_eq!(philox4x32_10(c, k), philox4x32(10, c, k));
        }
    }

    #[test]
    fn draws_are_inside_their_ranges_and_differ_per_draw() {
        let cfg = AugmentConfig::seed003(64, 3);
        let a = augment_device_draw(&cfg, (16, 50, 70), 7, 0, true);
        let b = augment_device_draw(&cfg, (16, 50, 70), 7, 1, true);
        assert_ne!(a, b);
        for (i, bx) in a.boxes.iter().enumerate() {
            assert!(bx[0] >= 0.0 && bx[2] <= 70.0 && bx[1] >= 0.0 && bx[3] <= 50.0);
            assert_eq!((bx[2] - bx[0], bx[3] - bx[1]), (32.0, 32.0));
            assert!((-45.0..45.0).contains(&a.angles[i]));
            assert!((0.1..2.0).contains(&a.sigmas[i]));
        }
        let one = augment_device_draw(&cfg, (16, 50, 70), 7, 0, false);
        assert!(one.sigmas.iter().all(|s| *s == one.sigmas[0]));
    }
}
