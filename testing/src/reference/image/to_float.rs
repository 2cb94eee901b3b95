//! Reference of `to_float`.

/// `ToDtype(float32, scale)`: `f32(x) * f32(1/255)` with scale (one rounding), else `f32(x)`.
pub fn to_float(x: &[u8], scale: bool) -> Vec<f32> {
    let s = (1.0f64 / 255.0) as f32 as f64;
    x.iter()
        .map(|&v| {
            if scale {
                (v as f64 * s) as f32
            } else {
                v as f32
            }
        })
        .collect()
}
