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

from . import _native, _ops
from ._arrays import array, capturing, device_of, disjoint, output, stream_handle

_IMAGE = (3, 4)


def _tracing():
    """Whether ``torch.compile`` is tracing this call: then it goes through Streamline's custom
    operator (``torch.ops.streamline``), which the compiled graph calls."""
    torch = _ops.TORCH
    return torch is not None and torch.compiler.is_compiling()


def _traced(name, out, stream, *args):
    """The custom operator ``name`` on ``args``, copied into ``out`` if given."""
    if stream is not None:
        raise ValueError("stream: cannot be given under torch.compile or to a call that records gradients; use torch.cuda.stream(...) around the call")
    y = _ops.op(name)(*args)
    if out is None:
        return y
    out.copy_(y)
    return out


def _sigma_arg(flat):
    """A flat sigma list (two values, or two per image) as ``gaussian_blur`` takes it."""
    flat = [float(v) for v in flat]
    return flat if len(flat) == 2 else [flat[i:i + 2] for i in range(0, len(flat), 2)]


def _mode(interpolation, arg="interpolation"):
    # torchvision's InterpolationMode is a str Enum whose value is the name we take.
    value = getattr(interpolation, "value", interpolation)
    if value not in ("nearest", "bilinear"):
        raise ValueError(f"{arg}: {interpolation!r} is not supported; allowed: nearest, bilinear")
    return value


def _nchw(a):
    return a.shape if len(a.shape) == 4 else (1,) + a.shape


def _nhwc_as_nchw(a):
    n, h, w, c = a.shape if len(a.shape) == 4 else (1,) + a.shape
    return (n, c, h, w)


def _layout(value, arg):
    v = str(value).upper()
    if v not in ("NCHW", "NHWC"):
        raise ValueError(f"{arg}: {value!r}; allowed: 'NCHW', 'NHWC'")
    return v


def _image_io(inpt, out, stream, device, out_hw=None, dtypes=("float32",), elementwise=False):
    """Input image array, output (object, array) of the same batch and channels with
    ``out_hw`` (default: the input's) in the same rank, the device and the stream. The output
    may not overlap the input, except exactly (in place) for an ``elementwise`` operation."""
    x = array(inpt, "inpt", dtypes, _IMAGE)
    dev = device_of([("inpt", x)], device)
    h, w = out_hw if out_hw is not None else x.shape[-2:]
    shape = x.shape[:-2] + (h, w)
    out, y = output(out, [("inpt", x)], shape, "float32", dev)
    if not (elementwise and y.ptr == x.ptr):
        disjoint("out", y, [("inpt", x)])
    return x, out, y, dev, stream_handle(stream, dev, [("inpt", x), ("out", y)])


def _relayout_io(inpt, dtype, src, dst, out, stream, device):
    """Input image array of ``dtype`` in layout ``src``, its shape as ``(N, C, H, W)``, a float32
    output (object, array) of the same images in layout ``dst`` and the same rank, the device
    and the stream. The output may not overlap the input."""
    x = array(inpt, "inpt", (dtype,), _IMAGE)
    dev = device_of([("inpt", x)], device)
    nchw = _nchw(x) if src == "NCHW" else _nhwc_as_nchw(x)
    n, c, h, w = nchw
    shape = (n, c, h, w) if dst == "NCHW" else (n, h, w, c)
    if len(x.shape) == 3:
        shape = shape[1:]
    out, y = output(out, [("inpt", x)], shape, "float32", dev)
    disjoint("out", y, [("inpt", x)])
    return x, nchw, out, y, dev, stream_handle(stream, dev, [("inpt", x), ("out", y)])


def _io(dev, s, x, y):
    """What a native function reading ``x`` and writing ``y`` is called with:
    ``(device, stream, x, y)``, each array as ``(address, element count)``."""
    return dev, s, (x.ptr, x.size), (y.ptr, y.size)


def _host_values(value, arg):
    """``value``'s numbers on the host: ``value.tolist()`` for a tensor or array. A CUDA
    tensor cannot be read while the current stream is being captured into a CUDA graph (the
    graph would keep the values of the capture, not of each replay): that is refused."""
    if not hasattr(value, "tolist"):
        return value
    if getattr(value, "is_cuda", False) and capturing():
        raise ValueError(
            f"{arg}: a CUDA tensor cannot be read by the host while a CUDA graph is being captured; "
            "pass a number, a list or a CPU tensor (the graph keeps a device copy of its values)")
    return value.tolist()


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


def to_float(inpt, scale=False, layout="NCHW", output_layout="NCHW", *, out=None, stream=None, device=None):
    """``ToDtype(torch.float32, scale=scale)`` of uint8 images; ``layout`` says whether
    ``inpt`` is ``(N, C, H, W)`` or ``(N, H, W, C)`` (as image decoders produce), and
    ``output_layout`` which one to write, converted in the same pass."""
    src, dst = _layout(layout, "layout"), _layout(output_layout, "output_layout")
    if _tracing():
        return _traced("to_float", out, stream, inpt, bool(scale), src, dst)
    x, nchw, out, y, dev, s = _relayout_io(inpt, "uint8", src, dst, out, stream, device)
    _native.to_float(_io(dev, s, x, y), nchw, src, dst, bool(scale))
    return out


def normalize(inpt, mean, std, inplace=False, *, out=None, stream=None, device=None):
    """``(inpt - mean[c]) / std[c]`` per channel (torchvision's ``normalize``)."""
    if inplace:
        if out is not None:
            raise ValueError("out: cannot be given with inplace=True")
        out = inpt
    if _tracing():
        mean, std = [float(v) for v in mean], [float(v) for v in std]
        return _traced("normalize", out, stream, inpt, mean, std)
    x, out, y, dev, s = _image_io(inpt, out, stream, device, elementwise=True)
    mean = list(map(float, _host_values(mean, "mean")))
    std = list(map(float, _host_values(std, "std")))
    _native.normalize(_io(dev, s, x, y), _nchw(x), mean, std)
    return out


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


def resize(inpt, size, interpolation="bilinear", max_size=None, antialias=True, *, out=None, stream=None, device=None):
    """torchvision's ``resize``: bilinear (with its antialiasing when shrinking, unless
    ``antialias=False``) or nearest."""
    mode = _mode(interpolation)
    if _tracing():
        oh, ow = _resized_size(size, inpt.shape[-2], inpt.shape[-1], max_size)
        return _traced("resize", out, stream, inpt, [oh, ow], mode, bool(antialias))
    x = array(inpt, "inpt", ("float32",), _IMAGE)
    oh, ow = _resized_size(size, x.shape[-2], x.shape[-1], max_size)
    x, out, y, dev, s = _image_io(inpt, out, stream, device, out_hw=(oh, ow))
    if mode == "bilinear" and antialias:
        mode = "bilinear_antialias"
    _native.resize(_io(dev, s, x, y), _nchw(x), (oh, ow), mode)
    return out


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
    if _tracing():
        n = (inpt.shape[0] if inpt.dim() == 4 else 1)
        return _traced("rotate", out, stream, inpt, _per_image(angle, n, "angle"), mode, fill, src, dst)
    x, nchw, out, y, dev, s = _relayout_io(inpt, "float32", src, dst, out, stream, device)
    angles = _per_image(angle, nchw[0], "angle")
    _native.rotate(_io(dev, s, x, y), nchw, angles, mode, fill, src, dst)
    return out


def _pair(value, arg):
    if isinstance(value, numbers.Real):
        return [value, value]
    value = list(value)
    if len(value) == 1:
        return [value[0], value[0]]
    if len(value) != 2:
        raise ValueError(f"{arg}: {value!r}; needs one number or two")
    return value


def gaussian_blur(inpt, kernel_size, sigma=None, *, out=None, stream=None, device=None):
    """torchvision's ``gaussian_blur`` (reflect padding). ``kernel_size`` is one odd number or
    ``[kx, ky]``; ``sigma`` one number, ``[sx, sy]``, ``None`` (torchvision's default
    ``0.3 * ((k - 1) * 0.5 - 1) + 0.8``), or one ``[sx, sy]`` per image (shape ``(N, 2)``)."""
    k = _pair(kernel_size, "kernel_size")
    if any(not isinstance(v, numbers.Integral) for v in k):
        raise TypeError(f"kernel_size: {kernel_size!r}; must be integers")
    if _tracing():
        n = inpt.shape[0] if inpt.dim() == 4 else 1
        sig = _sigma_values(sigma, k, n)
        return _traced("gaussian_blur", out, stream, inpt, [int(v) for v in k], sig)
    x, out, y, dev, s = _image_io(inpt, out, stream, device)
    nchw = _nchw(x)
    sig = _sigma_values(sigma, k, nchw[0])
    _native.gaussian_blur(_io(dev, s, x, y), nchw, (int(k[0]), int(k[1])), sig)
    return out


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


def _boxes(boxes):
    """torchvision's boxes: a ``(K, 5)`` tensor of ``[i, x1, y1, x2, y2]`` or a list of
    ``(L, 4)`` tensors, one per image; read on the host (a CUDA tensor is copied back)."""
    if isinstance(boxes, (list, tuple)) and boxes and hasattr(boxes[0], "tolist"):
        out = []
        for i, b in enumerate(boxes):
            for row in _host_values(b, "boxes"):
                if len(row) != 4:
                    raise ValueError(f"boxes: image {i}'s boxes need 4 values each, got {len(row)}")
                out.append([float(i)] + [float(v) for v in row])
        return out
    rows = list(_host_values(boxes, "boxes"))
    out = []
    for r in rows:
        r = list(r)
        if len(r) != 5:
            raise ValueError(f"boxes: needs [batch_index, x1, y1, x2, y2] per box, got {len(r)} values")
        out.append([float(v) for v in r])
    return out


def _device_boxes(boxes, dev):
    """``boxes`` as one ``(K, 5)`` float32 CUDA tensor on ``dev`` when they are CUDA tensors (a
    ``(K, 5)`` tensor or a list of ``(L, 4)`` tensors, one per image), assembled on the device;
    else ``None``."""
    torch = _ops.TORCH
    if torch is None:
        return None
    if isinstance(boxes, torch.Tensor):
        if not boxes.is_cuda:
            return None
        if boxes.dim() != 2 or boxes.shape[1] != 5:
            raise ValueError(f"boxes: has shape {tuple(boxes.shape)}; needs (K, 5): [batch_index, x1, y1, x2, y2]")
        b = boxes
    elif isinstance(boxes, (list, tuple)) and boxes and all(isinstance(b, torch.Tensor) and b.is_cuda for b in boxes):
        for i, b in enumerate(boxes):
            if b.dim() != 2 or b.shape[1] != 4:
                raise ValueError(f"boxes: image {i}'s boxes have shape {tuple(b.shape)}; need (L, 4)")
        b = torch.cat([torch.cat([torch.full_like(b[:, :1], i), b], 1) for i, b in enumerate(boxes)])
    else:
        return None
    if b.get_device() != dev:
        raise ValueError(f"boxes: are on cuda:{b.get_device()}; the input is on cuda:{dev}")
    if b.shape[0] == 0:
        raise ValueError("boxes: needs at least one box")
    return b.to(torch.float32).contiguous()


def _roi_boxes(boxes, dev):
    """``roi_align``'s boxes as the native call takes them: ``(rows on the host, (address,
    length) on the device, count, keep)``. ``keep(stream, s)`` records a tensor made here on
    the current stream on an explicit ``stream`` (handle ``s``) that reads it, so its memory is
    not handed out again before that read."""
    on_device = _device_boxes(boxes, dev)
    if on_device is None:
        rows = _boxes(boxes)
        return rows, None, len(rows), lambda stream, s: None
    b = array(on_device, "boxes", ("float32",), (2,))

    def keep(stream, s):
        if on_device is not boxes and stream is not None:
            on_device.record_stream(_ops.TORCH.cuda.ExternalStream(s, device=dev))

    return [], (b.ptr, b.size), on_device.shape[0], keep


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
    torch = _ops.TORCH
    if _tracing() or (torch is not None and isinstance(input, torch.Tensor) and input.requires_grad
                      and torch.is_grad_enabled()):
        torch = _ops.TORCH
        if isinstance(boxes, (list, tuple)) and boxes and isinstance(boxes[0], torch.Tensor):
            boxes = torch.cat([torch.cat([torch.full_like(b[:, :1], i), b], 1) for i, b in enumerate(boxes)])
        elif not isinstance(boxes, torch.Tensor):
            boxes = torch.tensor(_boxes(boxes), dtype=torch.float32)
        oh, ow = _pair(output_size, "output_size")
        return _traced("roi_align", out, stream, input, boxes.float(), [int(oh), int(ow)], float(spatial_scale),
                       int(sampling_ratio), bool(aligned))
    x = array(input, "input", ("float32",), (4,))
    dev = device_of([("input", x)], device)
    oh, ow = _pair(output_size, "output_size")
    rows, device_boxes, count, keep = _roi_boxes(boxes, dev)
    shape = (count, x.shape[1], int(oh), int(ow))
    out, y = output(out, [("input", x)], shape, "float32", dev)
    disjoint("out", y, [("input", x)])
    s = stream_handle(stream, dev, [("input", x), ("out", y)])
    keep(stream, s)
    _native.roi_align(_io(dev, s, x, y), (x.shape, rows, device_boxes, (int(oh), int(ow)),
                                          float(spatial_scale), int(sampling_ratio), bool(aligned)))
    return out


def roi_align_backward(grad, boxes, input_shape, output_size, spatial_scale=1.0, sampling_ratio=-1, aligned=False,
                       deterministic=False, *, out=None, stream=None, device=None):
    """The gradient of :func:`roi_align` with respect to its input (of ``input_shape``), from
    the output's gradient ``grad`` (``(K, C, out_h, out_w)``), as torchvision's backward
    defines it. ``deterministic``: without atomic adds, the same bits on every run (torchvision
    has no such mode); otherwise torchvision's atomic scatter, whose last bits vary."""
    if _tracing():
        raise ValueError("roi_align_backward: call torch.ops.streamline.roi_align_backward under torch.compile")
    g = array(grad, "grad", ("float32",), (4,))
    dev = device_of([("grad", g)], device)
    oh, ow = _pair(output_size, "output_size")
    n, c, h, w = (int(v) for v in input_shape)
    if g.shape[1:] != (c, int(oh), int(ow)):
        raise ValueError(f"grad: has shape {g.shape}; needs (K, {c}, {int(oh)}, {int(ow)})")
    rows, device_boxes, count, keep = _roi_boxes(boxes, dev)
    if count != g.shape[0]:
        raise ValueError(f"grad: has {g.shape[0]} boxes' gradients; boxes has {count}")
    out, y = output(out, [("grad", g)], (n, c, h, w), "float32", dev)
    disjoint("out", y, [("grad", g)])
    s = stream_handle(stream, dev, [("grad", g), ("out", y)])
    keep(stream, s)
    _native.roi_align_backward(_io(dev, s, g, y), ((n, c, h, w), rows, device_boxes, (int(oh), int(ow)),
                                                   float(spatial_scale), int(sampling_ratio), bool(aligned)),
                               bool(deterministic))
    return out


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
    size = int(size)
    crop = size // 2 if crop is None else int(crop)
    lo, hi = _pair(sigma, "sigma")
    if _tracing():
        if draw is not None or return_draw:
            raise ValueError("draw: a given draw and return_draw are not supported under torch.compile")
        c = inpt.shape[1] if src == "NCHW" else inpt.shape[3]
        mean = [0.0] * c if mean is None else [float(v) for v in mean]
        std = [1.0] * c if std is None else [float(v) for v in std]
        cfg = (size, crop, float(degrees), _mode(interpolation), int(kernel_size), [float(lo), float(hi)],
               bool(scale), mean, std, src, dst)
        if _state is not None:
            return _traced("augment_drawn", out, stream, inpt, _state, *cfg, bool(per_image_sigma))
        return _traced("augment", out, stream, inpt, *cfg, _ops.signed(int(seed)), bool(per_image_sigma))
    x = array(inpt, "inpt", ("uint8",), (4,))
    dev = device_of([("inpt", x)], device)
    nchw = x.shape if src == "NCHW" else _nhwc_as_nchw(x)
    n, c = nchw[0], nchw[1]
    mean = [0.0] * c if mean is None else [float(v) for v in mean]
    std = [1.0] * c if std is None else [float(v) for v in std]
    shape = (n, c, size, size) if dst == "NCHW" else (n, size, size, c)
    out, y = output(out, [("inpt", x)], shape, "float32", dev)
    disjoint("out", y, [("inpt", x)])
    s = stream_handle(stream, dev, [("inpt", x), ("out", y)])
    if draw is not None:
        boxes, angles, sigmas = draw
        draw = ([[float(v) for v in b] for b in boxes], _per_image(angles, n, "draw"), _per_image(sigmas, n, "draw"))
    state = None
    if _state is not None:
        st = array(_state, "state", ("int32",), (1,), writable=True)
        if st.size != 4 or device_of([("inpt", x), ("state", st)], dev) != dev:
            raise ValueError("state: needs the generator's four int32 on the input's device")
        state = (st.ptr, st.size)
    got = _native.augment(_io(dev, s, x, y), nchw, (src, dst), crop, size, float(degrees),
                          _mode(interpolation), int(kernel_size), (float(lo), float(hi)), bool(scale),
                          mean, std, int(seed) & (2**64 - 1), bool(per_image_sigma), draw, state)
    return (out, got) if return_draw else out


def heavy(x, *, out=None, stream=None, device=None):
    """Seed 000's ``x**2 + x**3 * sin(x) * cos(x) + tan(x)``, elementwise, float32, float16 or
    bfloat16 (computed in float32, rounded once), any shape."""
    if _tracing():
        return _traced("heavy", out, stream, x)
    a = array(x, "x", ("float32", "float16", "bfloat16"), range(0, 33))
    dev = device_of([("x", a)], device)
    out, y = output(out, [("x", a)], a.shape, a.dtype, dev)
    disjoint("out", y, [("x", a)])
    s = stream_handle(stream, dev, [("x", a), ("out", y)])
    _native.heavy(_io(dev, s, a, y), a.dtype)
    return out


def sgemm(a, b, out=None, alpha=1.0, beta=0.0, *, stream=None, device=None):
    """``out = alpha * a @ b + beta * out`` in FP32 (no TF32): ``a`` is ``(m, k)``, ``b``
    ``(k, n)``, row-major; rows may be padded (a row stride above the row length). With
    ``beta == 0`` ``out`` is only written and may be omitted."""
    if _tracing():
        c = None if beta == 0 else out
        return _traced("sgemm", out, stream, a, b, c, float(alpha), float(beta))
    return _gemm(a, b, out, alpha, beta, stream, device, ("float32",))


def matmul(a, b, out=None, alpha=1.0, beta=0.0, *, stream=None, device=None):
    """``out = alpha * a @ b + beta * out`` for float32 (as :func:`sgemm`), bfloat16 or
    float16 matrices, all three of one dtype: half precision runs on tensor cores, accumulates
    in float32 and rounds once. ``a`` is ``(m, k)``, ``b`` ``(k, n)``, row-major; rows may be
    padded, and for half precision every row must start on 16 bytes (row strides multiples
    of 8, tensors 16-byte aligned). With ``beta == 0`` ``out`` is only written and may be
    omitted."""
    if _tracing():
        c = None if beta == 0 else out
        return _traced("matmul", out, stream, a, b, c, float(alpha), float(beta))
    return _gemm(a, b, out, alpha, beta, stream, device, ("float32", "bfloat16", "float16"))


def _gemm(a, b, out, alpha, beta, stream, device, dtypes):
    A = array(a, "a", dtypes, (2,), row_strided=True)
    B = array(b, "b", (A.dtype,), (2,), row_strided=True)
    m, k = A.shape
    if B.shape[0] != k:
        raise ValueError(f"b: has {B.shape[0]} rows; a {A.shape} needs {k}")
    n = B.shape[1]
    dev = device_of([("a", A), ("b", B)], device)
    if out is None:
        if beta != 0:
            raise ValueError("out: required when beta is not 0 (it is read)")
        out, C = output(None, [("a", A), ("b", B)], (m, n), A.dtype, dev)
    else:
        C = array(out, "out", (A.dtype,), (2,), writable=True, row_strided=True)
        if C.shape != (m, n):
            raise ValueError(f"out: has shape {C.shape}; needs {(m, n)}")
    arrays = [("a", A), ("b", B), ("out", C)]
    device_of(arrays, dev)
    disjoint("out", C, [("a", A), ("b", B)])
    s = stream_handle(stream, dev, arrays)
    spans = tuple((X.ptr, _strided_len(X)) for X in (A, B, C))
    strides = tuple(max(X.strides[0], 1) if X.strides else max(X.shape[1], 1) for X in (A, B, C))
    if A.dtype == "float32":
        _native.sgemm(dev, s, spans, (m, n, k), strides, float(alpha), float(beta))
    else:
        _native.hgemm(dev, s, spans, (m, n, k), strides, float(alpha), float(beta), A.dtype)
    return out


def _strided_len(X):
    rows, cols = X.shape
    if rows == 0 or cols == 0:
        return 0
    pitch = X.strides[0] if X.strides else cols
    return (rows - 1) * pitch + cols
