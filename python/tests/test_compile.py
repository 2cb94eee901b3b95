"""On a GPU with torch: Streamline's functions inside ``torch.compile``. Each operation is a
custom operator (``torch.ops.streamline.*``) that torch's own checks accept (schema, fake
implementation, declared mutation); a function calling them compiles with
``fullgraph=True`` (no graph break) and gives the eager results bit for bit, also with
``mode="reduce-overhead"``, which replays the compiled code from CUDA graphs; a compiled
``sl.Augment`` draws anew at every call as the eager one does. Skipped, saying why,
elsewhere.
"""
import pytest

torch = pytest.importorskip("torch")

import streamline as sl  # noqa: E402

if not torch.cuda.is_available():
    pytest.skip("no CUDA device for torch: GPU tests skipped", allow_module_level=True)
if sl.gpu_available() is not None:
    pytest.skip(f"streamline cannot use the GPU: {sl.gpu_available()}", allow_module_level=True)

DEV = torch.device("cuda")


def u8(shape, seed):
    g = torch.Generator(device="cpu").manual_seed(seed)
    return torch.randint(0, 256, shape, generator=g, dtype=torch.uint8).to(DEV)


BOXES = [[0, 1.0, 2.0, 30.0, 20.0], [1, 0.0, 0.0, 39.0, 43.0]]


def pipeline(x8, boxes):
    x = sl.to_float(x8, scale=True)
    x = sl.normalize(x, [0.5, 0.4, 0.3], [0.2, 0.25, 0.3])
    x = sl.rotate(x, [10.0, -20.0], interpolation="bilinear")
    x = sl.gaussian_blur(x, 5, [1.0, 1.5])
    x = sl.resize(x, [40, 44])
    r = sl.roi_align(x, boxes, 7, sampling_ratio=2)
    return torch.relu(x) * 2, r, sl.heavy(r)


def same(a, b):
    return all(torch.equal(x, y) for x, y in zip(a, b))


def args_for(name):
    x8 = u8((2, 3, 24, 28), 1)
    x = x8.float()
    state = torch.tensor([7, 0, 0, 0], dtype=torch.int32, device=DEV)
    cfg = (16, 8, 30.0, "nearest", 5, [0.5, 1.5], False, [0.0] * 3, [1.0] * 3, "NCHW", "NCHW")
    return {
        "to_float": (x8, True, "NCHW", "NHWC"),
        "normalize": (x, [1.0, 2.0, 3.0], [2.0, 2.0, 2.0], "NCHW"),
        "resize": (x, [12, 40], "bilinear", True, "NCHW", "NCHW"),
        "rotate": (x, [5.0, -5.0], "nearest", 1.0, "NCHW", "NCHW"),
        "gaussian_blur": (x, [3, 5], [0.7, 1.1], "NCHW"),
        "roi_align": (x, torch.tensor([[0, 1.0, 1.0, 9.0, 12.0]]), [4, 5], 1.0, -1, False),
        "roi_align_backward": (torch.randn(1, 3, 4, 5, device=DEV), torch.tensor([[0, 1.0, 1.0, 9.0, 12.0]]),
                               [2, 3, 24, 28], [4, 5], 1.0, -1, False, True),
        "augment": (x8, *cfg, 11, True),
        "augment_drawn": (x8, state, *cfg, True),
        # two images, 5 x 6 and 7 x 4 (RGB HWC), one after the other
        "augment_ragged": (u8((5 * 6 * 3 + 7 * 4 * 3,), 4), torch.tensor([0, 0, 5, 6, 90, 0, 7, 4], dtype=torch.int32,
                           device=DEV), state, 8, 4, *cfg[2:9], "NHWC", "NCHW", True),
        "heavy": (x,),
        "sgemm": (torch.randn(9, 5, device=DEV), torch.randn(5, 7, device=DEV), None, 1.0, 0.0),
        "matmul": (torch.randn(9, 16, device=DEV).to(torch.bfloat16), torch.randn(16, 8, device=DEV).to(torch.bfloat16),
                   None, 1.0, 0.0),
    }[name]


@pytest.mark.parametrize("name", ["to_float", "normalize", "resize", "rotate", "gaussian_blur", "roi_align",
                                  "roi_align_backward", "augment", "augment_drawn", "augment_ragged", "heavy", "sgemm",
                                  "matmul"])
def test_custom_operator_passes_torch_checks(name):
    op = getattr(torch.ops.streamline, name)
    torch.library.opcheck(op, args_for(name), test_utils=("test_schema", "test_faketensor"))


def test_fullgraph_compile_matches_eager():
    x8 = u8((2, 3, 48, 52), 2)
    for boxes in (torch.tensor(BOXES), torch.tensor(BOXES, device=DEV)):
        want = pipeline(x8, boxes)
        torch._dynamo.reset()
        got = torch.compile(pipeline, fullgraph=True)(x8, boxes)
        assert same(got, want)


def test_reduce_overhead_replays_match_eager():
    x8 = u8((2, 3, 48, 52), 3)
    boxes = torch.tensor(BOXES, device=DEV)

    def calls():
        compiled = torch.compile(pipeline, mode="reduce-overhead", fullgraph=True)
        for k in range(4):
            x8.copy_(u8((2, 3, 48, 52), 30 + k))
            boxes[:, 1] = float(k)
            got = [t.clone() for t in compiled(x8, boxes)]
            assert same(got, pipeline(x8, boxes)), f"call {k}"

    assert_graphed(calls)


def assert_graphed(call):
    """Calls made by a compiled function that ``reduce-overhead`` captured: our parameter
    uploads then go into memory the CUDA graph keeps (counted by the native layer) instead of
    being queued."""
    from streamline import _native

    before = _native.uploads_into_graphs()
    torch._dynamo.reset()
    call()
    assert _native.uploads_into_graphs() > before, "no call was captured in a CUDA graph"


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_compiled_augment_draws_anew_each_call(mode):
    x = u8((4, 3, 64, 64), 4)
    eager, inside = sl.Augment(64, seed=77), sl.Augment(64, seed=77)

    def step(x):
        return inside(x)

    def calls():
        compiled = torch.compile(step, mode=mode, fullgraph=True)
        outs = [compiled(x).clone() for _ in range(4)]
        for k, got in enumerate(outs):
            assert torch.equal(got, eager(x)), f"call {k}"
        assert not torch.equal(outs[0], outs[1])
        assert inside.draws() == 4

    if mode == "reduce-overhead":
        assert_graphed(calls)
    else:
        torch._dynamo.reset()
        calls()


def test_compiled_roi_align_backward_matches_eager():
    """Forward and Streamline's backward of ``roi_align`` inside a compiled training step, the
    deterministic backward bit for bit."""
    x = u8((2, 3, 40, 44), 5).float()
    boxes = torch.tensor(BOXES, device=DEV)

    def loss(x, boxes):
        return (sl.roi_align(x, boxes, 7, sampling_ratio=2) ** 2).sum()

    def grad(f):
        xx = x.clone().requires_grad_()
        f(xx, boxes).backward()
        return xx.grad

    torch.use_deterministic_algorithms(True)
    try:
        torch._dynamo.reset()
        assert torch.equal(grad(torch.compile(loss, fullgraph=True)), grad(loss))
    finally:
        torch.use_deterministic_algorithms(False)
