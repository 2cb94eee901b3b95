"""Streamline's operations on the caller's tensors, with torchvision's names and semantics.

Each takes CUDA tensors (or ``__cuda_array_interface__`` objects), returns a new torch tensor
(or writes ``out``), and queues its work on PyTorch's current stream (or ``stream=``) without
synchronizing: ``torch.cuda.stream(s)``, ``s.wait_stream(t)`` and ``x.record_stream(s)`` order
it as they order torch's own operations. Images are float32 ``(N, C, H, W)`` or ``(C, H, W)``
unless said otherwise. The device is the tensors' (``device=`` for other objects).

Where torchvision takes one value per call (``rotate``'s ``angle``, ``gaussian_blur``'s
``sigma``), these also take one value per image of the batch.
"""
import numbers

from . import _ops
from ._arrays import _host_values
from ._boxes import host_rows, one_tensor
from ._ops import call, run, through_operator, tracing

def _mode(interpolation, arg="interpolation"):
    # torchvision's InterpolationMode is a str Enum whose value is the name we take.
    value = getattr(interpolation, "value", interpolation)
    if value not in ("nearest", "bilinear"):
        raise ValueError(f"{arg}: {interpolation!r} is not supported; allowed: nearest, bilinear")
    return value


def _layout(value, arg):
    v = str(value).upper()
    if v not in ("NCHW", "NHWC"):
        raise ValueError(f"{arg}: {value!r}; allowed: 'NCHW', 'NHWC'")
    return v


def _per_image(value, n, arg):
    """One float per image from a number, a sequence or a CPU tensor of ``n`` values."""
    if isinstance(value, numbers.Real):
        return [float(value)] * n
    value = _host_values(value, arg)
    try:
        values = [float(v) for v in value]
    except (TypeError, ValueError):
        raise TypeError(f"{arg}: must be a number or one number per image, got {value!r}") from None
    if len(values) != n:
        raise ValueError(f"{arg}: has {len(values)} values; needs one per image ({n})")
    return values


def _images(inpt):
    """The number of images of an image tensor: its first extent, or 1 for one image ``(C, H,
    W)``."""
    shape = _shape(inpt)
    return int(shape[0]) if len(shape) == 4 else 1


def _shape(inpt):
    """The shape of a tensor or ``__cuda_array_interface__`` object; ``()`` for anything else."""
    shape = getattr(inpt, "shape", None)
    if shape is None:
        shape = getattr(inpt, "__cuda_array_interface__", {}).get("shape", ())
    return tuple(shape)


def to_float(inpt, scale=False, layout="NCHW", output_layout="NCHW", *, out=None, stream=None, device=None):
    """``ToDtype(torch.float32, scale=scale)`` of uint8 images; ``layout`` says whether
    ``inpt`` is ``(N, C, H, W)`` or ``(N, H, W, C)`` (as image decoders produce), and
    ``output_layout`` which one to write, converted in the same pass."""
    src, dst = _layout(layout, "layout"), _layout(output_layout, "output_layout")
    return call("to_float", (inpt, bool(scale), src, dst), out, stream, device)


def normalize(inpt, mean, std, inplace=False, *, layout="NCHW", out=None, stream=None, device=None):
    """``(inpt - mean[c]) / std[c]`` per channel (torchvision's ``normalize``); ``layout``
    says whether ``inpt`` (and the result) is ``(N, C, H, W)`` or ``(N, H, W, C)``."""
    if inplace:
        if out is not None:
            raise ValueError("out: cannot be given with inplace=True")
        out = inpt
    mean = [float(v) for v in _host_values(mean, "mean")]
    std = [float(v) for v in _host_values(std, "std")]
    return call("normalize", (inpt, mean, std, _layout(layout, "layout")), out, stream, device)


def _resized_size(size, h, w, max_size):
    """torchvision's output size: ``[h, w]``, or the shorter edge to ``size`` keeping the
    aspect ratio (``max_size`` caps the longer)."""
    if isinstance(size, numbers.Integral):
        size = [size]
    size = list(size)
    if len(size) == 2:
        if max_size is not None:
            raise ValueError("max_size: only allowed when size is one number")
        return int(size[0]), int(size[1])
    if len(size) != 1:
        raise ValueError(f"size: {size!r}; needs one number or [height, width]")
    short, long = (w, h) if w <= h else (h, w)
    new_short, new_long = int(size[0]), int(int(size[0]) * long / short)
    if max_size is not None:
        if max_size <= new_short:
            raise ValueError(f"max_size: {max_size} must be larger than size {new_short}")
        if new_long > max_size:
            new_short, new_long = int(max_size * new_short / new_long), max_size
    return (new_long, new_short) if w <= h else (new_short, new_long)


def resize(inpt, size, interpolation="bilinear", max_size=None, antialias=True, *, layout="NCHW",
           output_layout=None, out=None, stream=None, device=None):
    """torchvision's ``resize``: bilinear (with its antialiasing when shrinking, unless
    ``antialias=False``) or nearest. ``layout`` says whether ``inpt`` is ``(N, C, H, W)`` or
    ``(N, H, W, C)``, ``output_layout`` (default: ``layout``) which one to write, converted in
    the same pass."""
    mode = _mode(interpolation)
    src = _layout(layout, "layout")
    dst = src if output_layout is None else _layout(output_layout, "output_layout")
    shape = _shape(inpt)
    # The height and width in the input's layout; anything but an image is refused, naming the
    # argument, by the call.
    hw = shape[-2:] if src == "NCHW" else shape[-3:-1]
    oh, ow = _resized_size(size, int(hw[0]), int(hw[1]), max_size) if len(hw) == 2 else (1, 1)
    return call("resize", (inpt, [oh, ow], mode, bool(antialias), src, dst), out, stream, device)


def rotate(inpt, angle, interpolation="nearest", expand=False, center=None, fill=None, *,
           layout="NCHW", output_layout=None, out=None, stream=None, device=None):
    """torchvision's ``rotate`` (counter-clockwise degrees about the centre, ``expand=False``,
    outside filled with ``fill`` or 0); ``angle`` is one number or one per image. ``layout``
    says whether ``inpt`` is ``(N, C, H, W)`` or ``(N, H, W, C)`` (or one image without ``N``),
    ``output_layout`` (default: ``layout``) which one to write, converted in the same pass."""
    mode = _mode(interpolation)
    src = _layout(layout, "layout")
    dst = src if output_layout is None else _layout(output_layout, "output_layout")
    if expand:
        raise ValueError("expand: only False is supported (the output keeps the input's size)")
    if center is not None:
        raise ValueError("center: only None (the image centre) is supported")
    if fill is not None and not isinstance(fill, numbers.Real):
        values = [float(v) for v in fill]
        if not values or any(v != values[0] for v in values):
            raise ValueError(f"fill: {fill!r}; one value for every channel is supported")
        fill = values[0]
    fill = None if fill is None else float(fill)
    angles = _per_image(angle, _images(inpt), "angle")
    return call("rotate", (inpt, angles, mode, fill, src, dst), out, stream, device)


def _pair(value, arg):
    if isinstance(value, numbers.Real):
        return [value, value]
    value = list(value)
    if len(value) == 1:
        return [value[0], value[0]]
    if len(value) != 2:
        raise ValueError(f"{arg}: {value!r}; needs one number or two")
    return value


def gaussian_blur(inpt, kernel_size, sigma=None, *, layout="NCHW", out=None, stream=None, device=None):
    """torchvision's ``gaussian_blur`` (reflect padding). ``kernel_size`` is one odd number or
    ``[kx, ky]``; ``sigma`` one number, ``[sx, sy]``, ``None`` (torchvision's default
    ``0.3 * ((k - 1) * 0.5 - 1) + 0.8``), or one ``[sx, sy]`` per image (shape ``(N, 2)``).
    ``layout`` says whether ``inpt`` (and the result) is ``(N, C, H, W)`` or ``(N, H, W, C)``."""
    k = _pair(kernel_size, "kernel_size")
    if any(not isinstance(v, numbers.Integral) for v in k):
        raise TypeError(f"kernel_size: {kernel_size!r}; must be integers")
    sig = _sigma_values(sigma, k, _images(inpt))
    args = (inpt, [int(v) for v in k], sig, _layout(layout, "layout"))
    return call("gaussian_blur", args, out, stream, device)


def _sigma_values(sigma, k, n):
    """``gaussian_blur``'s sigma as a flat list: ``[sx, sy]``, or ``[sx, sy]`` per image."""
    if sigma is None:
        return [0.3 * ((v - 1) * 0.5 - 1) + 0.8 for v in k]
    sigma = _host_values(sigma, "sigma")
    if not isinstance(sigma, numbers.Real) and len(sigma) > 0 and not isinstance(sigma[0], numbers.Real):
        pairs = [_pair(p, "sigma") for p in sigma]
        if len(pairs) != n:
            raise ValueError(f"sigma: has {len(pairs)} pairs; needs one per image ({n})")
        return [float(v) for p in pairs for v in p]
    return [float(v) for v in _pair(sigma, "sigma")]


def roi_align(input, boxes, output_size, spatial_scale=1.0, sampling_ratio=-1, aligned=False, *, out=None, stream=None, device=None):
    """``torchvision.ops.roi_align``: a ``(K, C, out_h, out_w)`` crop per box.

    ``boxes`` on the host (a list or a CPU tensor) are checked first: a batch index outside
    the batch or a box needing over 2^16 samples per bin raises ``ValueError``. Boxes on the
    GPU (a ``(K, 5)`` CUDA tensor, or a list of ``(L, 4)`` ones per image) are read by the
    kernel alone, with no copy to the host and no wait, as torchvision reads them: a batch
    index outside the batch gives zeros there.

    Differentiable: with ``input.requires_grad`` the call goes through the custom operator,
    whose backward (:func:`roi_align_backward`) is Streamline's; under
    ``torch.use_deterministic_algorithms(True)`` it is the deterministic one."""
    oh, ow = _pair(output_size, "output_size")
    args = [input, boxes, [int(oh), int(ow)], float(spatial_scale), int(sampling_ratio), bool(aligned)]
    torch = _ops.TORCH
    if tracing() or (torch is not None and isinstance(input, torch.Tensor) and input.requires_grad
                     and torch.is_grad_enabled()):
        boxes = one_tensor(boxes)
        if not isinstance(boxes, torch.Tensor):
            boxes = torch.tensor(host_rows(boxes), dtype=torch.float32)
        args[1] = boxes.float()
        return through_operator("roi_align", args, out, stream)
    return run("roi_align", args, out, stream, device)[0]


def roi_align_backward(grad, boxes, input_shape, output_size, spatial_scale=1.0, sampling_ratio=-1, aligned=False,
                       deterministic=False, *, out=None, stream=None, device=None):
    """The gradient of :func:`roi_align` with respect to its input (of ``input_shape``), from
    the output's gradient ``grad`` (``(K, C, out_h, out_w)``), as torchvision's backward
    defines it. ``deterministic``: without atomic adds, the same bits on every run (torchvision
    has no such mode); otherwise torchvision's atomic scatter, whose last bits vary."""
    if tracing():
        raise ValueError("roi_align_backward: call torch.ops.streamline.roi_align_backward under torch.compile")
    oh, ow = _pair(output_size, "output_size")
    args = (grad, boxes, [int(v) for v in input_shape], [int(oh), int(ow)], float(spatial_scale),
            int(sampling_ratio), bool(aligned), bool(deterministic))
    return run("roi_align_backward", args, out, stream, device)[0]


def _augment_config(size, crop, degrees, interpolation, kernel_size, sigma, scale, mean, std, channels, src, dst):
    """The augmentation's settings as its operations take them (mean 0 and std 1 for each of
    ``channels`` by default, the crop half the size)."""
    size = int(size)
    crop = size // 2 if crop is None else int(crop)
    lo, hi = _pair(sigma, "sigma")
    mean = [0.0] * channels if mean is None else [float(v) for v in _host_values(mean, "mean")]
    std = [1.0] * channels if std is None else [float(v) for v in _host_values(std, "std")]
    return [size, crop, float(degrees), _mode(interpolation), int(kernel_size), [float(lo), float(hi)],
            bool(scale), mean, std, src, dst]


def augment(inpt, size, crop=None, degrees=45.0, interpolation="nearest", kernel_size=7, sigma=(0.1, 2.0),
            scale=False, mean=None, std=None, layout="NCHW", output_layout="NCHW", seed=0,
            per_image_sigma=True, draw=None, *, out=None, stream=None, device=None, return_draw=False,
            _state=None):
    """Seed 003's whole batch transform in one kernel: uint8 in, float32 out.

    Per image: ``ToDtype(float32, scale)``, a random ``crop x crop`` crop (default
    ``size // 2``), ``Resize(size)``, a rotation by a random angle in ``[-degrees, degrees]``,
    ``GaussianBlur(kernel_size, sigma)`` with sigma drawn from the range (per image, or once per
    batch as torchvision does with ``per_image_sigma=False``), ``Normalize(mean, std)``
    (default 0 and 1). The random values come from ``seed``; ``draw=(boxes, angles, sigmas)``
    gives them instead (boxes ``[x1, y1, x2, y2]``). ``layout``/``output_layout``: ``NCHW`` or
    ``NHWC`` each. Returns the output, and the draw with ``return_draw``.

    The draw is made on the host, so a call captured in a CUDA graph replays the draw of the
    capture: the same seed, the same output. :class:`streamline.Augment` draws on the device
    instead, anew at every call and every replay."""
    src, dst = _layout(layout, "layout"), _layout(output_layout, "output_layout")
    shape = _shape(inpt)
    c = int(shape[1 if src == "NCHW" else 3]) if len(shape) == 4 else 1
    cfg = _augment_config(size, crop, degrees, interpolation, kernel_size, sigma, scale, mean, std, c, src, dst)
    if tracing() and (draw is not None or return_draw):
        raise ValueError("draw: a given draw and return_draw are not supported under torch.compile")
    if _state is not None:
        # Drawn on the device: there is no host draw to return.
        out = call("augment_drawn", [inpt, _state, *cfg, bool(per_image_sigma)], out, stream, device)
        return (out, None) if return_draw else out
    args = [inpt, *cfg, _ops.signed(int(seed)), bool(per_image_sigma)]
    if tracing():
        return through_operator("augment", args, out, stream)
    if draw is not None:
        boxes, angles, sigmas = draw
        n = _images(inpt)
        draw = ([[float(v) for v in b] for b in boxes], _per_image(angles, n, "draw"), _per_image(sigmas, n, "draw"))
    out, got = run("augment", args + [draw], out, stream, device)
    return (out, got) if return_draw else out


def augment_ragged(batch, size, crop=None, degrees=45.0, interpolation="nearest", kernel_size=7, sigma=(0.1, 2.0),
                   scale=False, mean=None, std=None, output_layout="NCHW", per_image_sigma=True, *, out=None,
                   stream=None, device=None, _state):
    """:func:`augment` on a :class:`streamline.ragged.RaggedBatch` (images of their own sizes,
    RGB HWC), drawn on the device from the generator state ``_state`` (as
    :class:`streamline.Augment` keeps it; call that instead). Each image's crop is drawn in the
    ``size x size`` square covering its centre and taken from the image itself (``roi_align``
    averaging the pixels a bin covers), so no image is resized first; the output is
    ``(len(batch), 3, size, size)`` float32."""
    dst = _layout(output_layout, "output_layout")
    cfg = _augment_config(size, crop, degrees, interpolation, kernel_size, sigma, scale, mean, std, 3, "NHWC", dst)
    return call("augment_ragged", [batch.data, batch.extents, _state, *cfg, bool(per_image_sigma)], out, stream,
                device)


def heavy(x, *, out=None, stream=None, device=None):
    """Seed 000's ``x**2 + x**3 * sin(x) * cos(x) + tan(x)``, elementwise, float32, float16 or
    bfloat16 (computed in float32, rounded once), any shape."""
    return call("heavy", (x,), out, stream, device)


def sgemm(a, b, out=None, alpha=1.0, beta=0.0, *, stream=None, device=None):
    """``out = alpha * a @ b + beta * out`` in FP32 (no TF32): ``a`` is ``(m, k)``, ``b``
    ``(k, n)``, row-major; rows may be padded (a row stride above the row length). With
    ``beta == 0`` ``out`` is only written and may be omitted."""
    return _gemm("sgemm", a, b, out, alpha, beta, stream, device)


def matmul(a, b, out=None, alpha=1.0, beta=0.0, *, stream=None, device=None):
    """``out = alpha * a @ b + beta * out`` for float32 (as :func:`sgemm`), bfloat16 or
    float16 matrices, all three of one dtype: half precision runs on tensor cores, accumulates
    in float32 and rounds once. ``a`` is ``(m, k)``, ``b`` ``(k, n)``, row-major; rows may be
    padded, and for half precision every row must start on 16 bytes (row strides multiples
    of 8, tensors 16-byte aligned). With ``beta == 0`` ``out`` is only written and may be
    omitted."""
    return _gemm("matmul", a, b, out, alpha, beta, stream, device)


def _gemm(name, a, b, out, alpha, beta, stream, device):
    # ``out`` holds the initial values that ``beta`` scales: the schema's ``c``.
    c = None if beta == 0 else out
    return call(name, (a, b, c, float(alpha), float(beta)), out, stream, device)
