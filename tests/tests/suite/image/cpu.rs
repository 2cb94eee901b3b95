//! Properties of the references alone, on the CPU.

use super::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, failure_persistence: None, ..Default::default() })]

    /// A blur of a constant image is that constant (the weights sum to 1, reflection keeps
    /// every tap inside).
    #[test]
    fn reference_blur_of_constant_is_constant(
        s in shape(), a in 0usize..16, sig in 0.05f64..40.0, v in -100.0f64..100.0
    ) {
        let k = (2 * a + 1).min(2 * s.h.min(s.w) - 1);
        let x = vec![v; s.len()];
        let y = reference::gaussian_blur(&x, s, k, k, &vec![(sig, sig); s.n]);
        for o in y {
            prop_assert!((o - v).abs() <= 1e-12 * v.abs().max(1.0));
        }
    }

    /// Rotation by 0 degrees (nearest) is the identity.
    #[test]
    fn reference_rotate_by_zero_is_identity(s in shape(), seed in any::<u64>()) {
        let x: Vec<f64> = values(s.len(), seed).iter().map(|&v| v as f64).collect();
        let r = reference::rotate(&x, s, &vec![0.0; s.n], Interp::Nearest, None, 0.0);
        prop_assert_eq!(r.values, x);
    }

    /// roi_align with `aligned=true`, a box covering the image and the output the image's size
    /// is the identity: every sample lands on a pixel centre.
    #[test]
    fn reference_roi_align_full_box_is_identity(s in shape(), seed in any::<u64>()) {
        let x: Vec<f64> = values(s.len(), seed).iter().map(|&v| v as f64).collect();
        let boxes: Vec<[f32; 5]> =
            (0..s.n).map(|n| [n as f32, 0.0, 0.0, s.w as f32, s.h as f32]).collect();
        let o = RoiAlign { out_h: s.h, out_w: s.w, spatial_scale: 1.0, sampling_ratio: -1, aligned: true };
        let y = reference::roi_align(&x, s, &boxes, &o);
        for (a, b) in y.iter().zip(&x) {
            prop_assert!((a - b).abs() <= 1e-12 * b.abs().max(1.0), "{} vs {}", a, b);
        }
    }

    /// Normalize then un-normalize (`x * std + mean`) gives back the input.
    #[test]
    fn reference_normalize_round_trips(
        s in shape(), seed in any::<u64>(), m in -3.0f32..3.0, sd in 0.01f32..10.0
    ) {
        let x: Vec<f64> = values(s.len(), seed).iter().map(|&v| v as f64).collect();
        let mean = vec![m; s.c];
        let std: Vec<f32> = (0..s.c).map(|c| sd * (c + 1) as f32).collect();
        let y = reference::normalize(&x, s, &mean, &std);
        for (i, (a, b)) in y.iter().zip(&x).enumerate() {
            let c = (i / (s.h * s.w)) % s.c;
            let back = a * std[c] as f64 + mean[c] as f64;
            prop_assert!((back - b).abs() <= 1e-12 * (b.abs() + m.abs() as f64 + 1.0));
        }
    }

    /// The separable resize reference with equal sizes is the identity in every mode.
    #[test]
    fn reference_resize_same_size_is_identity(s in shape(), seed in any::<u64>()) {
        let x: Vec<f64> = values(s.len(), seed).iter().map(|&v| v as f64).collect();
        for mode in [ResizeMode::Bilinear, ResizeMode::BilinearAntialias, ResizeMode::Nearest] {
            let y = reference::resize(&x, s, s.h, s.w, mode);
            for (a, b) in y.iter().zip(&x) {
                prop_assert!((a - b).abs() <= 1e-12 * b.abs().max(1.0));
            }
        }
    }
}
