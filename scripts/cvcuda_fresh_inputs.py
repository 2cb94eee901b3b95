#!/usr/bin/env python3
"""CV-CUDA's single operations and its augmentation chain timed the way `streamline bench` times
ours: inputs and outputs rotated over enough buffer sets that together they exceed 4x L2, so that
every call reads its input from device memory.

`cvcuda_anchors.py` passes the same buffers to every call. At batch 8 (12.6 MB in and out for a
rotation) and 32 (50 MB) those may stay in the H200's 60 MiB L2 from one call to the next, while
`streamline bench` reads fresh inputs; this script gives CV-CUDA the same conditions as ours. The
operations, shapes, parameters and timing (CUDA events, median of 30 after 5 warm-ups) are those
of `cvcuda_anchors.py`; rotations run with the anchors' shift and with the shift that keeps the
image centre in place (torchvision's rotation, see `cvcuda_rotate_geometry.py`).

Prints JSON lines under our case names (`impl` "cvcuda-fresh", "cvcuda-fresh-centred",
"cvcuda-chain-fresh") for `compare.py`.

usage (CV-CUDA unpacked into DIR as `../shared/anchors/cvcuda/README.md` says):
    PYTHONPATH=DIR python3 cvcuda_fresh_inputs.py > cvcuda-fresh.jsonl
"""
import json
import random
import sys

import torch
import cvcuda

# The shifts and the image batches as the rotation geometry script makes them (next to this one).
from cvcuda_rotate_geometry import anchor_shift, centred_shift, varshape

dev = torch.device("cuda")
cs = cvcuda.as_stream(torch.cuda.current_stream())
S = 256
L2 = torch.cuda.get_device_properties(dev).L2_cache_size


def emit(**kw):
    print(json.dumps(kw), flush=True)


def sets(bytes_per_set):
    """Buffer sets so that together they exceed 4x L2 (as `streamline bench` counts them)."""
    return max(1, -(-4 * L2 // bytes_per_set))


def bench(fn, n, reps=30, warm=5):
    """Median CUDA-event time of `fn(i)`, call `i` on buffer set `i % n`."""
    k = 0
    for _ in range(warm):
        fn(k % n)
        k += 1
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn(k % n)
        b.record()
        torch.cuda.synchronize()
        out.append(a.elapsed_time(b))
        k += 1
    out.sort()
    return out[len(out) // 2]


def nhwc(b, h, w, dtype=torch.float32):
    if dtype == torch.uint8:
        return torch.randint(0, 256, (b, h, w, 3), dtype=torch.uint8, device=dev)
    return torch.rand(b, h, w, 3, device=dev, dtype=dtype) * 255


def nbytes(*ts):
    return sum(t.numel() * t.element_size() for t in ts)


def single_ops(B):
    # roi crop: per-image integer rectangles, f32 NHWC in, NCHW out.
    case = f"roi_align_crop128_b{B}"
    n = sets(nbytes(torch.empty(B, S, S, 3), torch.empty(B, 3, 128, 128)))
    xs = [varshape(nhwc(B, S, S)) for _ in range(n)]
    outs = [cvcuda.as_tensor(torch.empty(B, 3, 128, 128, device=dev), "NCHW") for _ in range(n)]
    r = torch.zeros(B, 1, 1, 4, dtype=torch.int32, device=dev)
    r[:, 0, 0, 0:2] = torch.randint(0, S - 128 + 1, (B, 2), device=dev, dtype=torch.int32)
    r[:, 0, 0, 2:4] = 128
    rc = cvcuda.as_tensor(r, "NHWC")
    flip = cvcuda.as_tensor(torch.full((B, 1, 1, 1), 5, dtype=torch.int32, device=dev), "NHWC")
    base = cvcuda.as_tensor(torch.zeros(1, 1, 1, 3, device=dev), "NHWC")
    one = cvcuda.as_tensor(torch.ones(1, 1, 1, 3, device=dev), "NHWC")
    ms = bench(lambda i: cvcuda.crop_flip_normalize_reformat_into(
        outs[i], xs[i], rc, flip, base, one, stream=cs), n)
    emit(case=case, impl="cvcuda-fresh", ms=round(ms, 5), buffer_sets=n, layout="NHWC->NCHW")
    del xs, outs

    case = f"resize_bilinear_128to256_b{B}"
    n = sets(nbytes(torch.empty(B, 128, 128, 3), torch.empty(B, S, S, 3)))
    xs = [cvcuda.as_tensor(nhwc(B, 128, 128), "NHWC") for _ in range(n)]
    ys = [cvcuda.as_tensor(torch.empty(B, S, S, 3, device=dev), "NHWC") for _ in range(n)]
    ms = bench(lambda i: cvcuda.resize_into(ys[i], xs[i], cvcuda.Interp.LINEAR, stream=cs), n)
    emit(case=case, impl="cvcuda-fresh", ms=round(ms, 5), buffer_sets=n, layout="NHWC")
    del xs, ys

    n = sets(2 * nbytes(torch.empty(B, S, S, 3)))
    xt = [nhwc(B, S, S) for _ in range(n)]
    yt = [torch.empty(B, S, S, 3, device=dev) for _ in range(n)]
    xv, yv = [varshape(t) for t in xt], [varshape(t) for t in yt]
    xc = [cvcuda.as_tensor(t, "NHWC") for t in xt]
    yc = [cvcuda.as_tensor(t, "NHWC") for t in yt]
    random.seed(B)
    ang = [random.uniform(-45, 45) for _ in range(B)]
    at = cvcuda.as_tensor(torch.tensor(ang, dtype=torch.float64, device=dev), "N")
    for mode, interp in (("nearest", cvcuda.Interp.NEAREST), ("bilinear", cvcuda.Interp.LINEAR)):
        case = f"rotate_{mode}_b{B}"
        for impl, shift in (("cvcuda-fresh", anchor_shift), ("cvcuda-fresh-centred", centred_shift)):
            st = cvcuda.as_tensor(torch.tensor([shift(a, S, S) for a in ang], dtype=torch.float64,
                                               device=dev), "NC")
            ms = bench(lambda i: cvcuda.rotate_into(yv[i], xv[i], at, st, interp, stream=cs), n)
            emit(case=case, impl=impl, ms=round(ms, 5), buffer_sets=n, layout="NHWC varshape")

    case = f"gaussian_blur_k7_b{B}"
    ms = bench(lambda i: cvcuda.gaussian_into(yc[i], xc[i], (7, 7), (1.5, 1.5),
                                              cvcuda.Border.REFLECT101, stream=cs), n)
    emit(case=case, impl="cvcuda-fresh", ms=round(ms, 5), buffer_sets=n, layout="NHWC")

    case = f"normalize_b{B}"
    mean = cvcuda.as_tensor(torch.tensor([0.485, 0.456, 0.406], device=dev).reshape(1, 1, 1, 3), "NHWC")
    std = cvcuda.as_tensor(torch.tensor([0.229, 0.224, 0.225], device=dev).reshape(1, 1, 1, 3), "NHWC")
    ms = bench(lambda i: cvcuda.normalize_into(yc[i], xc[i], mean, std,
                                               cvcuda.NormalizeFlags.SCALE_IS_STDDEV, stream=cs), n)
    emit(case=case, impl="cvcuda-fresh", ms=round(ms, 5), buffer_sets=n, layout="NHWC")


def chain(B):
    """The anchors' `augment_pipeline` chain (crop, resize, rotate with the anchors' shift,
    blur, normalize) with its uint8 input and final output rotated over buffer sets; the
    intermediates are one set, as in the anchors (each is written before it is read)."""
    case = f"augment_pipeline_b{B}"
    n = sets(nbytes(torch.empty(B, S, S, 3, dtype=torch.uint8), torch.empty(B, S, S, 3)))
    vs = [varshape(nhwc(B, S, S, torch.uint8)) for _ in range(n)]
    outs = [cvcuda.as_tensor(torch.empty(B, S, S, 3, device=dev), "NHWC") for _ in range(n)]
    flip = cvcuda.as_tensor(torch.full((B, 1, 1, 1), 5, dtype=torch.int32, device=dev), "NHWC")
    base = cvcuda.as_tensor(torch.zeros(1, 1, 1, 3, device=dev), "NHWC")
    one = cvcuda.as_tensor(torch.ones(1, 1, 1, 3, device=dev), "NHWC")
    cropc = cvcuda.as_tensor(torch.empty(B, 128, 128, 3, device=dev), "NHWC")
    big = torch.empty(B, S, S, 3, device=dev)
    bigc, bigv = cvcuda.as_tensor(big, "NHWC"), varshape(big)
    rot = torch.empty(B, S, S, 3, device=dev)
    rotv, rotc = varshape(rot), cvcuda.as_tensor(rot, "NHWC")
    blurc = cvcuda.as_tensor(torch.empty(B, S, S, 3, device=dev), "NHWC")

    def pipe(i):
        r = torch.zeros(B, 1, 1, 4, dtype=torch.int32, device=dev)
        r[:, 0, 0, 0:2] = torch.randint(0, S // 2 + 1, (B, 2), device=dev, dtype=torch.int32)
        r[:, 0, 0, 2:4] = 128
        cvcuda.crop_flip_normalize_reformat_into(cropc, vs[i], cvcuda.as_tensor(r, "NHWC"), flip, base, one, stream=cs)
        cvcuda.resize_into(bigc, cropc, cvcuda.Interp.LINEAR, stream=cs)
        ang = [random.uniform(-45, 45) for _ in range(B)]
        at = cvcuda.as_tensor(torch.tensor(ang, dtype=torch.float64, device=dev), "N")
        st = cvcuda.as_tensor(torch.tensor([anchor_shift(a, S, S) for a in ang], dtype=torch.float64, device=dev), "NC")
        cvcuda.rotate_into(rotv, bigv, at, st, cvcuda.Interp.NEAREST, stream=cs)
        cvcuda.gaussian_into(blurc, rotc, (7, 7), (1.5, 1.5), cvcuda.Border.REFLECT101, stream=cs)
        cvcuda.normalize_into(outs[i], blurc, base, one, cvcuda.NormalizeFlags.SCALE_IS_STDDEV, stream=cs)

    emit(case=case, impl="cvcuda-chain-fresh", ms=round(bench(pipe, n), 5), buffer_sets=n, layout="NHWC")


if __name__ == "__main__":
    emit(gpu=torch.cuda.get_device_name(), cvcuda=getattr(cvcuda, "__version__", "?"), l2_bytes=L2)
    for B in (8, 32, 128):
        single_ops(B)
        chain(B)
        torch.cuda.empty_cache()
    sys.exit(0)
