//! The color-jitter kernels against the f64 reference and its error bound, on random batches
//! of awkward shapes, with the output poisoned and every value checked; and the embedded PTX against
//! the kernels' declarations (everywhere).

use color_jitter::{reference, ColorJitter, Jitter};
use proptest::prelude::*;
use streamline::engine::{DeviceBuffer, StreamPool};
use streamline::ops::image::Shape;
use streamline_testing::{check_written, gpu, gpu_property, poisoned};

#[test]
fn the_embedded_ptx_holds_both_kernels_with_their_bounds() {
    let image = color_jitter::KERNELS.image_for(9, 0).unwrap();
    for k in [
        color_jitter_kernels::jitter_gray_sum,
        color_jitter_kernels::color_jitter,
    ] {
        let e = image.entry(k).unwrap();
        assert_eq!(e.bounds.map(|b| b.max_threads), Some(256));
    }
}

#[test]
fn factors_outside_their_range_are_refused() {
    let j = Jitter {
        brightness: 1.0,
        contrast: 0.1,
        saturation: 0.1,
    };
    let e = j.draw(4, 1).unwrap_err().to_string();
    assert!(e.contains("brightness 1"), "{e}");
}

#[test]
fn jitter_matches_the_reference() {
    let strategy = (
        1usize..6,
        1usize..70,
        1usize..70,
        any::<u64>(),
        0.0f32..0.95,
    );
    gpu_property(24, strategy, |(n, h, w, seed, v)| {
        let gpu = gpu().unwrap();
        let pool = StreamPool::with_streams(gpu, 1).unwrap();
        let jitter = Jitter {
            brightness: v,
            contrast: v,
            saturation: v,
        };
        let mut cj = ColorJitter::new(gpu, jitter).unwrap();
        let shape = Shape::new(n, 3, h, w);
        cj.set_batch(&pool, shape, seed).unwrap();
        let x: Vec<f32> = (0..shape.len())
            .map(|i| ((i as u64 ^ seed) % 1024) as f32 / 1023.0)
            .collect();
        let xd = DeviceBuffer::from_slice(&pool, 0, &x).unwrap();
        // The whole output poisoned: `apply` takes whole buffers, so an overrun past them is
        // compute-sanitizer's to find, and every value must be written.
        let mut yd = DeviceBuffer::from_slice(&pool, 0, &poisoned(x.len(), 0)).unwrap();
        let s = pool.stream(0).unwrap();
        cj.apply(s, &xd, &mut yd).unwrap();
        let out = yd.to_vec(s).unwrap();
        let got = check_written(&out, 0).map_err(TestCaseError::fail)?;
        let plane = h * w;
        let (want, bounds) = reference(&x, plane, cj.factors());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            let bound = bounds[i / (3 * plane)];
            prop_assert!(
                (*g as f64 - w).abs() <= bound,
                "element {i}: got {g}, want {w}, bound {bound:e}"
            );
        }
        Ok(())
    });
}
