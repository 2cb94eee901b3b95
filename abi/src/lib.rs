//! The contract between the GPU kernels and the host.
//!
//! Both sides compile this crate: `gpu-kernels` for `nvptx64-nvidia-cuda`, the host for the
//! machine it runs on. Every kernel takes exactly one `#[repr(C)]` parameter struct by value
//! declared with [`params!`] (typed device addresses, [`DevPtr`] and [`DevPtrMut`], for the memory it reads and writes; every field recorded for the
//! manifest) and is declared once here with [`declare!`]: the host launches the typed [`Kernel`] handle,
//! `gpu-kernels` defines the function against the same declaration (a differing name or
//! parameter type does not compile), and the kernel build checks the PTX's entry points
//! against the declarations, so nothing is restated by hand on either side.
#![no_std]

pub mod heavy;
pub mod hgemm;
pub mod image;
pub mod matmul;
pub mod probe;
pub mod spin;
pub mod train;

pub use streamline_device::{declare, params, DevPtr, DevPtrMut, Kernel, LaunchBounds};

/// How a contiguous elementwise range `[0, n)` splits into a scalar head, a body of 16-byte
/// vectors and a scalar tail, so that both input and output are accessed with 16-byte
/// loads/stores where their alignment allows it.
///
/// `x_addr` and `y_addr` are the byte addresses of the input and output, `elem` the element size
/// in bytes (a power of two not above 16). When the two addresses differ modulo 16 no common
/// vector alignment exists and everything is scalar (`head == n`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VectorSplit {
    /// Elements before the first 16-byte-aligned element.
    pub head: u64,
    /// Number of 16-byte vectors after the head.
    pub vectors: u64,
    /// Elements after the last vector.
    pub tail: u64,
}

impl VectorSplit {
    /// Elements per 16-byte vector for an element of `elem` bytes.
    pub const fn lanes(elem: u64) -> u64 {
        16 / elem
    }

    /// Splits `n` elements of `elem` bytes read at `x_addr` and written at `y_addr`.
    pub const fn new(x_addr: u64, y_addr: u64, n: u64, elem: u64) -> Self {
        let lanes = Self::lanes(elem);
        if x_addr % 16 != y_addr % 16 || !x_addr.is_multiple_of(elem) {
            return VectorSplit {
                head: n,
                vectors: 0,
                tail: 0,
            };
        }
        let mis = x_addr % 16;
        let mut head = if mis == 0 { 0 } else { (16 - mis) / elem };
        if head > n {
            head = n;
        }
        let rest = n - head;
        VectorSplit {
            head,
            vectors: rest / lanes,
            tail: rest % lanes,
        }
    }

    /// Elements handled one at a time (head plus tail).
    pub const fn scalars(&self) -> u64 {
        self.head + self.tail
    }

    /// Index of the `i`-th scalar element (`i < scalars()`): head elements first, then the tail.
    pub const fn scalar_index(&self, i: u64, elem: u64) -> u64 {
        if i < self.head {
            i
        } else {
            self.head + self.vectors * Self::lanes(elem) + (i - self.head)
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::image::FastDiv;
    use std::vec::Vec;

    /// Every element is covered exactly once, vectors start 16-byte aligned on both sides.
    #[test]
    fn split_covers_every_element_once() {
        for elem in [2u64, 4] {
            for xo in (0..32).step_by(elem as usize) {
                for yo in (0..32).step_by(elem as usize) {
                    for n in 0..40u64 {
                        let s = VectorSplit::new(1024 + xo, 4096 + yo, n, elem);
                        let lanes = VectorSplit::lanes(elem);
                        let mut seen = std::vec![0u8; n as usize];
                        for i in 0..s.scalars() {
                            seen[s.scalar_index(i, elem) as usize] += 1;
                        }
                        for v in 0..s.vectors {
                            let first = s.head + v * lanes;
                            assert_eq!((1024 + xo + first * elem) % 16, 0);
                            assert_eq!((4096 + yo + first * elem) % 16, 0);
                            for l in 0..lanes {
                                seen[(first + l) as usize] += 1;
                            }
                        }
                        assert!(
                            seen.iter().all(|&c| c == 1),
                            "elem {elem} xo {xo} yo {yo} n {n}"
                        );
                    }
                }
            }
        }
    }

    /// The fused augmentation's kernel for every channel count, blur path, strip and rotation:
    /// the 7-tap kernels by rotation and strip, the wide ones for both, more than four channels
    /// (never launched) on the 4-channel kernel.
    #[test]
    fn augment_kernel_picks_by_channels_taps_strip_and_rotation() {
        use crate::image::augment_kernel;
        for c in 1..=5u32 {
            let cn = c.min(4);
            for (strip, nearest, want) in [
                (1, true, std::format!("augment_c{cn}")),
                (2, true, std::format!("augment_strip_c{cn}")),
                (1, false, std::format!("augment_bilinear_c{cn}")),
                (3, false, std::format!("augment_bilinear_strip_c{cn}")),
            ] {
                for k in [1, 3, 5, 7] {
                    assert_eq!(augment_kernel(c, k, strip, nearest, false).name(), want);
                }
                assert_eq!(
                    augment_kernel(c, 9, strip, nearest, false).name(),
                    std::format!("augment_wide_c{cn}")
                );
            }
        }
    }

    /// The dyadic kernels: taken for nearest rotation and up to 7 taps where the draw allows
    /// them, the others unchanged.
    #[test]
    fn augment_kernel_picks_dyadic_for_nearest_fast_kernels() {
        use crate::image::augment_kernel;
        for c in 1..=4u32 {
            for k in [1, 3, 7] {
                assert_eq!(
                    augment_kernel(c, k, 1, true, true).name(),
                    std::format!("augment_dyadic_c{c}")
                );
                assert_eq!(
                    augment_kernel(c, k, 2, true, true).name(),
                    std::format!("augment_dyadic_strip_c{c}")
                );
                for strip in [1, 2] {
                    assert_eq!(
                        augment_kernel(c, k, strip, false, true).name(),
                        augment_kernel(c, k, strip, false, false).name()
                    );
                }
            }
            assert_eq!(
                augment_kernel(c, 9, 2, true, true).name(),
                std::format!("augment_wide_c{c}")
            );
        }
        // What `augment_takes_dyadic` says is what the kernel choice does.
        use crate::image::augment_takes_dyadic;
        for k in [1, 3, 7, 9, 15] {
            for nearest in [false, true] {
                for dyadic in [false, true] {
                    let name = augment_kernel(3, k, 2, nearest, dyadic).name();
                    assert_eq!(
                        augment_takes_dyadic(k, nearest, dyadic),
                        name.starts_with("augment_dyadic"),
                        "{name}"
                    );
                }
            }
        }
    }

    /// The dyadic path's condition: whole-pixel boxes of the crop's size inside the image, the
    /// crop enlarged exactly twofold, outputs no larger than the kernels serve; anything else
    /// takes the general kernels.
    #[test]
    fn augment_dyadic_needs_whole_boxes_of_the_crop_enlarged_twofold() {
        use crate::image::augment_dyadic;
        let ok = |boxes: &[[f32; 4]], out: u32| {
            augment_dyadic((128, 128), (out, out), (256, 256), boxes)
        };
        assert!(ok(
            &[[0.0, 0.0, 128.0, 128.0], [128.0, 17.0, 256.0, 145.0]],
            256
        ));
        assert!(ok(&[], 256));
        assert!(!ok(&[[0.0, 0.0, 128.0, 128.0]], 255));
        assert!(!ok(&[[0.0, 0.0, 128.0, 128.0]], 384));
        assert!(!ok(&[[0.5, 0.0, 128.5, 128.0]], 256));
        assert!(!ok(&[[0.0, 0.0, 127.0, 128.0]], 256));
        assert!(!ok(&[[0.0, 0.0, 128.0, 127.75]], 256));
        assert!(!ok(&[[129.0, 0.0, 257.0, 128.0]], 256));
        assert!(!ok(&[[-1.0, 0.0, 127.0, 128.0]], 256));
        assert!(!ok(&[[f32::NAN, 0.0, 128.0, 128.0]], 256));
        assert!(!augment_dyadic(
            (128, 64),
            (256, 256),
            (256, 256),
            &[[0.0, 0.0, 64.0, 128.0]]
        ));
        assert!(augment_dyadic(
            (128, 64),
            (256, 128),
            (256, 256),
            &[[0.0, 0.0, 64.0, 128.0]]
        ));
        // Outputs up to the dyadic kernels' largest side, not beyond.
        use crate::image::AUGMENT_DYADIC_MAX_SIDE as MAX;
        let tall = |out: u32| augment_dyadic((out / 2, 8), (out, 16), (MAX, 8), &[]);
        assert!(tall(MAX));
        assert!(!tall(MAX + 2));
    }

    /// The dyadic strips' later tiles stage within their region at every angle, in every
    /// channel count's entries, and four blocks of every dyadic strip fit an SM's 228 KiB
    /// (each block also takes 1 KiB that the driver reserves).
    #[test]
    fn augment_dyadic_stage_fits_its_region() {
        use crate::image::{augment_dyadic_stage_bound, augment_shared_bytes};
        use crate::image::{AUGMENT_DYADIC_STAGE_BYTES, AUGMENT_FAST_RADIUS};
        let mut most = 0;
        // Steps of a thousandth of a degree: the bound moves by whole lines only.
        for step in 0..=360_000 {
            let (s, c) = (step as f64 / 1000.0).to_radians().sin_cos();
            for entry in [4, 8, 16] {
                most = most.max(augment_dyadic_stage_bound(s, c, entry));
            }
        }
        assert!(most <= AUGMENT_DYADIC_STAGE_BYTES, "{most}");
        let k = 2 * AUGMENT_FAST_RADIUS + 1;
        for c in 1..=4 {
            assert!(
                4 * (augment_shared_bytes(c, k, true) + 1024) <= 228 * 1024,
                "{c}"
            );
        }
    }

    /// The dyadic kernels' composed taps against the resize's and the crop's sampling rules
    /// written out in f64 (torch's bilinear resize, `align_corners=False`; torchvision's
    /// `roi_align` sample at `start + p + 1/2`), for every crop of 1 to 160 pixels, every whole
    /// box start in lines up to 3 pixels longer than the crop, and every resized index.
    #[test]
    fn augment_dyadic_taps_compose_the_resize_and_the_crop() {
        use crate::image::augment_dyadic_taps;
        for crop in 1..=160u32 {
            for n in crop..=crop + 3 {
                for start in 0..=n - crop {
                    for z in 0..2 * crop {
                        // Resize: source point, its two crop pixels and their weights.
                        let src = ((z as f64 + 0.5) * 0.5 - 0.5).max(0.0);
                        let i0 = src.floor() as u32;
                        let i1 = (i0 + 1).min(crop - 1);
                        let l1 = src - i0 as f64;
                        // Every input pixel's weight, in eighths.
                        let mut want = [0.0f64; 4];
                        let base = start + i0;
                        for (p, wp) in [(i0, 1.0 - l1), (i1, l1)] {
                            // roi_align's sample of crop pixel `p`.
                            let y = (start + p) as f64 + 0.5;
                            let lo = y.floor() as u32;
                            let (lo, hi, l) = if lo >= n - 1 {
                                (n - 1, n - 1, 0.0)
                            } else {
                                (lo, lo + 1, y - lo as f64)
                            };
                            want[(lo - base) as usize] += 8.0 * wp * (1.0 - l);
                            want[(hi - base) as usize] += 8.0 * wp * l;
                        }
                        let (got_base, got) = augment_dyadic_taps(z, crop, start, n);
                        assert_eq!(want[3], 0.0, "crop {crop} n {n} start {start} z {z}");
                        assert_eq!(
                            (got_base, got.map(|w| w as f64)),
                            (base, [want[0], want[1], want[2]]),
                            "crop {crop} n {n} start {start} z {z}"
                        );
                    }
                }
            }
        }
    }

    /// The block each augmentation kernel is launched with fills its launch bounds exactly:
    /// seven warps for the one-tile 7-tap kernels, eight for the others.
    #[test]
    fn augment_block_matches_each_kernels_bounds() {
        use crate::image::{augment_block_dim, augment_kernel, AUGMENT_ONE_TILE_WARPS};
        for c in 1..=4u32 {
            for (nearest, dyadic) in [(true, false), (false, false), (true, true)] {
                for strip in [1, 2, 8] {
                    for k in [1, 3, 7, 9, 31] {
                        let kernel = augment_kernel(c, k, strip, nearest, dyadic);
                        let (x, y, z) = augment_block_dim(kernel);
                        let bounds = kernel.bounds().expect("augment kernels declare bounds");
                        assert_eq!(x * y * z, bounds.max_threads, "{}", kernel.name());
                        let one_tile = k <= 7 && strip == 1;
                        assert_eq!(y == AUGMENT_ONE_TILE_WARPS, one_tile, "{}", kernel.name());
                    }
                }
            }
        }
    }

    /// `FastDiv` against the integer division for divisors of every size (powers of two and
    /// their neighbours included) and numerators up to `2^31 - 1`.
    #[test]
    fn fast_div_is_exact() {
        let mut divisors: Vec<u32> = (1..=300).collect();
        for k in 1..31 {
            let p = 1u32 << k;
            divisors.extend([p - 1, p, p + 1]);
        }
        divisors.extend([(1 << 31) - 1, 6553, 65535, 65536 * 3 + 7]);
        let mut x = 0x2545_f491u64;
        for &d in &divisors {
            let f = FastDiv::new(d);
            let check = |n: u32| assert_eq!(f.divmod(n), (n / d, n % d), "{n} / {d}");
            for n in 0..2000 {
                check(n);
            }
            for k in 0..31 {
                let p = 1u32 << k;
                check(p - 1);
                check(p);
            }
            check((1 << 31) - 1);
            for m in 1..64u32 {
                if let Some(v) = d.checked_mul(m) {
                    if v < 1 << 31 {
                        check(v - 1);
                        check(v);
                    }
                }
            }
            for _ in 0..2000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                check((x as u32) >> 1);
            }
        }
    }
}
