"""Your own Streamline kernels, launched on PyTorch tensors and streams (as CuPy's
``RawKernel`` launches CUDA C++)."""
import ctypes

from . import _native
from ._arrays import _torch


class KernelModule:
    """A kernel module built by ``streamline_builder`` (``NAME.ptx`` beside its
    ``NAME.manifest.json``), loaded on one device; its kernels by name in ``kernels``."""

    def __init__(self, ptx, device=0):
        self.device = int(device)
        self._m = _native.KernelModule(self.device, str(ptx))
        #: name -> (parameter size, parameter alignment, declared max threads per block or None)
        self.kernels = {name: (size, align, bound) for name, size, align, bound in self._m.kernels()}

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
    return torch._C._cuda_getCurrentRawStream(device) if torch is not None else 0


def load_module(ptx, device=0):
    """Loads your kernel module from ``DIR/NAME.ptx`` (with its manifest) on ``device``."""
    return KernelModule(ptx, device)
