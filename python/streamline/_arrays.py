"""Device arrays and streams from the caller's objects.

PyTorch CUDA tensors are read directly (a few attribute reads); any other object exposing
``__cuda_array_interface__`` (CuPy, Numba, JAX through it, a test's stand-in) through that
interface. Every check names the argument it refuses and says what is allowed.
"""
import sys

# typestr of __cuda_array_interface__ -> our dtype names
_TYPESTR = {"|u1": "uint8", "<u1": "uint8", "<f4": "float32", "<f2": "float16", "<i4": "int32"}
_ITEMSIZE = {"uint8": 1, "float32": 4, "float16": 2, "bfloat16": 2, "int32": 4}


class Array:
    """A C-contiguous device array: address, shape, dtype name, device ordinal."""

    __slots__ = ("obj", "ptr", "shape", "dtype", "device", "is_torch", "stream", "strides")

    def __init__(self, obj, ptr, shape, dtype, device, is_torch, stream=None, strides=None):
        self.obj = obj
        self.ptr = ptr
        self.shape = shape
        self.dtype = dtype
        self.device = device
        self.is_torch = is_torch
        self.stream = stream
        self.strides = strides  # in elements; only for arrays taken with row strides allowed

    @property
    def size(self):
        n = 1
        for d in self.shape:
            n *= d
        return n


def _torch():
    return sys.modules.get("torch")


def capturing():
    """Whether PyTorch is capturing a CUDA graph on its current stream."""
    torch = _torch()
    return bool(torch is not None and torch.cuda.is_available() and torch.cuda.is_current_stream_capturing())


def _torch_dtype_name(t):
    torch = _torch()
    return {torch.uint8: "uint8", torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16",
            torch.int32: "int32"}.get(t)


def array(obj, arg, dtypes, ndims, writable=False, row_strided=False):
    """The device array behind ``obj``, checked: one of ``dtypes``, ``ndim`` in ``ndims``,
    C-contiguous (or, with ``row_strided``, rows of unit-stride elements at any row pitch)."""
    torch = _torch()
    if torch is not None and isinstance(obj, torch.Tensor):
        if not obj.is_cuda:
            raise TypeError(f"{arg}: must be a CUDA tensor, got a tensor on {obj.device}")
        dtype = _torch_dtype_name(obj.dtype)
        if dtype not in dtypes:
            raise TypeError(f"{arg}: dtype {obj.dtype} is not supported; allowed: {', '.join(dtypes)}")
        if obj.dim() not in ndims:
            raise ValueError(f"{arg}: has {obj.dim()} dimensions (shape {tuple(obj.shape)}); allowed: {_dims(ndims)}")
        strides = None
        if row_strided:
            strides = obj.stride()
            if obj.dim() == 2 and obj.shape[0] <= 1:
                # One row: its pitch is never used; call it the row length.
                strides = (obj.shape[1], 1)
            if obj.dim() != 2 or (obj.shape[1] > 1 and strides[1] != 1) or strides[0] < obj.shape[1]:
                raise ValueError(f"{arg}: needs rows of consecutive elements (stride {tuple(strides)}); call .contiguous()")
        elif not obj.is_contiguous():
            raise ValueError(f"{arg}: must be contiguous; call .contiguous() first")
        if writable and obj.requires_grad and obj.is_leaf:
            raise ValueError(f"{arg}: a leaf tensor that requires grad cannot be written")
        return Array(obj, obj.data_ptr(), tuple(obj.shape), dtype, obj.get_device(), True, strides=strides)
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is None:
        raise TypeError(
            f"{arg}: must be a CUDA tensor or an object with __cuda_array_interface__, got {type(obj).__name__}"
        )
    try:
        shape = tuple(int(d) for d in cai["shape"])
        typestr = cai["typestr"]
        ptr, readonly = cai["data"]
    except (KeyError, TypeError, ValueError) as e:
        raise TypeError(f"{arg}: malformed __cuda_array_interface__ ({e})") from None
    dtype = _TYPESTR.get(typestr)
    if dtype not in dtypes:
        raise TypeError(f"{arg}: typestr {typestr!r} is not supported; allowed: {', '.join(dtypes)}")
    if len(shape) not in ndims:
        raise ValueError(f"{arg}: has {len(shape)} dimensions (shape {shape}); allowed: {_dims(ndims)}")
    if writable and readonly:
        raise ValueError(f"{arg}: is read-only")
    item = _ITEMSIZE[dtype]
    strides = cai.get("strides")
    elems = None
    if strides is not None:
        if any(s % item for s in strides):
            raise ValueError(f"{arg}: strides {tuple(strides)} are not whole elements")
        elems = tuple(s // item for s in strides)
    dense = _dense_strides(shape)
    if row_strided:
        elems = elems or dense
        if len(shape) == 2 and shape[0] <= 1:
            elems = (shape[1], 1)
        if len(shape) != 2 or (shape[1] > 1 and elems[1] != 1) or elems[0] < shape[1]:
            raise ValueError(f"{arg}: needs rows of consecutive elements (strides {strides})")
    elif elems is not None and not _same_strides(shape, elems, dense):
        raise ValueError(f"{arg}: must be C-contiguous (strides {tuple(strides)})")
    if ptr == 0 and _prod(shape) != 0:
        raise ValueError(f"{arg}: has a null data pointer")
    return Array(obj, int(ptr), shape, dtype, None, False, stream=cai.get("stream"), strides=elems)


def _prod(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _dense_strides(shape):
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


def _same_strides(shape, strides, dense):
    # Dimensions of extent 1 may carry any stride.
    return all(d == 1 or s == t for d, s, t in zip(shape, strides, dense))


def _dims(ndims):
    return " or ".join(str(n) for n in sorted(ndims))


def device_of(arrays, device):
    """The device ordinal shared by ``arrays`` (torch tensors say theirs; other objects take
    ``device``, default 0)."""
    found = None
    for name, a in arrays:
        if a.device is None:
            continue
        if found is None:
            found = (name, a.device)
        elif a.device != found[1]:
            raise ValueError(f"{name}: is on cuda:{a.device} but {found[0]} is on cuda:{found[1]}")
    if found is not None:
        if device is not None and int(device) != found[1]:
            raise ValueError(f"device: {device} but {found[0]} is on cuda:{found[1]}")
        return found[1]
    return 0 if device is None else int(device)


def stream_handle(stream, device, arrays):
    """The CUDA stream to queue on: ``stream`` (a ``torch.cuda.Stream``, anything with
    ``cuda_stream`` or ``ptr``, or a raw handle), else PyTorch's current stream on ``device``
    when torch is loaded, else the stream an array's ``__cuda_array_interface__`` names, else
    the default stream."""
    if stream is not None:
        for attr in ("cuda_stream", "ptr"):
            h = getattr(stream, attr, None)
            if h is not None:
                return int(h)
        if isinstance(stream, int) and stream >= 0:
            return stream
        raise TypeError(f"stream: must be a torch.cuda.Stream, an object with cuda_stream or ptr, or a handle; got {stream!r}")
    torch = _torch()
    if torch is not None and any(a.is_torch for _, a in arrays):
        return current_stream(torch, device)
    for _, a in arrays:
        if a.stream is not None:
            # CUDA array interface v3: 1 is the legacy default stream, 2 the per-thread one;
            # the driver takes both values as those streams' handles.
            return int(a.stream)
    return 0


def current_stream(torch, device):
    """The handle of PyTorch's current stream on ``device`` (``torch.cuda.current_stream``)."""
    return torch.cuda.current_stream(device).cuda_stream


def empty_like_torch(arrays, shape, dtype, device, arg="out"):
    """A new torch tensor for an output when the inputs are torch tensors; the caller must
    pass ``out`` otherwise."""
    torch = _torch()
    if torch is None or not any(a.is_torch for _, a in arrays):
        raise TypeError(f"{arg}: required when the inputs are not torch tensors")
    return torch.empty(shape, dtype=getattr(torch, dtype), device=torch.device("cuda", device))


def output(out, arrays, shape, dtype, device, arg="out", row_strided=False):
    """``out`` checked to be ``shape`` and ``dtype`` on ``device`` (or a new torch tensor):
    ``(object, Array)``; ``row_strided``: a matrix whose rows may be padded."""
    if out is None:
        out = empty_like_torch(arrays, shape, dtype, device, arg)
    a = array(out, arg, (dtype,), (len(shape),), writable=True, row_strided=row_strided)
    if a.shape != tuple(shape):
        raise ValueError(f"{arg}: has shape {a.shape}; needs {tuple(shape)}")
    if a.device is not None and a.device != device:
        raise ValueError(f"{arg}: is on cuda:{a.device}; the inputs are on cuda:{device}")
    return out, a


def nbytes(a):
    """Bytes spanned by ``a`` (row-strided arrays: up to the end of their last row)."""
    if a.size == 0:
        return 0
    item = _ITEMSIZE[a.dtype]
    if a.strides is not None and len(a.shape) == 2:
        return ((a.shape[0] - 1) * a.strides[0] + a.shape[1]) * item
    return a.size * item


def disjoint(out_name, out, inputs):
    """Refuses an output that overlaps an input: these kernels read neighbours (or whole rows)
    of what other threads write, so an aliased output would be read after being written."""
    lo, hi = out.ptr, out.ptr + nbytes(out)
    for name, a in inputs:
        if a.ptr < hi and lo < a.ptr + nbytes(a) and hi > lo:
            raise ValueError(f"{out_name}: overlaps {name}; pass a separate output tensor")


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

