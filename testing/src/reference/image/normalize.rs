//! Reference of `normalize`.

use streamline::spec::image::Shape;

/// `Normalize(mean, std)`: `(x - mean[c]) / std[c]`.
pub fn normalize(x: &[f64], s: Shape, mean: &[f32], std: &[f32]) -> Vec<f64> {
    let mut y = vec![0.0; x.len()];
    for n in 0..s.n {
        for c in 0..s.c {
            for i in 0..s.h * s.w {
                let k = (n * s.c + c) * s.h * s.w + i;
                y[k] = (x[k] - mean[c] as f64) / std[c] as f64;
            }
        }
    }
    y
}
