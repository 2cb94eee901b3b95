//! The image operations' descriptions: torchvision's functions on one image `(C, H, W)` or a
//! batch `(N, C, H, W)` (or `H, W, C` layouts where an operation takes a `layout`), and seed
//! 003's fused augmentation.

use super::args::{Args, Boxes, TensorArg};
use super::{arg, Arg, Dtype, Extra, Op, Out, Tensor, Ty};
use crate::device::{Names, IMAGE};
use cudarc::driver::CudaStream;
use std::sync::Arc;
use streamline::ops::image::{
    self, Augment, AugmentConfig, AugmentDraw, ChannelStats, Interp, Layout, PerImage, ResizeMode,
    RoiAlign, RoiBoxes, Shape, Sigma, EXTENT_WORDS,
};
use streamline::{Error, Result};

const U8: &[Dtype] = &[Dtype::U8];
const F32: &[Dtype] = &[Dtype::F32];

/// An image or a batch of images of `dtypes`.
const fn images(dtypes: &'static [Dtype]) -> Ty {
    Ty::Tensor(Tensor::of(dtypes, 3, 4))
}

/// A batch of images of `dtypes`.
const fn batch(dtypes: &'static [Dtype]) -> Ty {
    Ty::Tensor(Tensor::of(dtypes, 4, 4))
}

/// The batch shape of an image tensor in `layout` (one image of rank 3 is a batch of one).
fn shape_of(t: &TensorArg, layout: Layout, name: &'static str) -> Result<Shape> {
    let d = match t.shape[..] {
        [a, b, c] => [1, a, b, c],
        [a, b, c, d] => [a, b, c, d],
        _ => {
            return Err(Error::arg(
                name,
                format!("shape {:?}: needs 3 or 4 dimensions", t.shape),
            ))
        }
    };
    Ok(layout.shape(d))
}

/// The dimensions of `sh` in `layout` at `rank` (3: without the batch of one).
fn dims(sh: Shape, layout: Layout, rank: usize) -> Vec<usize> {
    layout.dims(sh)[4 - rank.min(4)..].to_vec()
}

/// `inpt`'s shape in its `layout`, the output's layout, and the rank of both.
fn relayout(a: &Args) -> Result<(Shape, Layout, Layout, usize)> {
    let x = a.tensor("inpt")?;
    let src = Layout::parse("layout", a.str("layout")?)?;
    let dst = Layout::parse("output_layout", a.str("output_layout")?)?;
    let sh = shape_of(x, src, "x")?;
    sh.check("x")?;
    Ok((sh, src, dst, x.shape.len()))
}

/// `inpt`'s shape in its `layout` (input and output alike), the layout, and the rank.
fn laid_out(a: &Args) -> Result<(Shape, Layout, usize)> {
    let x = a.tensor("inpt")?;
    let layout = Layout::parse("layout", a.str("layout")?)?;
    let sh = shape_of(x, layout, "x")?;
    sh.check("x")?;
    Ok((sh, layout, x.shape.len()))
}

/// `ToDtype(float32, scale)` of uint8 images, converting the layout in the same pass.
pub const TO_FLOAT: Op = Op {
    name: "to_float",
    args: &[
        arg("inpt", images(U8)),
        arg("scale", Ty::Bool),
        arg("layout", Ty::Str),
        arg("output_layout", Ty::Str),
    ],
    out: Out::Of(Dtype::F32),
    out_rows: false,
    in_place: false,
    names: IMAGE,
    shape: |a| {
        let (sh, _, dst, rank) = relayout(a)?;
        Ok(dims(sh, dst, rank))
    },
    run: |g, s, a, y| {
        let (sh, src, dst, _) = relayout(a)?;
        let (x, mut y) = (a.tensor("inpt")?.on(s), y.on(s));
        image::to_float_relayout(g, s, sh, (&x, src), (&mut y, dst), a.bool("scale")?)?;
        Ok(Extra::Nothing)
    },
};

/// `(inpt - mean[c]) / std[c]` per channel, NCHW or NHWC.
pub const NORMALIZE: Op = Op {
    name: "normalize",
    args: &[
        arg("inpt", images(F32)),
        arg("mean", Ty::Floats),
        arg("std", Ty::Floats),
        arg("layout", Ty::Str),
    ],
    out: Out::Of(Dtype::F32),
    out_rows: false,
    in_place: true,
    names: IMAGE,
    shape: |a| {
        let (sh, layout, rank) = laid_out(a)?;
        image::check_mean_std(&a.f32s("mean")?, &a.f32s("std")?, Some(sh.c))?;
        Ok(dims(sh, layout, rank))
    },
    run: |g, s, a, y| {
        let (sh, layout, _) = laid_out(a)?;
        let stats = ChannelStats::upload(s, &a.f32s("mean")?, &a.f32s("std")?)?;
        let (x, mut y) = (a.tensor("inpt")?.on(s), y.on(s));
        image::normalize_in(g, s, layout, sh, &x, &stats, &mut y)?;
        Ok(Extra::Nothing)
    },
};

/// `inpt` to `size` `[h, w]`: bilinear (antialiased when shrinking, if asked) or nearest,
/// converting the layout in the same pass.
pub const RESIZE: Op = Op {
    name: "resize",
    args: &[
        arg("inpt", images(F32)),
        arg("size", Ty::Ints),
        arg("interpolation", Ty::Str),
        arg("antialias", Ty::Bool),
        arg("layout", Ty::Str),
        arg("output_layout", Ty::Str),
    ],
    out: Out::Of(Dtype::F32),
    out_rows: false,
    in_place: false,
    names: IMAGE,
    shape: |a| {
        let r = resize_args(a)?;
        Ok(dims(r.shape.with_size(r.size[0], r.size[1]), r.to, r.rank))
    },
    run: |g, s, a, y| {
        let r = resize_args(a)?;
        let (x, mut y) = (a.tensor("inpt")?.on(s), y.on(s));
        let size = (r.size[0], r.size[1]);
        image::resize_relayout(g, s, r.shape, (&x, r.from), size, r.mode, (&mut y, r.to))?;
        Ok(Extra::Nothing)
    },
};

/// `resize`'s arguments, checked: the input's shape, layouts and rank, the size and the mode.
struct Resize {
    shape: Shape,
    from: Layout,
    to: Layout,
    rank: usize,
    size: [usize; 2],
    mode: ResizeMode,
}

fn resize_args(a: &Args) -> Result<Resize> {
    let (sh, src, dst, rank) = relayout(a)?;
    let size = a.usize_array::<2>("size")?;
    sh.with_size(size[0], size[1]).check("size")?;
    let mode = match (
        Interp::parse("interpolation", a.str("interpolation")?)?,
        a.bool("antialias")?,
    ) {
        (Interp::Nearest, _) => ResizeMode::Nearest,
        (Interp::Bilinear, false) => ResizeMode::Bilinear,
        (Interp::Bilinear, true) => ResizeMode::BilinearAntialias,
    };
    Ok(Resize {
        shape: sh,
        from: src,
        to: dst,
        rank,
        size,
        mode,
    })
}

/// Image `i` rotated by `angle[i]` degrees counter-clockwise about its centre, converting the
/// layout in the same pass.
pub const ROTATE: Op = Op {
    name: "rotate",
    args: &[
        arg("inpt", images(F32)),
        arg("angle", Ty::Floats),
        arg("interpolation", Ty::Str),
        arg("fill", Ty::OptFloat),
        arg("layout", Ty::Str),
        arg("output_layout", Ty::Str),
    ],
    out: Out::Of(Dtype::F32),
    out_rows: false,
    in_place: false,
    names: IMAGE,
    shape: |a| {
        let (sh, _, dst, rank) = relayout(a)?;
        rotate_args(a, sh)?;
        Ok(dims(sh, dst, rank))
    },
    run: |g, s, a, y| {
        let (sh, src, dst, _) = relayout(a)?;
        let (angles, mode) = rotate_args(a, sh)?;
        let angles = PerImage::upload(s, "angle", &angles)?;
        let (x, mut y) = (a.tensor("inpt")?.on(s), y.on(s));
        let fill = a.opt_f32("fill")?;
        image::rotate_relayout(g, s, sh, (&x, src), &angles, mode, fill, (&mut y, dst))?;
        Ok(Extra::Nothing)
    },
};

fn rotate_args(a: &Args, sh: Shape) -> Result<(Vec<f32>, Interp)> {
    let angles = a.f32s("angle")?;
    if angles.len() != sh.n {
        return Err(Error::arg(
            "angle",
            format!(
                "has {} values; needs one per image ({})",
                angles.len(),
                sh.n
            ),
        ));
    }
    Ok((
        angles,
        Interp::parse("interpolation", a.str("interpolation")?)?,
    ))
}

/// Gaussian blur with reflect padding, NCHW or NHWC; `sigma` is `[sx, sy]` for every image or
/// `[sx0, sy0, sx1, sy1, ...]`, a pair per image.
pub const GAUSSIAN_BLUR: Op = Op {
    name: "gaussian_blur",
    args: &[
        arg("inpt", images(F32)),
        arg("kernel_size", Ty::Ints),
        arg("sigma", Ty::Floats),
        arg("layout", Ty::Str),
    ],
    out: Out::Of(Dtype::F32),
    out_rows: false,
    in_place: false,
    names: IMAGE,
    shape: |a| {
        let b = blur_args(a)?;
        Ok(dims(b.shape, b.layout, b.rank))
    },
    run: |g, s, a, y| {
        let b = blur_args(a)?;
        let (x, mut y) = (a.tensor("inpt")?.on(s), y.on(s));
        let (k, (sh, layout)) = ((b.k[0], b.k[1]), (b.shape, b.layout));
        if let [sx, sy] = b.sigma[..] {
            let sigma = Sigma::Global(sx, sy);
            image::gaussian_blur_in(g, s, layout, sh, &x, k, sigma, &mut y)?;
        } else {
            let per = PerImage::upload(s, "sigma", &b.sigma)?;
            let sigma = Sigma::PerImage(&per);
            image::gaussian_blur_in(g, s, layout, sh, &x, k, sigma, &mut y)?;
        }
        Ok(Extra::Nothing)
    },
};

/// `gaussian_blur`'s arguments, checked: the input's shape, layout and rank, the kernel size
/// and the sigmas (a pair, or a pair per image).
struct Blur {
    shape: Shape,
    layout: Layout,
    rank: usize,
    k: [usize; 2],
    sigma: Vec<f32>,
}

fn blur_args(a: &Args) -> Result<Blur> {
    let (sh, layout, rank) = laid_out(a)?;
    let k = a.usize_array::<2>("kernel_size")?;
    image::check_kernel_size("kernel_size", k[0], sh.w, "width")?;
    image::check_kernel_size("kernel_size", k[1], sh.h, "height")?;
    let sigma = a.f32s("sigma")?;
    for v in &sigma {
        image::check_sigma("sigma", *v)?;
    }
    if sigma.len() != 2 && sigma.len() != 2 * sh.n {
        return Err(Error::arg(
            "sigma",
            format!(
                "has {} values; needs 2 (all images) or 2 per image ({})",
                sigma.len(),
                2 * sh.n
            ),
        ));
    }
    Ok(Blur {
        shape: sh,
        layout,
        rank,
        k,
        sigma,
    })
}

/// What `roi_align` and its backward name `input` and `out`.
const ROI: Names = &[("x", "input"), ("y", "out")];

/// The arguments after the boxes, shared by `roi_align` and its backward.
const fn roi_args(first: Arg) -> [Arg; 6] {
    [
        first,
        arg("boxes", Ty::Boxes),
        arg("output_size", Ty::Ints),
        arg("spatial_scale", Ty::Float),
        arg("sampling_ratio", Ty::Int),
        arg("aligned", Ty::Bool),
    ]
}

/// The options of a `roi_align` call, and the boxes' count after their checks against a batch
/// of `sh` (host rows: every box; device boxes: their shape).
fn roi_options(a: &Args, sh: Shape) -> Result<(RoiAlign, Shape)> {
    let [out_h, out_w] = a.usize_array::<2>("output_size")?;
    let sampling_ratio = a.int("sampling_ratio")?;
    let o = RoiAlign {
        out_h,
        out_w,
        spatial_scale: a.f32("spatial_scale")?,
        // Beyond i32, as far as the checks go: above 256 is refused, <= 0 means adaptive.
        sampling_ratio: sampling_ratio.clamp(i32::MIN.into(), i32::MAX.into()) as i32,
        aligned: a.bool("aligned")?,
    };
    let out = match a.boxes("boxes")? {
        Boxes::Host(rows) => image::check_roi_align(sh, rows, &o)?,
        Boxes::Device(t) => {
            if t.shape.len() != 2 || t.shape[1] != 5 || t.shape[0] == 0 {
                return Err(Error::arg(
                    "boxes",
                    format!(
                        "shape {:?}: needs (K, 5) with K >= 1: [batch_index, x1, y1, x2, y2]",
                        t.shape
                    ),
                ));
            }
            streamline::spec::image::check_roi_options(sh, t.shape[0], &o)?
        }
    };
    Ok((o, out))
}

/// The boxes on the device: uploaded from the host rows, or the caller's tensor read in place.
fn roi_boxes(a: &Args, s: &Arc<CudaStream>) -> Result<RoiBoxes> {
    match a.boxes("boxes")? {
        Boxes::Host(rows) => RoiBoxes::upload(s, rows),
        Boxes::Device(t) => {
            if t.dtype != Dtype::F32 {
                return Err(Error::arg(
                    "boxes",
                    format!("dtype {}: needs float32", t.dtype.name()),
                ));
            }
            // SAFETY: the Python layer took the tensor from a CUDA float32 array of this
            // device that the caller holds for the call; work on it is ordered by the caller's
            // stream.
            unsafe { RoiBoxes::on_device(&t.on::<f32>(s), s) }
        }
    }
}

/// torchvision's `roi_align`: a `(K, C, out_h, out_w)` crop per box.
pub const ROI_ALIGN: Op = Op {
    name: "roi_align",
    args: &roi_args(arg("input", batch(F32))),
    out: Out::Of(Dtype::F32),
    out_rows: false,
    in_place: false,
    names: ROI,
    shape: |a| {
        let sh = shape_of(a.tensor("input")?, Layout::Nchw, "x")?;
        let (_, out) = roi_options(a, sh)?;
        Ok(dims(out, Layout::Nchw, 4))
    },
    run: |g, s, a, y| {
        let x = a.tensor("input")?;
        let sh = shape_of(x, Layout::Nchw, "x")?;
        let (o, _) = roi_options(a, sh)?;
        let boxes = roi_boxes(a, s)?;
        image::roi_align(g, s, sh, &x.on(s), &boxes, o, &mut y.on(s))?;
        Ok(Extra::Nothing)
    },
};

/// The arguments of `roi_align`'s backward: its output's gradient first, the input's shape
/// and whether to run without atomics last.
const BACKWARD_ARGS: [Arg; 8] = {
    let r = roi_args(arg("grad", batch(F32)));
    [
        r[0],
        r[1],
        arg("input_shape", Ty::Ints),
        r[2],
        r[3],
        r[4],
        r[5],
        arg("deterministic", Ty::Bool),
    ]
};

/// The input's shape of a backward call, checked against the gradient and the boxes.
fn backward_shape(a: &Args) -> Result<(Shape, RoiAlign)> {
    let [n, c, h, w] = a.usize_array::<4>("input_shape")?;
    let sh = Shape::new(n, c, h, w);
    let (o, out) = roi_options(a, sh)?;
    let g = a.tensor("grad")?;
    let want = [out.n, out.c, out.h, out.w];
    if g.shape[1..] != want[1..] {
        return Err(Error::arg(
            "grad",
            format!(
                "has shape {:?}; needs (K, {}, {}, {})",
                g.shape, out.c, out.h, out.w
            ),
        ));
    }
    if g.shape[0] != out.n {
        return Err(Error::arg(
            "grad",
            format!("has {} boxes' gradients; boxes has {}", g.shape[0], out.n),
        ));
    }
    Ok((sh, o))
}

/// The gradient of `roi_align` with respect to its input, from its output's gradient `grad`;
/// `deterministic`: without atomics, the same bits on every run.
pub const ROI_ALIGN_BACKWARD: Op = Op {
    name: "roi_align_backward",
    args: &BACKWARD_ARGS,
    out: Out::Of(Dtype::F32),
    out_rows: false,
    in_place: false,
    names: &[("grad_y", "grad"), ("grad_x", "out")],
    shape: |a| {
        let (sh, _) = backward_shape(a)?;
        Ok(dims(sh, Layout::Nchw, 4))
    },
    run: |g, s, a, y| {
        let (sh, o) = backward_shape(a)?;
        let boxes = roi_boxes(a, s)?;
        let gy = a.tensor("grad")?.on(s);
        let det = a.bool("deterministic")?;
        image::roi_align_backward(g, s, sh, &gy, &boxes, o, &mut y.on(s), det)?;
        Ok(Extra::Nothing)
    },
};

/// The augmentation's settings, which follow its input (and its generator's state).
const SETTINGS: [Arg; 11] = [
    arg("size", Ty::Int),
    arg("crop", Ty::Int),
    arg("degrees", Ty::Float),
    arg("interpolation", Ty::Str),
    arg("kernel_size", Ty::Int),
    arg("sigma", Ty::Floats),
    arg("scale", Ty::Bool),
    arg("mean", Ty::Floats),
    arg("std", Ty::Floats),
    arg("layout", Ty::Str),
    arg("output_layout", Ty::Str),
];

/// `inpt`, the settings from index `at`, and `last` after them.
const fn augment_args<const N: usize>(at: usize, last: &[Arg]) -> [Arg; N] {
    let mut out = [arg("inpt", batch(U8)); N];
    let mut i = 0;
    while i < SETTINGS.len() {
        out[at + i] = SETTINGS[i];
        i += 1;
    }
    let mut j = 0;
    while j < last.len() {
        out[at + SETTINGS.len() + j] = last[j];
        j += 1;
    }
    out
}

const AUGMENT_ARGS: [Arg; 15] = augment_args(
    1,
    &[
        arg("seed", Ty::Int),
        arg("per_image_sigma", Ty::Bool),
        arg("draw", Ty::Draw),
    ],
);

const AUGMENT_DRAWN_ARGS: [Arg; 14] = {
    let state = Tensor {
        mutated: true,
        ..Tensor::of(&[Dtype::I32], 1, 1)
    };
    let mut a = augment_args(2, &[arg("per_image_sigma", Ty::Bool)]);
    a[1] = arg("state", Ty::Tensor(state));
    a
};

/// The augmentation's configuration as the settings give it (checked against a shape by the
/// caller).
fn settings(a: &Args) -> Result<AugmentConfig> {
    let sigma = a.f32s("sigma")?;
    let [lo, hi] = sigma[..] else {
        return Err(Error::arg(
            "sigma",
            format!("{sigma:?}: needs two values (a range)"),
        ));
    };
    let cfg = AugmentConfig {
        crop: a.usize("crop")?,
        size: a.usize("size")?,
        degrees: a.f32("degrees")?,
        interp: Interp::parse("interpolation", a.str("interpolation")?)?,
        kernel_size: a.usize("kernel_size")?,
        sigma: (lo, hi),
        scale: a.bool("scale")?,
        mean: a.f32s("mean")?,
        std: a.f32s("std")?,
    };
    Ok(cfg)
}

/// The augmentation's input shape (NCHW), configuration and layouts, checked.
fn augment_config(a: &Args) -> Result<(Shape, AugmentConfig, Layout, Layout)> {
    let src = Layout::parse("layout", a.str("layout")?)?;
    let dst = Layout::parse("output_layout", a.str("output_layout")?)?;
    let sh = shape_of(a.tensor("inpt")?, src, "x")?;
    let cfg = settings(a)?;
    cfg.check(sh)?;
    Ok((sh, cfg, src, dst))
}

fn augment_shape(a: &Args) -> Result<Vec<usize>> {
    let (sh, cfg, _, dst) = augment_config(a)?;
    Ok(dims(sh.with_size(cfg.size, cfg.size), dst, 4))
}

/// Seed 003's augmentation in one kernel, its random values drawn on the host from `seed`, or
/// given (`draw`, direct calls only); returns the draw.
pub const AUGMENT: Op = Op {
    name: "augment",
    args: &AUGMENT_ARGS,
    out: Out::Of(Dtype::F32),
    out_rows: false,
    in_place: false,
    names: IMAGE,
    shape: augment_shape,
    run: |g, s, a, y| {
        let (sh, cfg, src, dst) = augment_config(a)?;
        // The schema's int is signed; the seed is its 64 bits.
        let seed = a.int("seed")? as u64;
        let draw = match a.draw("draw")? {
            Some((boxes, angles, sigmas)) => AugmentDraw {
                boxes: boxes.clone(),
                angles: angles.clone(),
                sigmas: sigmas.clone(),
            },
            None if a.bool("per_image_sigma")? => {
                AugmentDraw::random_per_image(&cfg, sh.n, sh.h, sh.w, seed)
            }
            None => AugmentDraw::random(&cfg, sh.n, sh.h, sh.w, seed),
        };
        let (x, mut y) = (a.tensor("inpt")?.on(s), y.on(s));
        Augment::new(s, sh, &cfg, &draw)?
            .with_layouts(src, dst)
            .run_fused(g, s, &x, &mut y)?;
        Ok(Extra::Draw((draw.boxes, draw.angles, draw.sigmas)))
    },
};

/// Seed 003's augmentation in one kernel, its random values drawn on the device from the
/// generator's state `state` (four int32: the seed, then the draws made), which it advances.
pub const AUGMENT_DRAWN: Op = Op {
    name: "augment_drawn",
    args: &AUGMENT_DRAWN_ARGS,
    out: Out::Of(Dtype::F32),
    out_rows: false,
    in_place: false,
    names: IMAGE,
    shape: |a| {
        check_state(a.tensor("state")?)?;
        augment_shape(a)
    },
    run: |g, s, a, y| {
        let (sh, cfg, src, dst) = augment_config(a)?;
        let (state, each) = device_draw(a)?;
        // SAFETY: the Python layer took `state` from a CUDA int32 tensor of four values on this
        // device (the augmentation's generator), which the caller keeps; runs on it are
        // ordered by the caller's stream.
        let aug = unsafe { Augment::drawn_on_device_at(s, sh, &cfg, &state.on::<u32>(s), each)? };
        let (x, mut y) = (a.tensor("inpt")?.on(s), y.on(s));
        aug.with_layouts(src, dst).run_fused(g, s, &x, &mut y)?;
        Ok(Extra::Nothing)
    },
};

const AUGMENT_RAGGED_ARGS: [Arg; 15] = {
    let state = Tensor {
        mutated: true,
        ..Tensor::of(&[Dtype::I32], 1, 1)
    };
    let mut a = augment_args(3, &[arg("per_image_sigma", Ty::Bool)]);
    a[0] = arg("inpt", Ty::Tensor(Tensor::of(U8, 1, 1)));
    a[1] = arg("extents", Ty::Tensor(Tensor::of(&[Dtype::I32], 1, 1)));
    a[2] = arg("state", Ty::Tensor(state));
    a
};

/// A ragged batch's square (`n` images of the configuration's size, `n` from the extents, the
/// channels from the means), configuration and layouts, checked.
fn ragged_config(a: &Args) -> Result<(Shape, AugmentConfig, Layout, Layout)> {
    let ext = a.tensor("extents")?;
    let words = ext.shape[0];
    if words == 0 || !words.is_multiple_of(EXTENT_WORDS) {
        return Err(Error::arg(
            "extents",
            format!("{words} values: needs {EXTENT_WORDS} per image (at least one image)"),
        ));
    }
    let src = Layout::parse("layout", a.str("layout")?)?;
    let dst = Layout::parse("output_layout", a.str("output_layout")?)?;
    let cfg = settings(a)?;
    let sh = Shape::new(words / EXTENT_WORDS, cfg.mean.len(), cfg.size, cfg.size);
    cfg.check(sh)?;
    Ok((sh, cfg, src, dst))
}

/// Seed 003's augmentation of a ragged batch (`inpt` the images one after the other, each of
/// its own size, `extents` four int32 an image: the offset's low and high words, the height,
/// the width), drawn on the device from the generator's state `state`.
pub const AUGMENT_RAGGED: Op = Op {
    name: "augment_ragged",
    args: &AUGMENT_RAGGED_ARGS,
    out: Out::Of(Dtype::F32),
    out_rows: false,
    in_place: false,
    names: IMAGE,
    shape: |a| {
        check_state(a.tensor("state")?)?;
        let (sh, _, _, dst) = ragged_config(a)?;
        Ok(dims(sh, dst, 4))
    },
    run: |g, s, a, y| {
        let (sh, cfg, src, dst) = ragged_config(a)?;
        let (state, each) = device_draw(a)?;
        // SAFETY: as for `augment_drawn`.
        let aug = unsafe { Augment::ragged_at(s, sh.n, sh.c, &cfg, &state.on::<u32>(s), each)? };
        let (x, e, mut y) = (
            a.tensor("inpt")?.on(s),
            a.tensor("extents")?.on::<u32>(s),
            y.on(s),
        );
        aug.with_layouts(src, dst)
            .run_ragged(g, s, &x, &e, &mut y)?;
        Ok(Extra::Nothing)
    },
};

/// The device generator's state (checked) and whether each image draws its own sigma.
fn device_draw(a: &Args) -> Result<(&TensorArg, bool)> {
    let state = a.tensor("state")?;
    check_state(state)?;
    Ok((state, a.bool("per_image_sigma")?))
}

fn check_state(t: &TensorArg) -> Result<()> {
    if t.shape != [4] {
        return Err(Error::arg(
            "state",
            format!("shape {:?}: needs the generator's four int32", t.shape),
        ));
    }
    Ok(())
}
