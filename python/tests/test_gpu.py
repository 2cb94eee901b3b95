"""On a GPU with torch and torchvision: every operation against torchvision (or torch) on random
and adversarial inputs, within the bounds of the kernels' written error analysis
(`testing/src/reference/image/mod.rs`); outputs poisoned first so every element must be written;
stream semantics as torch's own operations have them; a user's kernel module launched on
tensors. Skipped, saying why, elsewhere.

Tolerances. An output that is a weighted sum of ``m`` inputs (weights >= 0 summing to at most 1)
is within ``(m + 8) u max|v|`` of the exact value (``u = 2^-24``); where a weight depends on a
source coordinate computed in f32 (resize, rotation, roi_align) add ``2 delta max|v|`` with
``delta = 4 u (h + w)``. torchvision's result carries the same kind of error, so the two may
differ by twice that. Nearest-neighbour choices within ``delta`` of a rounding tie may go either
way: those pixels are counted, not compared.
"""
import ctypes
import os
import random

import pytest

torch = pytest.importorskip("torch")
tv = pytest.importorskip("torchvision")
import torchvision.ops as ops  # noqa: E402
import torchvision.transforms.v2.functional as TF  # noqa: E402

import streamline as sl  # noqa: E402

if not torch.cuda.is_available():
    pytest.skip("no CUDA device for torch: GPU tests skipped", allow_module_level=True)
if sl.gpu_available() is not None:
    pytest.skip(f"streamline cannot use the GPU: {sl.gpu_available()}", allow_module_level=True)

# cuDNN's convolutions (torchvision's blur) would otherwise round through TF32.
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False

DEV = torch.device("cuda")
U = 2.0**-24
SMALL = os.environ.get("SL_TEST_SMALL") == "1"  # fewer, smaller cases (under compute-sanitizer)
POISON = float("nan")


def bound(m, vmax, h=0, w=0):
    """Twice the written bound for a weighted sum of ``m`` inputs (coordinate term with
    ``h + w``)."""
    return 2 * ((m + 8) * U * vmax + 2 * 4 * U * (h + w) * vmax)


def poisoned(shape, dtype=torch.float32):
    return torch.full(shape, POISON, dtype=dtype, device=DEV)


def assert_within(ours, ref, tol, what):
    assert ours.shape == ref.shape, f"{what}: shape {tuple(ours.shape)} vs {tuple(ref.shape)}"
    assert not torch.isnan(ours).any(), f"{what}: some outputs were not written (still NaN)"
    err = (ours.double() - ref.double()).abs().max().item()
    assert err <= tol, f"{what}: max |ours - torchvision| = {err:.3g} > bound {tol:.3g}"
    return err


def images(n, c, h, w, seed, kind="random"):
    g = torch.Generator(device="cpu").manual_seed(seed)
    if kind == "random":
        x = torch.randint(0, 256, (n, c, h, w), generator=g, dtype=torch.uint8)
    elif kind == "checker":  # sharp edges everywhere: the worst case for interpolation
        yy, xx = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
        x = (((yy + xx) % 2) * 255).to(torch.uint8).expand(n, c, h, w).contiguous()
    else:  # constant
        x = torch.full((n, c, h, w), 200, dtype=torch.uint8)
    return x.to(DEV)


SHAPES = [(2, 3, 37, 53), (3, 1, 64, 64), (1, 4, 17, 256)] if not SMALL else [(2, 3, 37, 53)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("scale", [False, True])
def test_to_float_both_layouts(shape, scale):
    x = images(*shape, seed=1)
    want = TF.to_dtype(x, torch.float32, scale=scale)
    got = sl.to_float(x, scale=scale)
    assert torch.equal(got, want)
    nhwc = x.permute(0, 2, 3, 1).contiguous()
    assert torch.equal(sl.to_float(nhwc, scale=scale, layout="NHWC"), want)
    assert torch.equal(sl.to_float(x, scale=scale, output_layout="NHWC"), want.permute(0, 2, 3, 1))


@pytest.mark.parametrize("shape", SHAPES)
def test_normalize(shape):
    x = images(*shape, seed=2).float()
    c = shape[1]
    mean, std = [0.485, 0.456, 0.406, 0.5][:c], [0.229, 0.224, 0.225, 0.25][:c]
    want = TF.normalize(x, mean, std)
    out = poisoned(shape)
    sl.normalize(x, mean, std, out=out)
    assert_within(out, want, 4 * U * want.abs().max().item(), "normalize")
    y = x.clone()
    assert sl.normalize(y, mean, std, inplace=True) is y
    assert torch.equal(y, out)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("size", [[128, 96], [13, 29], 40])
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("antialias", [True, False])
def test_resize(shape, size, mode, antialias):
    x = images(*shape, seed=3).float()
    interp = tv.transforms.InterpolationMode(mode)
    want = TF.resize(x, size, interpolation=interp, antialias=antialias)
    got = sl.resize(x, size, interpolation=interp, antialias=antialias)
    h, w = shape[2:]
    if mode == "nearest":
        assert torch.equal(got, want)
    else:
        taps = (max(1, h // want.shape[2]) * 2 + 2) * (max(1, w // want.shape[3]) * 2 + 2)
        assert_within(got, want, bound(taps, 255, h, w), f"resize {mode} aa={antialias}")


def nearest_mismatch(got, want):
    return (got != want).float().mean().item()


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
@pytest.mark.parametrize("fill", [None, 7.0])
@pytest.mark.parametrize("kind", ["random", "checker"])
def test_rotate_per_image_angles(shape, mode, fill, kind):
    n = shape[0]
    x = images(*shape, seed=4, kind=kind).float()
    angles = [0.0, 90.0, -45.0, 33.3, 180.0, -127.9][:n] if n <= 6 else None
    out = poisoned(shape)
    sl.rotate(x, angles, interpolation=mode, fill=fill, out=out)
    interp = tv.transforms.InterpolationMode(mode)
    want = torch.stack([
        TF.rotate(x[i], angles[i], interpolation=interp, fill=None if fill is None else [fill])
        for i in range(n)
    ])
    h, w = shape[2:]
    if mode == "nearest":
        assert not torch.isnan(out).any()
        frac = nearest_mismatch(out, want)
        # ties within delta of a rounding boundary: a few per thousand at most
        assert frac <= 0.01, f"rotate nearest: {frac:.4%} of values differ"
    else:
        assert_within(out, want, bound(4, 255, h, w), "rotate bilinear")


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
@pytest.mark.parametrize("layouts", [("NHWC", "NHWC"), ("NHWC", "NCHW"), ("NCHW", "NHWC")])
def test_rotate_layouts(mode, layouts):
    """Every pair of layouts gives the NCHW rotation's values exactly, in the shape asked for."""
    src, dst = layouts
    x = images(5, 3, 37, 70, seed=14).float()
    angles = [0.0, 90.0, -45.0, 33.3, 180.0]
    want = sl.rotate(x, angles, interpolation=mode, fill=2.0)
    inpt = x.permute(0, 2, 3, 1).contiguous() if src == "NHWC" else x
    got = sl.rotate(inpt, angles, interpolation=mode, fill=2.0, layout=src, output_layout=dst)
    assert got.shape == ((5, 37, 70, 3) if dst == "NHWC" else (5, 3, 37, 70))
    got = got.permute(0, 3, 1, 2) if dst == "NHWC" else got
    assert torch.equal(got, want)


@pytest.mark.parametrize("layouts", [("NHWC", "NHWC"), ("NHWC", "NCHW"), ("NCHW", "NHWC")])
@pytest.mark.parametrize("size, mode, antialias", [([74, 90], "bilinear", True), ([20, 26], "bilinear", True),
                                                    ([20, 26], "bilinear", False), ([50, 41], "nearest", True)])
def test_resize_layouts(layouts, size, mode, antialias):
    """Every pair of layouts gives the NCHW resize's values exactly, in the shape asked for."""
    src, dst = layouts
    x = images(3, 3, 37, 53, seed=16).float()
    want = sl.resize(x, size, interpolation=mode, antialias=antialias)
    inpt = x.permute(0, 2, 3, 1).contiguous() if src == "NHWC" else x
    got = sl.resize(inpt, size, interpolation=mode, antialias=antialias, layout=src, output_layout=dst)
    assert got.shape == ((3, *size, 3) if dst == "NHWC" else (3, 3, *size))
    got = got.permute(0, 3, 1, 2) if dst == "NHWC" else got
    assert torch.equal(got, want)


@pytest.mark.parametrize("shape", [(4, 3, 64, 256), (2, 4, 33, 70), (3, 5, 20, 21)])
@pytest.mark.parametrize("k", [[7, 7], [3, 9]])
def test_gaussian_blur_and_normalize_nhwc(shape, k):
    """NHWC gives the NCHW values exactly where both take the same path (square kernels up to
    15 wide on up to four channels, or other kernels), and within torchvision's bound where
    they do not (five channels take the per-channel path); one ``(H, W, C)`` image too."""
    x = images(*shape, seed=17).float()
    nhwc = x.permute(0, 2, 3, 1).contiguous()
    sig = [[0.5 + 0.3 * i, 1.1] for i in range(shape[0])]
    want = sl.gaussian_blur(x, k, sig)
    got = sl.gaussian_blur(nhwc, k, sig, layout="NHWC")
    assert got.shape == nhwc.shape
    if shape[1] <= 4 or k[0] != k[1]:
        assert torch.equal(got.permute(0, 3, 1, 2), want)
    else:
        assert_within(got.permute(0, 3, 1, 2), want, bound(k[0] * k[1], 255), "gaussian_blur NHWC")
    mean, std = [0.1 * c for c in range(shape[1])], [0.5 + c for c in range(shape[1])]
    want = sl.normalize(x, mean, std)
    assert torch.equal(sl.normalize(nhwc, mean, std, layout="NHWC").permute(0, 3, 1, 2), want)
    assert torch.equal(sl.normalize(nhwc[1], mean, std, layout="NHWC").permute(2, 0, 1), want[1])


def test_rotate_nhwc_defaults_and_one_image():
    """``output_layout`` defaults to ``layout``, and one ``(H, W, C)`` image rotates as a batch
    of one."""
    x = images(2, 5, 21, 30, seed=15).float()
    want = sl.rotate(x, [25.0, -70.0], interpolation="bilinear")
    nhwc = x.permute(0, 2, 3, 1).contiguous()
    got = sl.rotate(nhwc, [25.0, -70.0], interpolation="bilinear", layout="NHWC")
    assert got.shape == (2, 21, 30, 5)
    assert torch.equal(got.permute(0, 3, 1, 2), want)
    one = sl.rotate(nhwc[1], -70.0, interpolation="bilinear", layout="NHWC", output_layout="NCHW")
    assert one.shape == (5, 21, 30)
    assert torch.equal(one, want[1])


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("k", [1, 3, 7, 15])
def test_gaussian_blur(shape, k):
    h, w = shape[2:]
    if k // 2 >= min(h, w):
        pytest.skip("kernel larger than the image")
    x = images(*shape, seed=5, kind="checker" if k == 7 else "random").float()
    for sigma in (0.3, 1.5, [2.0, 0.7]):
        want = TF.gaussian_blur(x, [k, k], sigma if isinstance(sigma, list) else [sigma, sigma])
        got = sl.gaussian_blur(x, k, sigma)
        assert_within(got, want, bound(k * k, 255), f"gaussian_blur k={k} sigma={sigma}")
    # torchvision's default sigma
    assert_within(sl.gaussian_blur(x, k), TF.gaussian_blur(x, [k, k]), bound(k * k, 255), "default sigma")
    # one sigma per image
    n = shape[0]
    sig = [[0.5 + i, 1.0 + 0.5 * i] for i in range(n)]
    got = sl.gaussian_blur(x, [k, k], sig)
    want = torch.stack([TF.gaussian_blur(x[i : i + 1], [k, k], sig[i])[0] for i in range(n)])
    assert_within(got, want, bound(k * k, 255), "per-image sigma")


@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("sampling_ratio", [-1, 2])
@pytest.mark.parametrize("out_size", [7, (16, 9)])
def test_roi_align(aligned, sampling_ratio, out_size):
    n, c, h, w = 3, 3, 48, 40
    x = images(n, c, h, w, seed=6).float()
    rnd = random.Random(7)
    boxes = []
    for i in range(24 if not SMALL else 6):
        x1, y1 = rnd.uniform(-8, w), rnd.uniform(-8, h)
        boxes.append([float(i % n), x1, y1, x1 + rnd.uniform(0, 30), y1 + rnd.uniform(0, 30)])
    boxes += [[0.0, 0.0, 0.0, w, h], [2.0, 5.0, 5.0, 5.0, 5.0]]  # whole image, empty box
    bt = torch.tensor(boxes, device=DEV)
    want = ops.roi_align(x, bt, out_size, 0.5, sampling_ratio, aligned)
    got = sl.roi_align(x, torch.tensor(boxes), out_size, 0.5, sampling_ratio, aligned)
    assert_within(got, want, bound(4 * 64, 255, h, w), "roi_align")
    # a list of per-image (L, 4) boxes as torchvision takes them
    per = [torch.tensor([b[1:] for b in boxes if b[0] == i]) for i in range(n)]
    want2 = ops.roi_align(x, [p.to(DEV) for p in per], out_size, 0.5, sampling_ratio, aligned)
    assert_within(sl.roi_align(x, per, out_size, 0.5, sampling_ratio, aligned), want2,
                  bound(4 * 64, 255, h, w), "roi_align list")


def torchvision_chain(x8, draw, size, crop, k, interp):
    boxes, angles, sigmas = draw
    n = x8.shape[0]
    x = TF.to_dtype(x8, torch.float32, scale=False)
    rb = torch.tensor([[float(i)] + list(b) for i, b in enumerate(boxes)], device=DEV)
    x = ops.roi_align(x, rb, output_size=crop)
    x = TF.resize(x, size, antialias=True)
    mode = tv.transforms.InterpolationMode(interp)
    x = torch.stack([TF.rotate(x[i], angles[i], interpolation=mode) for i in range(n)])
    x = torch.stack([TF.gaussian_blur(x[i : i + 1], [k, k], [sigmas[i], sigmas[i]])[0] for i in range(n)])
    return TF.normalize(x, [0.0] * x.shape[1], [1.0] * x.shape[1])


@pytest.mark.parametrize("c", [3, 1] if not SMALL else [3])
@pytest.mark.parametrize("interp", ["bilinear", "nearest"])
def test_augment_matches_torchvision_chain(c, interp):
    n, h, w, size = 4, 96, 80, 64
    x8 = images(n, c, h, w, seed=8)
    out = poisoned((n, c, size, size))
    _, draw = sl.augment(x8, size, crop=32, interpolation=interp, seed=11, out=out, return_draw=True)
    want = torchvision_chain(x8, draw, size, 32, 7, interp)
    if interp == "bilinear":
        # resize (4 taps) and rotation (4 taps, coordinates) bounds, carried through the blur
        assert_within(out, want, bound(4, 255, 32, 32) + bound(4, 255, size, size) + bound(49, 255),
                      "augment bilinear")
    else:
        assert not torch.isnan(out).any()
        far = ((out - want).abs() > bound(57, 255, size, size)).float().mean().item()
        assert far <= 0.02, f"augment nearest: {far:.3%} of values beyond the bound"
    # the same draw given back, and every layout pair, bit for bit
    again = sl.augment(x8, size, crop=32, interpolation=interp, draw=draw)
    assert torch.equal(again, out)
    nhwc = x8.permute(0, 2, 3, 1).contiguous()
    assert torch.equal(sl.augment(nhwc, size, crop=32, interpolation=interp, draw=draw, layout="NHWC"), out)
    got = sl.augment(nhwc, size, crop=32, interpolation=interp, draw=draw, layout="NHWC", output_layout="NHWC")
    assert torch.equal(got, out.permute(0, 2, 3, 1))


def test_augment_transform_draws_per_image_and_repeats():
    x8 = images(8, 3, 64, 64, seed=9)
    for draw_on in ["device", "host"]:
        a, b = sl.Augment(64, seed=5, draw_on=draw_on), sl.Augment(64, seed=5, draw_on=draw_on)
        y1, y2 = a(x8), b(x8)
        assert torch.equal(y1, y2)
        boxes, angles, sigmas = a.last_draw if draw_on == "host" else a.device_draw(0, x8.shape)
        assert torch.equal(y1, sl.augment(x8, 64, draw=(boxes, angles, sigmas)))
        assert len(set(sigmas)) > 1 and len(set(angles)) > 1
        assert all(0.1 <= s <= 2.0 for s in sigmas) and all(-45 <= t <= 45 for t in angles)
        assert all(b[2] - b[0] == 32 and b[3] - b[1] == 32 and 0 <= b[0] <= 32 and 0 <= b[1] <= 32 for b in boxes)
        assert not torch.equal(a(x8), y1)  # the next batch draws anew


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_heavy(dtype):
    x = (torch.rand(1_000_003 if not SMALL else 10_001, device=DEV, dtype=torch.float64) * 2.4 - 1.2)
    x = x.to(dtype)
    out = poisoned(x.shape, dtype)
    sl.heavy(x, out=out)
    xd = x.double()
    exact = xd**2 + xd**3 * torch.sin(xd) * torch.cos(xd) + torch.tan(xd)
    if dtype == torch.float32:
        scale = xd**2 + (xd**3 * torch.sin(xd) * torch.cos(xd)).abs() + torch.tan(xd).abs()
        err = (out.double() - exact).abs() - 16 * U * scale
    elif dtype == torch.float16:  # computed in f32 and rounded once to f16: within one f16 ulp
        err = (out.double() - exact).abs() - (exact.abs() * 2.0**-10 + 2.0**-24)
    else:  # computed in f32 and rounded once to bf16: within one bf16 ulp
        err = (out.double() - exact).abs() - (exact.abs() * 2.0**-7 + 2.0**-126)
    assert not torch.isnan(out).any()
    assert err.max().item() <= 0, "heavy: outside the bound"


@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (33, 65, 17), (128, 96, 300), (257, 129, 31)])
@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (0.5, 2.0)])
def test_sgemm(m, n, k, alpha, beta):
    a = torch.randn(m, k, device=DEV)
    b = torch.randn(k, n, device=DEV)
    c0 = torch.randn(m, n, device=DEV)
    c = c0.clone()
    sl.sgemm(a, b, c, alpha=alpha, beta=beta)
    exact = alpha * (a.double() @ b.double()) + beta * c0.double()
    scale = abs(alpha) * (a.double().abs() @ b.double().abs()) + abs(beta) * c0.double().abs()
    assert ((c.double() - exact).abs() <= (k + 4) * U * scale + 1e-30).all()
    # padded rows: a view of a wider matrix
    wide = torch.randn(m, k + 5, device=DEV)
    got = sl.sgemm(wide[:, :k], b)
    assert ((got.double() - wide[:, :k].double() @ b.double()).abs()
            <= (k + 4) * U * (wide[:, :k].double().abs() @ b.double().abs()) + 1e-30).all()


# ---- streams: the caller's stream, no synchronization, torch's ordering rules ----

CYCLES = 200_000_000  # about 0.1 s of a spinning kernel


def test_runs_on_current_stream_without_synchronizing():
    s = torch.cuda.Stream()
    x = torch.zeros(2, 3, 32, 32, device=DEV)
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        torch.cuda._sleep(CYCLES)
        x.fill_(3.0)  # ordered after the sleep on s
        y = sl.normalize(x, [1.0] * 3, [2.0] * 3)
        y.record_stream(s)
    # The host is back while s still sleeps: nothing waited for the device.
    assert not s.query(), "the call synchronized the stream"
    s.synchronize()
    assert torch.equal(y, torch.full_like(x, 1.0)), "the op did not run after the stream's earlier work"


def test_explicit_stream_argument_and_other_streams_untouched():
    s, other = torch.cuda.Stream(), torch.cuda.Stream()
    x = torch.ones(1, 1, 16, 16, device=DEV)
    y = torch.zeros_like(x)
    torch.cuda.synchronize()
    with torch.cuda.stream(other):
        torch.cuda._sleep(CYCLES)
    with torch.cuda.stream(s):
        torch.cuda._sleep(CYCLES // 4)
    sl.normalize(x, [0.0], [0.5], out=y, stream=s)  # queued on s, not on the current stream
    assert not s.query() and not other.query()
    s.synchronize()
    assert torch.equal(y, torch.full_like(x, 2.0))
    assert not other.query(), "work went to a stream it was not given"
    other.synchronize()


def test_consumer_on_another_stream_needs_wait_stream():
    producer, consumer = torch.cuda.Stream(), torch.cuda.Stream()
    x = torch.full((1, 1, 64, 64), 4.0, device=DEV)
    y = torch.zeros_like(x)
    torch.cuda.synchronize()
    with torch.cuda.stream(producer):
        torch.cuda._sleep(CYCLES)
        sl.normalize(x, [0.0], [2.0], out=y)
    with torch.cuda.stream(consumer):
        early = y.clone()  # no wait_stream: runs before the producer's op
        consumer.wait_stream(producer)
        late = y.clone()
    torch.cuda.synchronize()
    assert torch.equal(early, torch.zeros_like(x)), "without wait_stream the consumer must not see the write"
    assert torch.equal(late, torch.full_like(x, 2.0)), "with wait_stream the consumer sees the write"


def test_shuffled_schedules_over_streams_match_serial():
    """A chain of our ops spread over random streams, joined with wait_stream and delayed by
    random sleeps, gives the serial result bit for bit."""
    x8 = images(4, 3, 48, 48, seed=12)
    serial = sl.normalize(sl.gaussian_blur(sl.rotate(sl.to_float(x8), [10, 20, 30, 40]), 5, 1.2), [1] * 3, [3] * 3)
    streams = [torch.cuda.Stream() for _ in range(3)]
    rnd = random.Random(13)
    for trial in range(12 if not SMALL else 3):
        torch.cuda.synchronize()
        prev, v = torch.cuda.current_stream(), x8
        outs = []
        for step in range(4):
            s = rnd.choice(streams)
            s.wait_stream(prev)
            with torch.cuda.stream(s):
                if rnd.random() < 0.5:
                    torch.cuda._sleep(rnd.randrange(CYCLES // 100))
                v = [lambda t: sl.to_float(t), lambda t: sl.rotate(t, [10, 20, 30, 40]),
                     lambda t: sl.gaussian_blur(t, 5, 1.2), lambda t: sl.normalize(t, [1] * 3, [3] * 3)][step](v)
                v.record_stream(s)
                outs.append(v)
            prev = s
        torch.cuda.current_stream().wait_stream(prev)
        assert torch.equal(v, serial), f"trial {trial}: differs from the serial chain"


# ---- a kernel of one's own ----


class SaxpyParams(ctypes.Structure):
    """The kernel's ``#[repr(C)] SaxpyParams``, field for field."""

    _fields_ = [("x", ctypes.c_uint64), ("y", ctypes.c_uint64), ("n", ctypes.c_uint64),
                ("a", ctypes.c_float), ("pad", ctypes.c_uint32)]


def saxpy_ptx():
    path = os.environ.get("STREAMLINE_SAXPY_PTX")
    if not path or not os.path.exists(path):
        pytest.skip("STREAMLINE_SAXPY_PTX names no built saxpy_kernels.ptx (examples/saxpy)")
    return path


def test_user_kernel_module_on_tensors():
    m = sl.load_module(saxpy_ptx())
    assert m.kernels["saxpy"][:2] == (ctypes.sizeof(SaxpyParams), ctypes.alignment(SaxpyParams))
    n = 1_000_003
    x = torch.randn(n, device=DEV)
    y = torch.randn(n, device=DEV)
    y0 = y.clone()
    p = SaxpyParams(x.data_ptr(), y.data_ptr(), n, 2.5, 0)
    m.launch("saxpy", (n + 255) // 256, 256, p)
    want = (2.5 * x.double() + y0.double()).float()  # one rounding, as the fused multiply-add
    assert torch.equal(y, want)


def test_user_kernel_layout_and_config_checked():
    m = sl.load_module(saxpy_ptx())

    class Short(ctypes.Structure):
        _fields_ = [("x", ctypes.c_uint64), ("y", ctypes.c_uint64)]

    with pytest.raises(ValueError, match="takes a struct of 32 bytes aligned to 8"):
        m.launch("saxpy", 1, 32, Short(0, 0))
    with pytest.raises(ValueError, match="no kernel `saxpi`"):
        m.launch("saxpy".replace("y", "i"), 1, 32, SaxpyParams())
    with pytest.raises(ValueError, match=r"block \(4096, 1, 1\) exceeds"):
        m.launch("saxpy", 1, 4096, SaxpyParams())


def test_user_kernels_called_by_field_name():
    """The saxpy example's kernel and the one docs/writing-kernels.md writes (built by
    tests/tests/suite/out_of_tree.rs), each called from Python with its fields by name, tensors for
    addresses, against torch; wrong fields refused before any launch."""
    m = sl.load_module(saxpy_ptx())
    assert repr(m.saxpy) == "<kernel saxpy(x: *const f32, y: *mut f32, n: u64, a: f32, pad: u32)>"
    n = 1_000_003
    x, y = torch.randn(n, device=DEV), torch.randn(n, device=DEV)
    want = (2.5 * x.double() + y.double()).float()
    m.saxpy((n + 255) // 256, 256, x=x, y=y, n=n, a=2.5)
    assert torch.equal(y, want)
    with pytest.raises(TypeError, match="saxpy: field 'n' \\(u64\\) is missing"):
        m.saxpy(1, 32, x=x, y=y, a=1.0)
    with pytest.raises(ValueError, match="saxpy: field 'x' takes a tensor on cuda:0, got one on cpu"):
        m.saxpy(1, 32, x=x.cpu(), y=y, n=n, a=1.0)
    with pytest.raises(TypeError, match=r"saxpy: field 'y' \(\*mut f32\) takes a float32 tensor, got torch.float16"):
        m.saxpy(1, 32, x=x, y=y.half(), n=n, a=1.0)
    docs = os.environ.get("STREAMLINE_DOCS_PTX")
    if not docs or not os.path.exists(docs):
        pytest.skip("STREAMLINE_DOCS_PTX names no built my_op_kernels.ptx (tests/tests/suite/out_of_tree.rs)")
    d = sl.load_module(docs)
    out = torch.full_like(x, float("nan"))
    d.relu_scale((n + 255) // 256, 256, x=x, y=out, n=n, scale=3.0)
    assert torch.equal(out, torch.relu(x) * 3.0)
    with pytest.raises(TypeError, match="relu_scale: no field 'sclae'"):
        d.relu_scale(1, 32, x=x, y=out, n=n, sclae=3.0)


# ---- errors with real tensors ----


def test_tensor_argument_errors():
    x = torch.zeros(1, 3, 8, 8, device=DEV)
    with pytest.raises(TypeError, match="inpt: must be a CUDA tensor, got a tensor on cpu"):
        sl.normalize(x.cpu(), [0] * 3, [1] * 3)
    with pytest.raises(TypeError, match="inpt: dtype torch.float64 is not supported"):
        sl.normalize(x.double(), [0] * 3, [1] * 3)
    with pytest.raises(ValueError, match="inpt: must be contiguous"):
        sl.normalize(x.permute(0, 1, 3, 2), [0] * 3, [1] * 3)
    with pytest.raises(ValueError, match=r"invalid argument `mean`: has 2 values; needs one per channel \(3\)"):
        sl.normalize(x, [0] * 2, [1] * 2)
    with pytest.raises(ValueError, match="invalid argument `std`"):
        sl.normalize(x, [0] * 3, [1, 0, 1])
    y = torch.full_like(x, 5.0)
    with pytest.raises(ValueError):
        sl.rotate(x, float("nan"), out=y)
    assert torch.equal(y, torch.full_like(x, 5.0)), "a refused call wrote its output"


def roi_grad_bound(x, boxes, out_size, aligned, g):
    """Twice the written bound for a gradient value: ``(shares + 16) u`` times the sum of the
    magnitudes of its shares (torchvision's float64 backward of ``|g|``: the weights are
    nonnegative; ``shares`` at most 512 here), plus the coordinate term of ``bound`` (float64
    places the samples a few ulp of their coordinates away from float32, moving each weight by
    up to twice that: ``delta = 8 u (3 (h + w) + 8)`` for boxes within three image sizes)."""
    xd = x.detach().double().requires_grad_()
    y = ops.roi_align(xd, boxes.to(DEV).double(), out_size, aligned=aligned)
    (mags,) = torch.autograd.grad(y, xd, g.double().abs())
    delta = 8 * U * (3 * (x.shape[-2] + x.shape[-1]) + 8)
    return 2 * ((512 + 16) * U + 2 * delta) * mags + 1e-30


@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("on_gpu", [False, True])
def test_roi_align_backward_matches_torchvision(aligned, on_gpu):
    x = images(2, 3, 40, 44, seed=12).float().requires_grad_()
    boxes = torch.tensor([[0, 1.5, 2.0, 30.0, 20.5], [1, 0.0, 0.0, 43.0, 39.0], [1, 10.0, 5.0, 12.0, 30.0],
                          [0, -3.0, -2.0, 50.0, 45.0], [1, 20.0, 20.0, 20.5, 21.0]])
    y = sl.roi_align(x, boxes.to(DEV) if on_gpu else boxes, [7, 9], aligned=aligned)
    g = torch.randn(y.shape, generator=torch.Generator().manual_seed(3)).to(DEV)
    (ours,) = torch.autograd.grad(y, x, g)
    xd = x.detach().double().requires_grad_()
    (exact,) = torch.autograd.grad(ops.roi_align(xd, boxes.to(DEV).double(), [7, 9], aligned=aligned), xd, g.double())
    x2 = x.detach().clone().requires_grad_()
    (theirs,) = torch.autograd.grad(ops.roi_align(x2, boxes.to(DEV), [7, 9], aligned=aligned), x2, g)
    bound = roi_grad_bound(x, boxes, [7, 9], aligned, g)
    assert ((ours.double() - exact).abs() <= bound).all(), "ours outside the bound"
    assert ((theirs.double() - exact).abs() <= bound).all(), "torchvision outside the bound"
    torch.use_deterministic_algorithms(True)
    try:
        runs = [torch.autograd.grad(sl.roi_align(x, boxes, [7, 9], aligned=aligned), x, g)[0] for _ in range(3)]
    finally:
        torch.use_deterministic_algorithms(False)
    assert all(torch.equal(r, runs[0]) for r in runs), "the deterministic backward changed bits"
    assert ((runs[0].double() - exact).abs() <= bound).all()
    direct = sl.roi_align_backward(g, boxes, x.shape, [7, 9], aligned=aligned, deterministic=True)
    assert torch.equal(direct, runs[0])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("m,n,k", [(1, 8, 8), (33, 64, 24), (128, 96, 304), (257, 136, 40)])
@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (0.5, 2.0)])
def test_matmul_half(dtype, m, n, k, alpha, beta):
    # Contiguous rows of k elements: k a multiple of 8, as the tensor cores need.
    # Bound of testing/src/reference/hgemm.rs: f32 sums that may truncate, then one rounding.
    unit = 2.0**-8 if dtype == torch.bfloat16 else 2.0**-11
    a = torch.randn(m, k, device=DEV).to(dtype)
    b = torch.randn(k, n, device=DEV).to(dtype)
    c0 = torch.randn(m, n, device=DEV).to(dtype)
    c = c0.clone()
    sl.matmul(a, b, c, alpha=alpha, beta=beta)
    exact = alpha * (a.double() @ b.double()) + beta * c0.double()
    scale = abs(alpha) * (a.double().abs() @ b.double().abs()) + abs(beta) * c0.double().abs()
    e = 2 * (k + 2) * 2.0**-24 * scale
    assert ((c.double() - exact).abs() <= e + unit * (exact.abs() + e) + 2.0**-25).all()
    # padded rows (strides multiples of 8) and a fresh output
    wide = torch.randn(m, (k + 7) // 8 * 8 + 8, device=DEV).to(dtype)
    got = sl.matmul(wide[:, :k], b)
    assert got.dtype == dtype
    want = wide[:, :k].double() @ b.double()
    e = 2 * (k + 2) * 2.0**-24 * (wide[:, :k].double().abs() @ b.double().abs())
    assert ((got.double() - want).abs() <= e + unit * (want.abs() + e) + 2.0**-25).all()


def test_matmul_half_refuses_misaligned_rows():
    a = torch.randn(4, 12, device=DEV).to(torch.bfloat16)
    b = torch.randn(12, 8, device=DEV).to(torch.bfloat16)
    with pytest.raises(ValueError, match="lda"):
        sl.matmul(a, b)
    with pytest.raises(TypeError, match="b: dtype"):
        sl.matmul(torch.randn(4, 16, device=DEV).to(torch.bfloat16), torch.randn(16, 8, device=DEV))
