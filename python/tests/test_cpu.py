"""What works without a GPU (and without torch): import, argument checks with errors naming the
argument, and a clear NoGpuError when a GPU function is reached. Objects exposing
``__cuda_array_interface__`` stand in for tensors; nothing here touches device memory."""
import ctypes
import struct

import pytest

import streamline as sl
from streamline import functional as F

NO_GPU = sl.gpu_available() is not None
needs_no_gpu = pytest.mark.skipif(not NO_GPU, reason="a GPU is present: this checks the error without one")


class Cai:
    """A stand-in device array: only its interface (the address is never dereferenced here)."""

    def __init__(self, shape, typestr="<f4", ptr=0x10000, readonly=False, strides=None, stream=None):
        self.__cuda_array_interface__ = dict(
            shape=tuple(shape), typestr=typestr, data=(ptr, readonly), strides=strides, version=3, stream=stream
        )


_NEXT = [0x10000]


def img(*shape, t="<f4"):
    """A stand-in array at an address of its own (16 MiB apart from the others)."""
    _NEXT[0] += 1 << 24
    return Cai(shape, t, ptr=_NEXT[0])


def test_import_and_status():
    status = sl.gpu_available()
    assert status is None or isinstance(status, str)
    assert issubclass(sl.NoGpuError, RuntimeError)
    for name in ("roi_align", "rotate", "gaussian_blur", "resize", "normalize", "to_float", "augment", "heavy", "sgemm",
                 "matmul"):
        assert callable(getattr(sl, name))


@needs_no_gpu
def test_status_says_why():
    assert "driver" in sl.gpu_available() or "device" in sl.gpu_available()


@needs_no_gpu
@pytest.mark.parametrize(
    "call",
    [
        lambda: sl.normalize(img(2, 3, 8, 8), [0, 0, 0], [1, 1, 1], out=img(2, 3, 8, 8)),
        lambda: sl.to_float(img(2, 3, 8, 8, t="|u1"), out=img(2, 3, 8, 8)),
        lambda: sl.rotate(img(2, 3, 8, 8), 30.0, out=img(2, 3, 8, 8)),
        lambda: sl.augment(img(2, 3, 16, 16, t="|u1"), 16, out=img(2, 3, 16, 16)),
        lambda: sl.heavy(img(100), out=img(100)),
        lambda: sl.sgemm(img(4, 5), img(5, 6), out=img(4, 6)),
        lambda: sl.device_info(0),
        lambda: sl.load_module("/nonexistent/k.ptx"),
    ],
)
def test_gpu_call_without_gpu_raises_no_gpu_error(call):
    with pytest.raises(sl.NoGpuError, match="driver|device"):
        call()


def test_not_an_array():
    with pytest.raises(TypeError, match="inpt: must be a CUDA tensor or an object with __cuda_array_interface__"):
        sl.normalize([[1.0]], [0], [1])


def test_wrong_dtype_names_argument():
    with pytest.raises(TypeError, match="inpt: typestr '<f4' is not supported; allowed: uint8"):
        sl.to_float(img(1, 3, 4, 4), out=img(1, 3, 4, 4))
    with pytest.raises(TypeError, match="out: typestr"):
        sl.to_float(img(1, 3, 4, 4, t="|u1"), out=img(1, 3, 4, 4, t="|u1"))


def test_wrong_rank_names_argument():
    with pytest.raises(ValueError, match=r"inpt: has 2 dimensions .* allowed: 3 or 4"):
        sl.normalize(img(4, 4), [0], [1], out=img(4, 4))


def test_non_contiguous_refused():
    x = Cai((2, 3, 4, 4), strides=(4, 32, 8, 96))
    with pytest.raises(ValueError, match="inpt: must be C-contiguous"):
        sl.normalize(x, [0] * 3, [1] * 3, out=img(2, 3, 4, 4))


def test_contiguous_strides_accepted_with_unit_dims():
    # extent-1 dimensions may carry any stride
    x = Cai((1, 3, 4, 4), strides=(996, 64, 16, 4))
    if NO_GPU:
        with pytest.raises(sl.NoGpuError):
            sl.normalize(x, [0] * 3, [1] * 3, out=img(1, 3, 4, 4))


def test_output_shape_and_readonly():
    with pytest.raises(ValueError, match=r"`out`: has shape \(2, 3, 8, 8\); needs \(2, 3, 16, 16\)"):
        sl.resize(img(2, 3, 8, 8), [16, 16], out=img(2, 3, 8, 8))
    with pytest.raises(ValueError, match="out: is read-only"):
        sl.normalize(img(1, 1, 2, 2), [0], [1], out=Cai((1, 1, 2, 2), readonly=True))


def test_out_required_without_torch_inputs():
    with pytest.raises(TypeError, match="out: required when the inputs are not torch tensors"):
        sl.rotate(img(1, 3, 8, 8), 10.0)


def test_device_free_library_checks_name_the_argument():
    x = img(2, 3, 8, 8)
    with pytest.raises(ValueError, match="invalid argument `kernel_size`: 8: must be odd"):
        sl.gaussian_blur(x, 8, out=img(2, 3, 8, 8))
    with pytest.raises(ValueError, match="invalid argument `kernel_size`: 17 needs an image width of at least 9"):
        sl.gaussian_blur(x, 17, out=img(2, 3, 8, 8))
    with pytest.raises(ValueError, match="invalid argument `sigma`: -1: must be finite and > 0"):
        sl.gaussian_blur(x, 3, -1.0, out=img(2, 3, 8, 8))
    with pytest.raises(ValueError, match=r"sigma: has 3 pairs; needs one per image \(2\)"):
        sl.gaussian_blur(x, 3, [[1, 1]] * 3, out=img(2, 3, 8, 8))
    u8 = img(2, 3, 8, 8, t="|u1")
    with pytest.raises(ValueError, match="invalid argument `crop`: 12: must be 1..=8"):
        sl.augment(u8, 16, crop=12, out=img(2, 3, 16, 16))
    with pytest.raises(ValueError, match="invalid argument `kernel_size`"):
        sl.augment(u8, 16, kernel_size=4, out=img(2, 3, 16, 16))
    with pytest.raises(ValueError, match="std"):
        sl.augment(u8, 16, std=[1, 0, 1], out=img(2, 3, 16, 16))
    with pytest.raises(ValueError, match="invalid argument `boxes`: box 0: batch index 0.5"):
        sl.roi_align(x, [[0.5, 0, 0, 4, 4]], 4, out=img(1, 3, 4, 4))
    with pytest.raises(ValueError, match="invalid argument `boxes`"):
        sl.roi_align(x, [[5, 0, 0, 4, 4]], 4, out=img(1, 3, 4, 4))


def test_python_level_checks():
    x = img(2, 3, 8, 8)
    with pytest.raises(ValueError, match="expand: only False"):
        sl.rotate(x, 10, expand=True, out=x)
    with pytest.raises(ValueError, match="center: only None"):
        sl.rotate(x, 10, center=[1, 1], out=x)
    with pytest.raises(ValueError, match="angle: has 3 values; needs one per image"):
        sl.rotate(x, [1, 2, 3], out=img(2, 3, 8, 8))
    with pytest.raises(ValueError, match="fill: .*one value for every channel"):
        sl.rotate(x, 1, fill=[1, 2, 3], out=img(2, 3, 8, 8))
    with pytest.raises(ValueError, match="layout: 'CHW'"):
        sl.rotate(x, 1, layout="CHW", out=img(2, 3, 8, 8))
    with pytest.raises(ValueError, match="output_layout: 'HWC'"):
        sl.rotate(x, 1, output_layout="HWC", out=img(2, 3, 8, 8))
    with pytest.raises(ValueError, match=r"`out`: has shape \(2, 3, 8, 8\); needs \(2, 8, 8, 3\)"):
        sl.rotate(x, 1, output_layout="NHWC", out=img(2, 3, 8, 8))
    with pytest.raises(ValueError, match="interpolation: 'bicubic' is not supported"):
        sl.resize(x, 4, interpolation="bicubic", out=img(2, 3, 4, 4))
    with pytest.raises(ValueError, match="layout: 'CHW'"):
        sl.to_float(img(2, 3, 8, 8, t="|u1"), layout="CHW", out=x)
    with pytest.raises(ValueError, match=r"`b`: has 4 rows; a \(3, 5\) needs 5"):
        sl.sgemm(img(3, 5), img(4, 6), out=img(3, 6))
    with pytest.raises(ValueError, match="`out`: required when beta is not 0"):
        sl.sgemm(img(3, 5), img(5, 6), beta=1.0)
    with pytest.raises(ValueError, match="out: cannot be given with inplace=True"):
        sl.normalize(x, [0] * 3, [1] * 3, inplace=True, out=x)
    with pytest.raises(TypeError, match="stream: must be a torch.cuda.Stream"):
        sl.normalize(x, [0] * 3, [1] * 3, out=x, stream="fast")


def test_resized_size_follows_torchvision():
    # the shorter edge to `size`, the longer scaled and truncated; [h, w] as given
    assert F._resized_size(128, 256, 512, None) == (128, 256)
    assert F._resized_size(100, 300, 200, None) == (150, 100)
    assert F._resized_size([64, 48], 10, 10, None) == (64, 48)
    assert F._resized_size(100, 300, 200, 120) == (120, 80)
    with pytest.raises(ValueError, match="max_size"):
        F._resized_size([64, 48], 10, 10, 100)


def test_kernel_launch_argument_checks():
    from streamline._kernels import KernelModule, _dim3

    assert _dim3(5, "grid") == (5, 1, 1)
    assert _dim3((2, 3), "block") == (2, 3, 1)
    with pytest.raises(ValueError, match="block: .* each at least 1"):
        _dim3((0, 1), "block")
    m = KernelModule.__new__(KernelModule)
    m.device = 0

    with pytest.raises(TypeError, match="params: must be a ctypes.Structure or bytes"):
        m.launch("k", 1, 1, [1, 2])


def test_augment_transform_repr_and_draw_sequence():
    a = sl.Augment(256, seed=7)
    assert repr(a).startswith("Augment(size=256")
    b = sl.Augment(256, seed=7)
    assert [a._rng.getrandbits(64) for _ in range(3)] == [b._rng.getrandbits(64) for _ in range(3)]
    with pytest.raises(ValueError, match="draw_on"):
        sl.Augment(256, draw_on="gpu")


def test_augment_device_draw_is_computed_on_the_host():
    a, b = sl.Augment(64, seed=7, per_image_sigma=False), sl.Augment(64, seed=7, per_image_sigma=False)
    d0 = a.device_draw(0, (5, 3, 50, 70))
    assert d0 == b.device_draw(0, (5, 3, 50, 70))
    assert d0 != a.device_draw(1, (5, 3, 50, 70))
    boxes, angles, sigmas = d0
    assert len(boxes) == len(angles) == len(sigmas) == 5
    assert len(set(sigmas)) == 1 and 0.1 <= sigmas[0] < 2.0
    assert all(-45 <= t < 45 for t in angles)
    assert all(b[2] - b[0] == 32 and b[3] - b[1] == 32 and b[2] <= 70 and b[3] <= 50 for b in boxes)
    nhwc = sl.Augment(64, seed=7, per_image_sigma=False, layout="NHWC")
    assert nhwc.device_draw(0, (5, 50, 70, 3)) == d0


def test_ctypes_struct_bytes_match_repr_c():
    class SaxpyParams(ctypes.Structure):
        _fields_ = [("x", ctypes.c_uint64), ("y", ctypes.c_uint64), ("n", ctypes.c_uint64),
                    ("a", ctypes.c_float), ("pad", ctypes.c_uint32)]

    p = SaxpyParams(1, 2, 3, 2.0, 0)
    assert len(bytes(p)) == 32 and ctypes.alignment(p) == 8


def test_output_overlapping_an_input_is_refused():
    x = img(2, 3, 8, 8)
    with pytest.raises(ValueError, match="out: overlaps inpt"):
        sl.rotate(x, 10, out=x)
    with pytest.raises(ValueError, match="out: overlaps inpt"):
        sl.gaussian_blur(x, 3, out=Cai((2, 3, 8, 8), ptr=x.__cuda_array_interface__["data"][0] + 64))
    a = img(3, 5)
    with pytest.raises(ValueError, match="out: overlaps a"):
        sl.sgemm(a, img(5, 6), out=Cai((3, 6), ptr=a.__cuda_array_interface__["data"][0]))
    with pytest.raises(ValueError, match="out: overlaps x"):
        sl.heavy(x := img(100), out=x)


@needs_no_gpu
def test_in_place_normalize_and_one_row_operands_reach_the_gpu():
    x = img(1, 3, 4, 4)
    with pytest.raises(sl.NoGpuError):
        sl.normalize(x, [0] * 3, [1] * 3, inplace=True)
    # A single row: any row pitch (torch reports such views as contiguous).
    row = Cai((1, 5), strides=(4, 4))
    with pytest.raises(sl.NoGpuError):
        sl.sgemm(row, img(5, 6), out=img(1, 6))


class _Recorder:
    """Stands in for a loaded module: records what a typed call would launch."""

    device = 0

    def __init__(self):
        self.calls = []
        self._m = self

    def launch(self, stream, name, grid, block, shared, data, align):
        self.calls.append((stream, name, grid, block, shared, data, align))


SAXPY_FIELDS = [("x", 0, 8, "*const f32"), ("y", 8, 8, "*mut f32"), ("n", 16, 8, "u64"), ("a", 24, 4, "f32"),
                ("pad", 28, 4, "u32")]


class _DeviceArray:
    """A ``__cuda_array_interface__`` object of ``typestr`` elements at ``addr``."""

    def __init__(self, addr, typestr):
        self.__cuda_array_interface__ = {"data": (addr, False), "typestr": typestr, "shape": (4,), "version": 3}


def test_typed_kernel_packs_fields_by_name_as_repr_c():
    from streamline._kernels import TypedKernel

    class SaxpyParams(ctypes.Structure):
        _fields_ = [("x", ctypes.c_uint64), ("y", ctypes.c_uint64), ("n", ctypes.c_uint64),
                    ("a", ctypes.c_float), ("pad", ctypes.c_uint32)]

    rec = _Recorder()
    k = TypedKernel(rec, "saxpy", 32, 8, SAXPY_FIELDS)
    assert repr(k) == "<kernel saxpy(x: *const f32, y: *mut f32, n: u64, a: f32, pad: u32)>"
    k(4, (256,), x=0x7000_0000, y=0x7000_1000, n=1000, a=2.5)  # pad defaults to 0
    k(4, (256,), x=_DeviceArray(0x7000_0000, "<f4"), y=_DeviceArray(0x7000_1000, "<f4"), n=1000, a=2.5)
    (stream, name, grid, block, shared, data, align), again = rec.calls
    assert (name, grid, block, shared, align) == ("saxpy", (4, 1, 1), (256, 1, 1), 0, 8)
    assert data == bytes(SaxpyParams(0x7000_0000, 0x7000_1000, 1000, 2.5, 0))
    assert again[5] == data


def test_typed_kernel_packs_half_precision_fields():
    from streamline._kernels import TypedKernel, _bf16_bits

    # Ties to even, one rounding only (1 + 2^-8 + 2^-30 is above the tie: rounding through f32
    # first would make it one), signed infinities and NaN kept.
    assert [_bf16_bits(v) for v in (1.0, -2.0, 1.0 + 2**-8, 1.0 + 3 * 2**-8, 1 + 2**-8 + 2**-30)] == [
        0x3F80, 0xC000, 0x3F80, 0x3F82, 0x3F81]
    assert (_bf16_bits(float("-inf")), _bf16_bits(float("nan")) & 0x7FC0) == (0xFF80, 0x7FC0)
    with pytest.raises(OverflowError):
        _bf16_bits(3.4e38)
    rec = _Recorder()
    fields = [("h", 0, 2, "f16"), ("b", 2, 2, "bf16"), ("y", 8, 8, "*mut bf16")]
    TypedKernel(rec, "k", 16, 8, fields)(1, 32, h=1.5, b=-2.0, y=_DeviceArray(0x100, "<u2"))
    data = rec.calls[0][5]
    assert data[:4] == struct.pack("<eH", 1.5, 0xC000) and data[8:] == struct.pack("<Q", 0x100)


@pytest.mark.parametrize("kwargs,error,match", [
    (dict(x=1, y=2, n=3, a=1.0, b=4), TypeError, "saxpy: no field 'b'; its fields are x, y, n, a, pad"),
    (dict(x=1, y=2, a=1.0), TypeError, "saxpy: field 'n' \\(u64\\) is missing"),
    (dict(x=1, y=2, n=3, a="2"), TypeError, "saxpy: field 'a' \\(f32\\) takes a number, got str"),
    (dict(x=1, y=2, n=3.5, a=1.0), TypeError, "saxpy: field 'n' \\(u64\\) takes an integer, got float"),
    (dict(x=2.0, y=2, n=3, a=1.0), TypeError,
     "saxpy: field 'x' \\(\\*const f32\\) takes a CUDA tensor or an integer address, got float"),
    (dict(x=_DeviceArray(1, "<f8"), y=2, n=3, a=1.0), TypeError,
     "saxpy: field 'x' \\(\\*const f32\\) takes f32 elements \\(<f4\\), got '<f8'"),
    (dict(x=1, y=_DeviceArray(2, "<f2"), n=3, a=1.0), TypeError,
     "saxpy: field 'y' \\(\\*mut f32\\) takes f32 elements \\(<f4\\), got '<f2'"),
    (dict(x=1, y=2, n=-1, a=1.0), ValueError, "saxpy: field 'n' \\(u64\\) is -1; allowed 0..="),
    (dict(x=-1, y=2, n=3, a=1.0), ValueError, "saxpy: field 'x' \\(\\*const f32\\) is -1; allowed 0..="),
    (dict(x=1, y=2, n=3, a=1.0, pad=2**32), ValueError, "saxpy: field 'pad' \\(u32\\) is 4294967296"),
    (dict(x=1, y=2, n=3, a=True), TypeError, "saxpy: field 'a' \\(f32\\) takes a number, got bool"),
])
def test_typed_kernel_refuses_wrong_fields_naming_them(kwargs, error, match):
    from streamline._kernels import TypedKernel

    rec = _Recorder()
    with pytest.raises(error, match=match):
        TypedKernel(rec, "saxpy", 32, 8, SAXPY_FIELDS)(1, 32, **kwargs)
    assert rec.calls == []


def test_operations_are_described_once():
    from streamline import _native, _ops

    ops = _ops.OPS
    assert set(ops) == {"to_float", "normalize", "resize", "rotate", "gaussian_blur", "roi_align", "roi_align_backward",
                        "augment", "augment_drawn", "augment_ragged", "heavy", "sgemm", "matmul"}
    assert ops["normalize"].schema == "(Tensor inpt, float[] mean, float[] std, str layout) -> Tensor"
    # the draw is for direct calls only; the generator's state is written
    assert "draw" not in ops["augment"].schema and ops["augment"].args[-1].kind == "host"
    assert "Tensor(a!) state" in ops["augment_drawn"].schema
    assert ops["augment_ragged"].schema.startswith("(Tensor inpt, Tensor extents, Tensor(a!) state, int size")
    assert ops["matmul"].args[1].like == "a" and ops["matmul"].args[2].initial_output
    assert ops["heavy"].out_like == "x" and ops["to_float"].out_dtype == "float32"

    def t(*shape, dtype="float32"):
        return (0, shape, dtype, None)

    # output shapes from the library's rules, device-free
    shape = _native.output_shape
    assert shape("to_float", (t(2, 5, 7, 3, dtype="uint8"), True, "NHWC", "NCHW")) == [2, 3, 5, 7]
    assert shape("resize", (t(3, 8, 8), [4, 6], "bilinear", True, "NCHW", "NCHW")) == [3, 4, 6]
    assert shape("resize", (t(2, 8, 9, 3), [4, 6], "bilinear", True, "NHWC", "NHWC")) == [2, 4, 6, 3]
    assert shape("resize", (t(2, 8, 9, 3), [4, 6], "nearest", True, "NHWC", "NCHW")) == [2, 3, 4, 6]
    assert shape("gaussian_blur", (t(2, 8, 9, 3), [3, 3], [1.0, 1.0], "NHWC")) == [2, 8, 9, 3]
    assert shape("normalize", (t(8, 9, 3), [0.0] * 3, [1.0] * 3, "NHWC")) == [8, 9, 3]
    assert shape("rotate", (t(2, 3, 8, 9), [1.0, 2.0], "nearest", None, "NCHW", "NHWC")) == [2, 8, 9, 3]
    assert shape("roi_align", (t(2, 3, 8, 8), [[0, 0, 0, 4, 4], [1, 1, 1, 5, 5]], [2, 3], 1.0, -1, False)) == [2, 3, 2, 3]
    assert shape("roi_align", (t(2, 3, 8, 8), t(7, 5), [2, 3], 1.0, -1, False)) == [7, 3, 2, 3]
    cfg = [16, 8, 30.0, "nearest", 5, [0.5, 1.5], False, [0.0] * 3, [1.0] * 3, "NHWC", "NCHW"]
    assert shape("augment", (t(4, 20, 24, 3, dtype="uint8"), *cfg, -1, True)) == [4, 3, 16, 16]
    assert shape("matmul", (t(5, 7, dtype="bfloat16"), t(7, 9, dtype="bfloat16"), None, 1.0, 0.0)) == [5, 9]
    assert shape("heavy", (t(),)) == []
    # the description's dtypes and ranks are enforced natively too, naming the argument
    with pytest.raises(TypeError, match="b: dtype float16 is not supported; allowed: the dtype of a"):
        shape("matmul", (t(5, 7, dtype="bfloat16"), t(7, 9, dtype="float16"), None, 1.0, 0.0))
    with pytest.raises(ValueError, match=r"inpt: has 2 dimensions \(shape \[8, 8\]\); allowed: 3 to 4"):
        shape("normalize", (t(8, 8), [0.0], [1.0], "NCHW"))
    with pytest.raises(ValueError, match="invalid argument `kernel_size`: 4: must be odd"):
        shape("gaussian_blur", (t(1, 3, 8, 8), [4, 3], [1.0, 1.0], "NCHW"))
    with pytest.raises(ValueError, match="layout"):
        shape("gaussian_blur", (t(1, 3, 8, 8), [3, 3], [1.0, 1.0], "CHW"))
    with pytest.raises(TypeError, match="normalize: takes 4 arguments, got 2"):
        shape("normalize", (t(1, 3, 8, 8), [0.0]))
    # the matrix product's initial values are the output's own
    a, b, c, out = img(3, 5), img(5, 6), img(3, 6), img(3, 6)

    def t(x):
        ptr = x.__cuda_array_interface__["data"][0]
        return ptr, tuple(x.__cuda_array_interface__["shape"]), "float32", None

    with pytest.raises(ValueError, match="`out`: must be the tensor given as `c`"):
        _native.call("sgemm", 0, 0, (t(a), t(b), t(c), 1.0, 1.0), t(out))

