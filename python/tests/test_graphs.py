"""On a GPU with torch: every function of the package captured in a ``torch.cuda.graph`` and
replayed, against the eager call on the same inputs, bit for bit (the kernels are
deterministic). Between replays the inputs get new values and the outputs are poisoned, and
host memory that a stale copy could read is reused by eager calls with other parameters, so a
replay that read anything of the capture but the graph's own state would show. Functions
whose parameters cannot be read while capturing refuse with an error that says what to pass.
Skipped, saying why, elsewhere.
"""
import os

import pytest

torch = pytest.importorskip("torch")

import streamline as sl  # noqa: E402

if not torch.cuda.is_available():
    pytest.skip("no CUDA device for torch: GPU tests skipped", allow_module_level=True)
if sl.gpu_available() is not None:
    pytest.skip(f"streamline cannot use the GPU: {sl.gpu_available()}", allow_module_level=True)

DEV = torch.device("cuda")
NAN = float("nan")
REPLAYS = 3


def u8(shape, seed):
    g = torch.Generator(device="cpu").manual_seed(seed)
    return torch.randint(0, 256, shape, generator=g, dtype=torch.uint8).to(DEV)


def f32(shape, seed):
    return u8(shape, seed).float()


def churn():
    """Eager calls with other parameters: they allocate and free host values where a graph
    that copied from the captured call's host memory would now read."""
    x = f32((2, 3, 17, 19), 99)
    for _ in range(4):
        sl.normalize(x, [9.0, 8.0, 7.0], [0.5, 0.25, 2.0])
        sl.rotate(x, [11.0, -77.0], interpolation="bilinear")
        sl.gaussian_blur(x, 5, [[0.3, 0.7], [1.9, 1.1]])
        sl.roi_align(x, [[1, 0.0, 0.0, 9.0, 9.0]], 4)
    torch.cuda.synchronize()


def check_replays(inputs, fn, fresh):
    """Captures ``fn(*inputs)`` and replays it ``REPLAYS`` times; before each replay the inputs
    take ``fresh(r)``'s values and the outputs are poisoned, after it each output equals the
    eager call on those inputs bit for bit (NaN where the eager call gives NaN)."""
    # Warm up on a side stream, as torch asks before a capture.
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn(*inputs)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        outs = fn(*inputs)
    outs = outs if isinstance(outs, tuple) else (outs,)
    churn()
    for r in range(REPLAYS):
        for x, v in zip(inputs, fresh(r)):
            x.copy_(v)
        for o in outs:
            o.fill_(NAN if o.is_floating_point() else 0)
        g.replay()
        torch.cuda.synchronize()
        want = fn(*[v.clone() for v in fresh(r)])
        want = want if isinstance(want, tuple) else (want,)
        for i, (o, w) in enumerate(zip(outs, want)):
            assert o.shape == w.shape
            assert torch.equal(o.isnan(), w.isnan()), f"replay {r}, output {i}: NaN where eager has none"
            same = torch.equal(torch.nan_to_num(o, 0.0), torch.nan_to_num(w, 0.0))
            diff = (o - w).abs().nan_to_num(0.0).max().item()
            assert same, f"replay {r}, output {i}: differs from eager by up to {diff}"


def images(shape, dtype=torch.float32):
    make = f32 if dtype == torch.float32 else u8
    return [make(shape, 0)], lambda r: [make(shape, 10 + r)]


def test_to_float_captured():
    for src, dst in [("NCHW", "NCHW"), ("NHWC", "NCHW"), ("NCHW", "NHWC")]:
        ins, fresh = images((3, 5, 7, 3), torch.uint8) if src == "NHWC" else images((3, 3, 5, 7), torch.uint8)
        check_replays(ins, lambda x: sl.to_float(x, scale=True, layout=src, output_layout=dst), fresh)


def test_normalize_captured():
    ins, fresh = images((4, 3, 33, 35))
    check_replays(ins, lambda x: sl.normalize(x, [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]), fresh)
    ins, fresh = images((2, 3, 32, 32))
    check_replays(ins, lambda x: sl.normalize(x, torch.tensor([1.0, 2.0, 3.0]), (2.0, 4.0, 8.0)), fresh)
    nhwc, fresh = images((2, 17, 19, 3))
    check_replays(nhwc, lambda x: sl.normalize(x, [1.0, 2.0, 3.0], [2.0, 4.0, 8.0], layout="NHWC"), fresh)


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
def test_rotate_captured(mode):
    ins, fresh = images((5, 3, 40, 48))
    angles = [0.0, 33.3, -45.0, 90.0, 171.7]
    check_replays(ins, lambda x: sl.rotate(x, angles, interpolation=mode, fill=3.0), fresh)
    nhwc, fresh = images((2, 24, 32, 3))
    check_replays(nhwc, lambda x: sl.rotate(x, [12.5, -8.0], interpolation=mode, layout="NHWC",
                                            output_layout="NCHW"), fresh)


def test_gaussian_blur_captured():
    ins, fresh = images((3, 3, 29, 31))
    check_replays(ins, lambda x: sl.gaussian_blur(x, [5, 7], [0.8, 1.7]), fresh)
    check_replays(ins, lambda x: sl.gaussian_blur(x, 7, [[0.2, 0.2], [1.0, 2.0], [1.9, 0.4]]), fresh)
    check_replays(ins, lambda x: sl.gaussian_blur(x, 7, torch.tensor([[0.5, 0.5], [1.5, 1.5], [1.0, 1.0]])), fresh)
    nhwc, fresh = images((3, 29, 31, 3))
    check_replays(nhwc, lambda x: sl.gaussian_blur(x, 7, [0.8, 1.7], layout="NHWC"), fresh)
    check_replays(nhwc, lambda x: sl.gaussian_blur(x, [5, 9], [0.8, 1.7], layout="NHWC"), fresh)


def test_resize_captured():
    ins, fresh = images((2, 3, 37, 53))
    check_replays(ins, lambda x: sl.resize(x, [20, 26]), fresh)
    check_replays(ins, lambda x: sl.resize(x, [74, 90], interpolation="nearest"), fresh)
    nhwc, fresh = images((2, 37, 53, 3))
    for size, mode in (([74, 90], "bilinear"), ([20, 26], "bilinear"), ([74, 90], "nearest")):
        check_replays(nhwc, lambda x: sl.resize(x, size, interpolation=mode, layout="NHWC"), fresh)
        check_replays(nhwc, lambda x: sl.resize(x, size, interpolation=mode, layout="NHWC",
                                                output_layout="NCHW"), fresh)


def test_roi_align_captured_with_host_boxes():
    ins, fresh = images((2, 3, 40, 40))
    boxes = torch.tensor([[0, 1.5, 2.0, 30.0, 20.5], [1, 0.0, 0.0, 39.0, 39.0], [1, 10.0, 5.0, 12.0, 30.0]])
    check_replays(ins, lambda x: sl.roi_align(x, boxes, [7, 9], spatial_scale=1.0, sampling_ratio=2,
                                              aligned=True), fresh)
    check_replays(ins, lambda x: sl.roi_align(x, [b[:, 1:] for b in (boxes[:1], boxes[1:])], 5), fresh)


def test_roi_align_captured_with_device_boxes():
    """Boxes on the GPU are read by the kernel: they are graph inputs like the image."""
    x = f32((2, 3, 40, 40), 0)

    def boxes(r):
        b = torch.tensor([[0, 1.5 + r, 2.0, 30.0, 20.5], [1, 0.0, 0.0, 39.0, 39.0 - r], [1, 10.0, 5.0 + r, 12.0, 30.0]])
        return b.to(DEV)

    check_replays([x, boxes(0)], lambda x, b: sl.roi_align(x, b, [7, 9], sampling_ratio=2, aligned=True),
                  lambda r: [f32((2, 3, 40, 40), 20 + r), boxes(r + 1)])
    per_image = [torch.tensor([[1.0, 2.0, 20.0, 30.0]], device=DEV), torch.tensor([[0.0, 0.0, 5.0, 5.0]], device=DEV)]
    check_replays([x], lambda x: sl.roi_align(x, per_image, 5), lambda r: [f32((2, 3, 40, 40), 30 + r)])


def test_cuda_parameters_are_refused_while_capturing():
    x = f32((2, 3, 16, 16), 1)
    angles = torch.tensor([1.0, 2.0], device=DEV)
    sigmas = torch.tensor([[1.0, 1.0], [2.0, 2.0]], device=DEV)
    means = torch.zeros(3, device=DEV)
    cases = [
        ("angle", lambda: sl.rotate(x, angles)),
        ("sigma", lambda: sl.gaussian_blur(x, 3, sigmas)),
        ("mean", lambda: sl.normalize(x, means, [1.0, 1.0, 1.0])),
    ]
    for arg, call in cases:
        call()  # eager: read on the host, fine
        g = torch.cuda.CUDAGraph()
        with pytest.raises(ValueError, match=f"{arg}: a CUDA tensor cannot be read by the host while a CUDA graph"):
            with torch.cuda.graph(g):
                call()


def randn(shape, seed):
    return torch.randn(shape, generator=torch.Generator(device="cpu").manual_seed(seed)).to(DEV)


def test_heavy_and_sgemm_captured():
    check_replays([randn(100_003, 0)], sl.heavy, lambda r: [randn(100_003, 1 + r)])
    check_replays([randn((65, 33), 0), randn((33, 47), 1)], lambda a, b: sl.sgemm(a, b),
                  lambda r: [randn((65, 33), 10 + r), randn((33, 47), 20 + r)])


def test_matmul_half_captured():
    for dt in (torch.bfloat16, torch.float16):
        check_replays([randn((65, 40), 0).to(dt), randn((40, 48), 1).to(dt)], lambda a, b: sl.matmul(a, b),
                      lambda r: [randn((65, 40), 10 + r).to(dt), randn((40, 48), 20 + r).to(dt)])


def test_augment_functional_captured_replays_its_draw():
    ins, fresh = images((4, 3, 50, 60), torch.uint8)
    for interp in ["nearest", "bilinear"]:
        check_replays(ins, lambda x: sl.augment(x, 48, crop=24, interpolation=interp, seed=17,
                                                mean=[0.5, 0.4, 0.3], std=[0.2, 0.3, 0.4]), fresh)
    nhwc, fresh = images((4, 50, 60, 3), torch.uint8)
    draw = ([[0, 0, 24, 24], [1, 2, 25, 26], [26, 10, 50, 34], [5, 5, 29, 29]], [0.0, 10.0, -20.0, 44.0],
            [0.5, 1.0, 1.5, 2.0])
    check_replays(nhwc, lambda x: sl.augment(x, 48, crop=24, layout="NHWC", output_layout="NHWC", draw=draw), fresh)


@pytest.mark.parametrize("per_image_sigma", [True, False])
def test_augment_draws_anew_at_every_replay(per_image_sigma):
    """A captured ``sl.Augment`` replays the same sequence of batches as eager calls with the
    same seed, and each batch is the fused kernel's output for the host's computation of the
    device's draw."""
    x = u8((6, 3, 64, 80), 3)
    eager = sl.Augment(64, seed=2024, per_image_sigma=per_image_sigma)
    want = [eager(x).clone() for _ in range(REPLAYS + 1)]
    assert eager.draws() == REPLAYS + 1
    for k in range(REPLAYS + 1):
        draw = eager.device_draw(k, x.shape)
        assert torch.equal(want[k], sl.augment(x, 64, draw=draw, per_image_sigma=per_image_sigma)), f"draw {k}"
    assert not torch.equal(want[0], want[1])
    captured = sl.Augment(64, seed=2024, per_image_sigma=per_image_sigma)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = captured(x)
    assert captured.draws() == 0  # capturing runs nothing
    churn()
    for k in range(REPLAYS):
        y.fill_(NAN)
        g.replay()
        assert torch.equal(y, want[k]), f"replay {k} differs from eager call {k}"
    # Eager calls after the replays continue the same sequence.
    assert torch.equal(captured(x), want[REPLAYS])
    assert captured.draws() == REPLAYS + 1


def test_augment_host_draw_keeps_last_draw():
    x = u8((4, 3, 64, 64), 4)
    a = sl.Augment(64, seed=5, draw_on="host")
    y = a(x)
    assert torch.equal(y, sl.augment(x, 64, draw=a.last_draw))


def test_user_kernel_captured():
    ptx = os.environ.get("STREAMLINE_SAXPY_PTX")
    if not ptx or not os.path.exists(ptx):
        pytest.skip("STREAMLINE_SAXPY_PTX (the saxpy example's PTX) is not set")
    import ctypes

    class SaxpyParams(ctypes.Structure):
        _fields_ = [("x", ctypes.c_uint64), ("y", ctypes.c_uint64), ("n", ctypes.c_uint64),
                    ("a", ctypes.c_float), ("pad", ctypes.c_uint32)]

    m = sl.load_module(ptx)
    n = 10_007
    x, y = torch.rand(n, device=DEV), torch.zeros(n, device=DEV)

    def saxpy(x, y):
        m.launch("saxpy", (n + 255) // 256, 256, SaxpyParams(x.data_ptr(), y.data_ptr(), n, 2.0, 0))
        return y

    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        saxpy(x, y)
    for r in range(REPLAYS):
        x.copy_(torch.rand(n, device=DEV))
        y.fill_(float(r))
        want = 2.0 * x + y  # 2x is exact, so one rounding, as the kernel's fma
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(y, want)
