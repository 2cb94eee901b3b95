"""On a GPU with torch and torchvision: JPEG files decoded on the GPU into a ragged batch
(against torchvision's GPU decoder, which is nvJPEG too, and PIL), and the augmentation of a
ragged batch: each image's output equals the augmentation of that image alone with the crop
box the device draw maps into it, the same seed gives the same batches, and a captured CUDA
graph replays as the eager calls. Skipped, saying why, elsewhere."""
import io

import pytest

np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")
tv = pytest.importorskip("torchvision")
Image = pytest.importorskip("PIL.Image")

import streamline as sl  # noqa: E402

if not torch.cuda.is_available():
    pytest.skip("no CUDA device for torch: GPU tests skipped", allow_module_level=True)
if sl.gpu_available() is not None:
    pytest.skip(f"streamline cannot use the GPU: {sl.gpu_available()}", allow_module_level=True)


def jpegs(sizes, seed=0, quality=90):
    """Photo-like JPEG files (smooth gradients and a little noise) of ``sizes`` (h, w)."""
    rng = np.random.default_rng(seed)
    out = []
    for h, w in sizes:
        yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
        base = np.stack([xx / w * 200 + 20, yy / h * 180 + 30, (xx + yy) / (h + w) * 150 + 50], -1)
        img = np.clip(base + rng.normal(0, 6, base.shape), 0, 255).astype(np.uint8)
        buf = io.BytesIO()
        Image.fromarray(img).save(buf, format="JPEG", quality=quality)
        out.append(buf.getvalue())
    return out


SIZES = [(300, 400), (517, 333), (64, 64), (480, 640), (123, 257)]


def test_decode_matches_torchvision_gpu_decode_and_pil():
    files = jpegs(SIZES)
    b = sl.decode_jpeg(files)
    assert len(b) == len(SIZES) and b.sizes == SIZES
    assert b.data.numel() == sum(h * w * 3 for h, w in SIZES)
    ext = b.extents.cpu().tolist()
    assert [(ext[4 * i + 2], ext[4 * i + 3]) for i in range(len(SIZES))] == SIZES
    for i, f in enumerate(files):
        ours = b.image(i).int()
        theirs = tv.io.decode_jpeg(torch.frombuffer(bytearray(f), dtype=torch.uint8), device="cuda")
        pil = torch.from_numpy(np.asarray(Image.open(io.BytesIO(f)).convert("RGB"))).cuda().int()
        assert ours.shape == pil.shape
        # Both GPU decoders are nvJPEG; chroma upsampling may differ from libjpeg's by a few levels.
        assert (ours - theirs.permute(1, 2, 0).int()).abs().float().mean() < 2.0
        assert (ours - pil).abs().float().mean() < 4.0


def test_decode_waits_for_work_queued_on_its_memory():
    """The batch's memory may be a block PyTorch's allocator just took back from a tensor that
    kernels queued on the stream still write; the decode must land after them."""
    files = jpegs(SIZES)
    want = sl.decode_jpeg(files).data.clone()
    total = want.numel()
    for _ in range(3):
        x = torch.empty(total, dtype=torch.uint8, device="cuda")
        torch.cuda._sleep(50_000_000)  # about 25 ms on the device
        x.fill_(7)
        del x  # its block goes back to the allocator while the fill is still queued
        got = sl.decode_jpeg(files)
        torch.cuda.synchronize()
        assert torch.equal(got.data, want), "the decode did not wait for the work queued before it"


def test_decode_errors_name_the_file():
    files = jpegs(SIZES[:2])
    with pytest.raises(ValueError, match="file 1"):
        sl.decode_jpeg([files[0], b"not a jpeg"])
    with pytest.raises(ValueError, match="files"):
        sl.decode_jpeg([])
    with pytest.raises(TypeError, match="item 0"):
        sl.decode_jpeg([3])


def test_progressive_files_with_restart_markers_are_refused():
    # nvJPEG decodes these wrongly: the decoder names the file instead.
    img = Image.open(io.BytesIO(jpegs([(64, 80)])[0]))
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=90, progressive=True, restart_marker_blocks=2)
    prog = buf.getvalue()
    assert b"\xff\xdd" in prog and b"\xff\xc2" in prog, "PIL wrote no restart interval"
    with pytest.raises(ValueError, match="file 1 .*progressive JPEG with restart markers"):
        sl.decode_jpeg([jpegs([(32, 32)])[0], prog])
    # Without restart markers, a progressive file decodes.
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=90, progressive=True)
    assert sl.decode_jpeg([buf.getvalue()]).sizes == [(64, 80)]


def f32_fma(a, b, c):
    """``fma`` in f32: the exact product and sum rounded (through f64, whose one rounding before
    the f32 one moves a result by at most an ulp in rare cases: compared within a tolerance)."""
    return np.float32(np.float64(np.float32(a)) * np.float64(np.float32(b)) + np.float64(np.float32(c)))


def ragged_box(h, w, size, crop, top, left):
    m = min(h, w)
    f = np.float32(m) / np.float32(size)
    x1 = f32_fma(left, f, (w - m) * 0.5)
    y1 = f32_fma(top, f, (h - m) * 0.5)
    return [float(x1), float(y1), float(f32_fma(crop, f, x1)), float(f32_fma(crop, f, y1))]


@pytest.mark.parametrize("interp", ["nearest", "bilinear"])
def test_ragged_augment_is_each_image_alone(interp):
    size = 64
    b = sl.decode_jpeg(jpegs(SIZES, seed=1))
    aug = sl.Augment(size, seed=11, interpolation=interp, scale=True)
    y = aug(b)
    assert y.shape == (len(SIZES), 3, size, size) and y.dtype == torch.float32
    assert torch.isfinite(y).all()
    boxes, angles, sigmas = aug.device_draw(0, (len(SIZES), 3, size, size))
    for i, (h, w) in enumerate(SIZES):
        box = ragged_box(h, w, size, size // 2, boxes[i][1], boxes[i][0])
        alone = sl.augment(b.image(i)[None].contiguous(), size, layout="NHWC", interpolation=interp, scale=True,
                           draw=([box], [angles[i]], [sigmas[i]]))
        # The same values but for outputs near a nearest-neighbour tie of the rotation (alone, a
        # whole-pixel box may take the integer kernels, which round their source points apart).
        off = ((y[i] - alone[0]).abs() > 1e-3).float().mean().item()
        assert off < 0.005, (i, off)
    # The same seed, the same batches; the next call draws anew.
    again = sl.Augment(size, seed=11, interpolation=interp, scale=True)
    assert torch.equal(again(b), y)
    assert not torch.equal(aug(b), y)


def test_ragged_augment_in_a_cuda_graph_replays_as_eager_calls():
    size = 64
    b = sl.decode_jpeg(jpegs(SIZES, seed=2))
    eager, captured = sl.Augment(size, seed=7), sl.Augment(size, seed=7)
    out = torch.empty(len(SIZES), 3, size, size, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        captured(b, out=out)  # the generator's state made before the capture
    torch.cuda.current_stream().wait_stream(s)
    eager(b)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        captured(b, out=out)
    for _ in range(3):
        want = eager(b)
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, want)


def test_ragged_augment_refuses_a_host_draw():
    b = sl.decode_jpeg(jpegs(SIZES[:1]))
    with pytest.raises(ValueError, match="draw_on"):
        sl.Augment(64, draw_on="host")(b)
