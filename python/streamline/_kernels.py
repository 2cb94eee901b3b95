"""Your own Streamline kernels, launched on PyTorch tensors and streams (as CuPy's
``RawKernel`` launches CUDA C++)."""
import ctypes
import numbers
import struct

from . import _native
from ._arrays import _torch, current_stream


class KernelModule:
    """A kernel module built by ``streamline_builder`` (``NAME.ptx`` beside its
    ``NAME.manifest.json``), loaded on one device; its kernels by name in ``kernels``."""

    def __init__(self, ptx, device=0):
        self.device = int(device)
        self._m = _native.KernelModule(self.device, str(ptx))
        listed = self._m.kernels()
        #: name -> (parameter size, parameter alignment, declared max threads per block or None)
        self.kernels = {name: (size, align, bound) for name, size, align, bound, _ in listed}
        #: name -> the kernel called by field name, for kernels whose parameter struct was
        #: declared with ``params!`` (also reachable as ``module.NAME``)
        self.typed = {name: TypedKernel(self, name, size, align, fields)
                      for name, size, align, _, fields in listed if fields is not None}

    def __getattr__(self, name):
        typed = self.__dict__.get("typed", {})
        if name in typed:
            return typed[name]
        if name in self.__dict__.get("kernels", {}):
            raise AttributeError(f"{name}: its parameter struct records no fields; declare it with "
                                 f"streamline_device::params! to call it by field name, or use launch()")
        raise AttributeError(f"{name}: no kernel of that name in this module")

    def launch(self, name, grid, block, params, shared_mem=0, stream=None):
        """Queues kernel ``name`` with ``params``, its one parameter struct: a
        ``ctypes.Structure`` mirroring the kernel's ``#[repr(C)]`` struct (its size and
        alignment are checked against the PTX's) or the struct's bytes (its size is checked).
        ``grid`` and ``block`` are ints or up to three dimensions, checked against the
        kernel's launch bounds and the device. The stream is PyTorch's current one on this
        device unless ``stream`` is given.

        The device addresses inside ``params`` (``tensor.data_ptr()``) must be valid for what
        the kernel does with them; that part is yours, as with any raw kernel launch."""
        if isinstance(params, ctypes.Structure):
            data, align = bytes(params), ctypes.alignment(params)
        elif isinstance(params, (bytes, bytearray, memoryview)):
            data, align = bytes(params), None
        else:
            raise TypeError(f"params: must be a ctypes.Structure or bytes, got {type(params).__name__}")
        s = _stream(stream, self.device)
        self._m.launch(s, name, _dim3(grid, "grid"), _dim3(block, "block"), int(shared_mem), data, align)


def _dim3(v, arg):
    if isinstance(v, int):
        v = (v,)
    v = tuple(int(d) for d in v)
    if not 1 <= len(v) <= 3 or any(d < 1 for d in v):
        raise ValueError(f"{arg}: {v}; needs one to three dimensions, each at least 1")
    return v + (1,) * (3 - len(v))


def _stream(stream, device):
    if stream is not None:
        h = getattr(stream, "cuda_stream", getattr(stream, "ptr", stream))
        if not isinstance(h, int) or h < 0:
            raise TypeError(f"stream: {stream!r} is not a stream")
        return h
    torch = _torch()
    return current_stream(torch, device) if torch is not None else 0


def load_module(ptx, device=0):
    """Loads your kernel module from ``DIR/NAME.ptx`` (with its manifest) on ``device``."""
    return KernelModule(ptx, device)


_PACK = {"u8": "<B", "u16": "<H", "u32": "<I", "u64": "<Q", "i8": "<b", "i16": "<h", "i32": "<i", "i64": "<q",
         "f16": "<e", "f32": "<f", "f64": "<d"}

#: a pointer field's element kind -> (torch dtype name, ``__cuda_array_interface__`` typestr)
_ELEMENTS = {"u8": ("uint8", "|u1"), "i8": ("int8", "|i1"), "u16": ("uint16", "<u2"), "i16": ("int16", "<i2"),
             "u32": ("uint32", "<u4"), "i32": ("int32", "<i4"), "u64": ("uint64", "<u8"), "i64": ("int64", "<i8"),
             "f16": ("float16", "<f2"), "bf16": ("bfloat16", ("<u2", "<i2", "|V2")), "f32": ("float32", "<f4"),
             "f64": ("float64", "<f8")}


def _bf16_bits(v):
    """``v`` rounded once to the nearest bfloat16 (ties to even), as its 16 bits; a finite
    ``v`` beyond bfloat16's range raises ``OverflowError``."""
    bits = struct.unpack("<I", struct.pack("<f", v))[0]
    if (bits & 0x7F800000) == 0x7F800000:
        return (bits >> 16) | (0x40 if bits & 0x7FFFFF else 0)  # NaN stays a (quiet) NaN
    # Round to f32 to odd first, so that the rounding to bfloat16 below is the only one.
    f = struct.unpack("<f", struct.pack("<I", bits))[0]
    if f != v:
        if abs(f) > abs(v):
            bits -= 1
        bits |= 1
    out = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    if out & 0x7F80 == 0x7F80:
        raise OverflowError(f"{v!r} is beyond bfloat16's range")
    return out


class TypedKernel:
    """A kernel called with its parameter struct's fields by name:
    ``m.saxpy(grid, block, x=x, y=y, n=n, a=2.0)``. Each value is checked against its field's
    type in the manifest (an unknown or missing name, or a value of the wrong type, raises
    ``TypeError`` naming the field; an integer out of its field's range ``ValueError``). A
    device-address field (``*const f32``, ``*mut bf16``: ``DevPtr<T>`` and ``DevPtrMut<T>`` in
    Rust) takes a CUDA tensor (or ``__cuda_array_interface__`` object) of the module's device
    whose element type is the field's (another raises ``TypeError``), or an integer address.
    Fields named ``pad...`` or ``_...`` default to zero. The
    launch queues on PyTorch's current stream (or ``stream``), checked like
    :meth:`KernelModule.launch`; a tensor passed on another stream than its own is recorded
    on it, so its memory is not reused before the kernel ran."""

    def __init__(self, module, name, size, align, fields):
        self.module, self.name, self.size, self.align = module, name, size, align
        #: ``(name, offset, size, kind)`` of each field, in order
        self.fields = [tuple(f) for f in fields]

    def __repr__(self):
        args = ", ".join(f"{n}: {k}" for n, _, _, k in self.fields)
        return f"<kernel {self.name}({args})>"

    def __call__(self, grid, block, *, shared_mem=0, stream=None, **values):
        names = [f[0] for f in self.fields]
        for k in values:
            if k not in names:
                raise TypeError(f"{self.name}: no field {k!r}; its fields are {', '.join(names)}")
        data = bytearray(self.size)
        tensors = []
        for fname, off, size, kind in self.fields:
            if fname not in values:
                if fname.startswith(("pad", "_")):
                    continue
                raise TypeError(f"{self.name}: field {fname!r} ({kind}) is missing")
            v = values[fname]
            if kind == "bytes":
                if not isinstance(v, (bytes, bytearray, memoryview)) or len(bytes(v)) != size:
                    raise TypeError(f"{self.name}: field {fname!r} takes {size} bytes, got {v!r}")
                data[off:off + size] = bytes(v)
                continue
            if kind.startswith("*"):
                if not isinstance(v, numbers.Integral) or isinstance(v, bool):
                    v = self._address(fname, kind, v, tensors)
                if not 0 <= int(v) < 2**64:
                    raise ValueError(f"{self.name}: field {fname!r} ({kind}) is {int(v)}; allowed 0..={2**64 - 1}")
                struct.pack_into("<Q", data, off, int(v))
                continue
            if kind == "bf16":
                if isinstance(v, bool) or not isinstance(v, numbers.Real):
                    raise TypeError(f"{self.name}: field {fname!r} ({kind}) takes a number, got {type(v).__name__}")
                try:
                    struct.pack_into("<H", data, off, _bf16_bits(float(v)))
                except (OverflowError, struct.error):
                    raise ValueError(f"{self.name}: field {fname!r} ({kind}) cannot hold {v!r}") from None
                continue
            if kind.startswith("f"):
                if isinstance(v, bool) or not isinstance(v, numbers.Real):
                    raise TypeError(f"{self.name}: field {fname!r} ({kind}) takes a number, got {type(v).__name__}")
                try:
                    struct.pack_into(_PACK[kind], data, off, float(v))
                except (OverflowError, struct.error):
                    raise ValueError(f"{self.name}: field {fname!r} ({kind}) cannot hold {v!r}") from None
                continue
            if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                raise TypeError(f"{self.name}: field {fname!r} ({kind}) takes an integer, got {type(v).__name__}")
            bits = int(kind[1:])
            lo, hi = (0, 2**bits - 1) if kind[0] == "u" else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
            if not lo <= int(v) <= hi:
                raise ValueError(f"{self.name}: field {fname!r} ({kind}) is {int(v)}; allowed {lo}..={hi}")
            struct.pack_into(_PACK[kind], data, off, int(v))
        s = _stream(stream, self.module.device)
        self.module._m.launch(s, self.name, _dim3(grid, "grid"), _dim3(block, "block"), int(shared_mem),
                              bytes(data), self.align)
        torch = _torch()
        if stream is not None and torch is not None:
            for t in tensors:
                if isinstance(t, torch.Tensor):
                    t.record_stream(torch.cuda.ExternalStream(s, device=self.module.device))

    def _address(self, fname, kind, v, tensors):
        """The device address of a tensor or ``__cuda_array_interface__`` object for the
        pointer field ``fname`` of ``kind`` (``*const f32``), checked to be on the module's
        device and to hold the field's element type."""
        elem = kind.split()[-1]
        dtype, typestrs = _ELEMENTS.get(elem, (None, None))
        typestrs = (typestrs,) if isinstance(typestrs, str) else typestrs
        torch = _torch()
        if torch is not None and isinstance(v, torch.Tensor):
            if not v.is_cuda or v.get_device() != self.module.device:
                raise ValueError(f"{self.name}: field {fname!r} takes a tensor on cuda:{self.module.device}, "
                                 f"got one on {v.device}")
            want = getattr(torch, dtype, None) if dtype is not None else None
            if want is not None and v.dtype != want:
                raise TypeError(f"{self.name}: field {fname!r} ({kind}) takes a {dtype} tensor, got {v.dtype}")
            tensors.append(v)
            return v.data_ptr()
        cai = getattr(v, "__cuda_array_interface__", None)
        if cai is not None:
            if typestrs is not None and cai.get("typestr") not in typestrs:
                raise TypeError(f"{self.name}: field {fname!r} ({kind}) takes {elem} elements "
                                f"({' or '.join(typestrs)}), got {cai.get('typestr')!r}")
            tensors.append(v)
            return int(cai["data"][0])
        raise TypeError(f"{self.name}: field {fname!r} ({kind}) takes a CUDA tensor or an integer address, "
                        f"got {type(v).__name__}")
