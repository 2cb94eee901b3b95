//! Reference of the fused augmentation on a ragged batch (images of their own sizes, one after
//! the other in one buffer): each image alone through [`augment`], with the crop box the device
//! draw maps into it from the output's square.

use super::{augment, augment_device_draw, relayout};
use streamline::spec::image::{AugmentConfig, AugmentDraw, Layout, Shape};

/// Where one image of a ragged batch lies: `height x width` pixels of every channel from byte
/// `offset` (the reference's own copy of the kernels' record).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    pub offset: usize,
    pub height: usize,
    pub width: usize,
}

/// The crop box, in the pixels of an `h x w` image, of a crop drawn at `(top, left)` in the
/// `side x side` square that covers the image's centre (the square of side `min(h, w)` scaled
/// by `f = min(h, w) / side`): `x1 = (w - min) / 2 + left f`, `y1 = (h - min) / 2 + top f`,
/// sides `crop f`. Each product-and-sum rounds once (a fused multiply-add), as the draw's
/// documented formula says.
pub fn ragged_box(h: usize, w: usize, side: usize, crop: usize, top: f32, left: f32) -> [f32; 4] {
    let m = h.min(w);
    let f = m as f32 / side as f32;
    let x1 = left.mul_add(f, (w - m) as f32 * 0.5);
    let y1 = top.mul_add(f, (h - m) as f32 * 0.5);
    let c = crop as f32;
    [x1, y1, c.mul_add(f, x1), c.mul_add(f, y1)]
}

/// The draw the device makes for a ragged batch of images of `sizes` (`height, width`) under
/// `cfg`: the square's draw (`augment_device_draw` for `side x side` images, `side` being
/// `cfg.size`) with each box mapped into its image by [`ragged_box`].
pub fn augment_device_draw_ragged(
    cfg: &AugmentConfig,
    sizes: &[(usize, usize)],
    seed: u64,
    draws: u64,
    per_image_sigma: bool,
) -> AugmentDraw {
    let side = cfg.size;
    let mut d = augment_device_draw(cfg, (sizes.len(), side, side), seed, draws, per_image_sigma);
    for (b, &(h, w)) in d.boxes.iter_mut().zip(sizes) {
        *b = ragged_box(h, w, side, cfg.crop, b[1], b[0]);
    }
    d
}

/// Seed 003's transform of a ragged batch: image `i` of `extents` (stored in layout `layout`,
/// `channels` channels) through [`augment`] alone with box, angle and sigma `i` of `draw`. The
/// outputs follow one another, NCHW, `channels x cfg.size x cfg.size` each; the second vector
/// marks the outputs near a nearest-neighbour tie, as [`augment`]'s does.
pub fn augment_ragged(
    x: &[u8],
    extents: &[Extent],
    channels: usize,
    layout: Layout,
    cfg: &AugmentConfig,
    draw: &AugmentDraw,
    delta: f64,
) -> (Vec<f64>, Vec<bool>) {
    let mut values = Vec::new();
    let mut ambiguous = Vec::new();
    for (i, e) in extents.iter().enumerate() {
        let s = Shape::new(1, channels, e.height, e.width);
        let image = relayout(&x[e.offset..e.offset + s.len()], s, layout, Layout::Nchw);
        let one = AugmentDraw {
            boxes: vec![draw.boxes[i]],
            angles: vec![draw.angles[i]],
            sigmas: vec![draw.sigmas[i]],
        };
        let (v, a) = augment(&image, s, cfg, &one, delta);
        values.extend(v);
        ambiguous.extend(a);
    }
    (values, ambiguous)
}

/// The most bilinear samples a bin of the ragged crop takes over images of `sizes`
/// (`(height, width)`) under a `size` square: `roi_align`'s adaptive grid over a box of
/// `crop * min(h, w) / size` pixels a side, `ceil(min(h, w) / size)` samples a side.
pub fn ragged_most_samples(sizes: &[(usize, usize)], size: usize) -> usize {
    sizes
        .iter()
        .map(|&(h, w)| h.min(w).div_ceil(size).max(1).pow(2))
        .max()
        .unwrap_or(1)
}

/// [`super::augment_bound`] for crops whose bins take up to `samples` bilinear samples each
/// (`roi_align`'s adaptive grid over a box larger than the crop): each further sample adds one
/// rounding of the bin's running sum, `u` of the largest value, to the crop's budget.
pub fn augment_bound_ragged(cfg: &AugmentConfig, samples: usize) -> (f64, f64) {
    let (delta, tol) = super::augment_bound(cfg);
    let vmax = if cfg.scale { 1.0 } else { 255.0 };
    let u = f64::powi(2.0, -24);
    (delta, tol + samples as f64 * u * vmax / 0.5)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boxes_cover_the_centred_square() {
        // A 600 x 800 image under a 256 square: the square is the middle 600 x 600.
        let b = ragged_box(600, 800, 256, 128, 0.0, 0.0);
        assert_eq!(b, [100.0, 0.0, 100.0 + 300.0, 300.0]);
        let b = ragged_box(600, 800, 256, 128, 128.0, 128.0);
        assert_eq!(b, [400.0, 300.0, 700.0, 600.0]);
        // An image smaller than the square: the crop is enlarged.
        let b = ragged_box(128, 128, 256, 128, 64.0, 0.0);
        assert_eq!(b, [0.0, 32.0, 64.0, 96.0]);
    }

    #[test]
    fn ragged_batch_is_each_image_alone() {
        let cfg = AugmentConfig {
            scale: true,
            ..AugmentConfig::seed003(16, 3)
        };
        let sizes = [(20usize, 30usize), (16, 16), (41, 17)];
        let mut x = Vec::new();
        let mut extents = Vec::new();
        for (k, &(h, w)) in sizes.iter().enumerate() {
            extents.push(Extent {
                offset: x.len(),
                height: h,
                width: w,
            });
            x.extend((0..h * w * 3).map(|i| (i * 7 + k * 31) as u8));
        }
        let draw = augment_device_draw_ragged(&cfg, &sizes, 5, 2, true);
        let (v, a) = augment_ragged(&x, &extents, 3, Layout::Nhwc, &cfg, &draw, 0.0);
        assert_eq!(v.len(), 3 * 3 * 16 * 16);
        assert_eq!(a.len(), v.len());
        // The second image alone gives the second output.
        let s = Shape::new(1, 3, 16, 16);
        let e = extents[1];
        let one = relayout(
            &x[e.offset..e.offset + s.len()],
            s,
            Layout::Nhwc,
            Layout::Nchw,
        );
        let d1 = AugmentDraw {
            boxes: vec![draw.boxes[1]],
            angles: vec![draw.angles[1]],
            sigmas: vec![draw.sigmas[1]],
        };
        let (w1, _) = augment(&one, s, &cfg, &d1, 0.0);
        assert_eq!(&v[768..1536], &w1[..]);
    }
}
