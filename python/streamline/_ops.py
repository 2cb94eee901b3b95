"""Streamline's operations as PyTorch custom operators, ``torch.ops.streamline.*``.

Each operation is described once below (``OPS``): its schema, and a fake implementation that
gives the output's shape and dtype without touching data (what ``torch.compile`` traces
with). The real implementation is the package's own function on CUDA tensors. Registered when
torch is importable; :mod:`streamline.functional` calls these operators while
``torch.compile`` traces (so a compiled model calls Streamline with no graph break, and inside
``mode="reduce-overhead"``'s CUDA graphs) and calls the native code directly otherwise.
"""
from . import functional as F

LIB = "streamline"

#: the torch module, once the operators are registered
TORCH = None


def _relayout_shape(shape, src, dst):
    three = len(shape) == 3
    full = (1,) + tuple(shape) if three else tuple(shape)
    n, c, h, w = full if src == "NCHW" else (full[0], full[3], full[1], full[2])
    out = (n, c, h, w) if dst == "NCHW" else (n, h, w, c)
    return out[1:] if three else out


def signed(seed):
    """A 64-bit seed as the signed int64 a schema's ``int`` holds."""
    seed &= 2**64 - 1
    return seed - 2**64 if seed >= 2**63 else seed


def _new(like, shape, dtype=None):
    torch = TORCH
    return like.new_empty(shape, dtype=torch.float32 if dtype is None else dtype)


# name -> (schema, real implementation on CUDA tensors, fake implementation)
OPS = {
    "to_float": (
        "(Tensor inpt, bool scale, str layout, str output_layout) -> Tensor",
        lambda x, scale, src, dst: F.to_float(x, scale, src, dst),
        lambda x, scale, src, dst: _new(x, _relayout_shape(x.shape, src, dst)),
    ),
    "normalize": (
        "(Tensor inpt, float[] mean, float[] std) -> Tensor",
        lambda x, mean, std: F.normalize(x, mean, std),
        lambda x, mean, std: _new(x, x.shape),
    ),
    "resize": (
        "(Tensor inpt, int[] size, str interpolation, bool antialias) -> Tensor",
        lambda x, size, mode, aa: F.resize(x, list(size), mode, antialias=aa),
        lambda x, size, mode, aa: _new(x, tuple(x.shape[:-2]) + tuple(size)),
    ),
    "rotate": (
        "(Tensor inpt, float[] angle, str interpolation, float? fill, str layout, str output_layout) -> Tensor",
        lambda x, angle, mode, fill, src, dst: F.rotate(x, list(angle), mode, fill=fill, layout=src, output_layout=dst),
        lambda x, angle, mode, fill, src, dst: _new(x, _relayout_shape(x.shape, src, dst)),
    ),
    "gaussian_blur": (
        "(Tensor inpt, int[] kernel_size, float[] sigma) -> Tensor",
        lambda x, k, sigma: F.gaussian_blur(x, list(k), F._sigma_arg(sigma)),
        lambda x, k, sigma: _new(x, x.shape),
    ),
    "roi_align": (
        "(Tensor input, Tensor boxes, int[] output_size, float spatial_scale, int sampling_ratio, bool aligned) -> Tensor",
        lambda x, boxes, size, scale, ratio, aligned: _no_grad(F.roi_align, x, boxes, list(size), scale, ratio, aligned),
        lambda x, boxes, size, scale, ratio, aligned: _new(x, (boxes.shape[0], x.shape[1]) + tuple(size)),
    ),
    "roi_align_backward": (
        "(Tensor grad, Tensor boxes, int[] input_shape, int[] output_size, float spatial_scale, int sampling_ratio, "
        "bool aligned, bool deterministic) -> Tensor",
        lambda g, boxes, shape, size, scale, ratio, aligned, det: F.roi_align_backward(
            g, boxes, list(shape), list(size), scale, ratio, aligned, det),
        lambda g, boxes, shape, size, scale, ratio, aligned, det: _new(g, tuple(shape)),
    ),
    "augment": (
        "(Tensor inpt, int size, int crop, float degrees, str interpolation, int kernel_size, float[] sigma, "
        "bool scale, float[] mean, float[] std, str layout, str output_layout, int seed, bool per_image_sigma) "
        "-> Tensor",
        lambda x, size, crop, deg, mode, k, sigma, scale, mean, std, src, dst, seed, each: F.augment(
            x, size, crop, deg, mode, k, list(sigma), scale, list(mean), list(std), src, dst, seed & (2**64 - 1),
            each),
        lambda x, size, crop, deg, mode, k, sigma, scale, mean, std, src, dst, seed, each: _new(
            x, _augment_shape(x, size, src, dst)),
    ),
    "augment_drawn": (
        "(Tensor inpt, Tensor(a!) state, int size, int crop, float degrees, str interpolation, int kernel_size, "
        "float[] sigma, bool scale, float[] mean, float[] std, str layout, str output_layout, bool per_image_sigma) "
        "-> Tensor",
        lambda x, state, size, crop, deg, mode, k, sigma, scale, mean, std, src, dst, each: F.augment(
            x, size, crop, deg, mode, k, list(sigma), scale, list(mean), list(std), src, dst,
            per_image_sigma=each, _state=state),
        lambda x, state, size, crop, deg, mode, k, sigma, scale, mean, std, src, dst, each: _new(
            x, _augment_shape(x, size, src, dst)),
    ),
    "heavy": (
        "(Tensor x) -> Tensor",
        lambda x: F.heavy(x),
        lambda x: _new(x, x.shape, x.dtype),
    ),
    "sgemm": (
        "(Tensor a, Tensor b, Tensor? c, float alpha, float beta) -> Tensor",
        lambda a, b, c, alpha, beta: F.sgemm(a, b, None if c is None else c.clone(), alpha, beta),
        lambda a, b, c, alpha, beta: _new(a, (a.shape[0], b.shape[1])),
    ),
    "matmul": (
        "(Tensor a, Tensor b, Tensor? c, float alpha, float beta) -> Tensor",
        lambda a, b, c, alpha, beta: F.matmul(a, b, None if c is None else c.clone(), alpha, beta),
        lambda a, b, c, alpha, beta: _new(a, (a.shape[0], b.shape[1]), a.dtype),
    ),
}


def _no_grad(f, *args):
    """``f(*args)`` with gradients off: the operator's own implementation, which must not
    dispatch to the operator again."""
    with TORCH.no_grad():
        return f(*args)


def _augment_shape(x, size, src, dst):
    n, c = (x.shape[0], x.shape[1]) if src == "NCHW" else (x.shape[0], x.shape[3])
    return (n, c, size, size) if dst == "NCHW" else (n, size, size, c)


def _roi_align_context(ctx, inputs, output):
    x, boxes, size, scale, ratio, aligned = inputs
    ctx.save_for_backward(boxes)
    ctx.args = (list(x.shape), list(size), scale, ratio, aligned, TORCH.are_deterministic_algorithms_enabled())


def _roi_align_backward(ctx, grad):
    (boxes,) = ctx.saved_tensors
    shape, size, scale, ratio, aligned, det = ctx.args
    gx = op("roi_align_backward")(grad.contiguous(), boxes, shape, size, scale, ratio, aligned, det)
    return gx, None, None, None, None, None


_registered = False


def register(torch):
    """Defines ``torch.ops.streamline.*`` (once)."""
    global _registered, TORCH
    if _registered:
        return
    lib = torch.library.Library(LIB, "DEF")
    for name, (schema, real, fake) in OPS.items():
        lib.define(name + schema)
        lib.impl(name, real, "CUDA")
        torch.library.register_fake(f"{LIB}::{name}", fake, lib=lib)
    torch.library.register_autograd(f"{LIB}::roi_align", _roi_align_backward, setup_context=_roi_align_context,
                                    lib=lib)
    # The library must outlive this function: torch drops the definitions with it.
    register.lib = lib
    _registered = True
    TORCH = torch


def op(name):
    """``torch.ops.streamline.<name>``."""
    return getattr(TORCH.ops.streamline, name)
