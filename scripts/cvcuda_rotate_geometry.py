#!/usr/bin/env python3
"""CV-CUDA's rotation as a peer of `rotate_nearest` / `rotate_bilinear`: which shift makes it
rotate about the image centre (torchvision's rotation), how much of the output it then writes,
and how long it takes.

`cvcuda.rotate_into(dst, src, angle, shift, interp)` samples the source at `R(angle) (dst -
shift)` and leaves every output pixel whose source point lies outside the image unwritten (it has
no fill). The shift that keeps the centre `c` in place is `c - R(-angle) c`; a shift built for
the opposite sign of the angle moves the image off the canvas, so most of the output is neither
read nor written. This script measures both, with the angle signs, against torchvision:

- for each (shift, angle sign): the fraction of output pixels CV-CUDA writes, and the median and
  99th-percentile absolute difference from `torchvision.transforms.v2.functional.rotate` over the
  pixels it writes whose source point lies at least one pixel inside the image;
- the time (CUDA events, median of 30 after 5 warm-ups, like `cvcuda_anchors.py`) of each shift
  at batches 8, 32 and 128 of 3 x 256 x 256 f32 NHWC images, as JSON lines under our case names
  (`impl` names the shift) for `compare.py`, and of the centred rotation after zeroing its output,
  which gives torchvision's result with fill 0 for every pixel;
- the anchors' `augment_pipeline` chain with each shift, and with the centred shift after
  zeroing the rotation's output.

usage (CV-CUDA unpacked into DIR as `../shared/anchors/cvcuda/README.md` says):
    PYTHONPATH=DIR python3 cvcuda_rotate_geometry.py > cvcuda-rotate.jsonl
"""
import json
import math
import random
import sys

import torch
import cvcuda
from torchvision.transforms.v2 import functional as TF
from torchvision.transforms import InterpolationMode

dev = torch.device("cuda")
cs = cvcuda.as_stream(torch.cuda.current_stream())
S = 256


def emit(**kw):
    print(json.dumps(kw), flush=True)


def bench(fn, reps=30, warm=5):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        out.append(a.elapsed_time(b))
    out.sort()
    return out[len(out) // 2]


def anchor_shift(angle, w, h):
    """The shift `cvcuda_anchors.py` passes (OpenCV's getRotationMatrix2D convention)."""
    a = math.radians(angle)
    cx, cy = (w - 1) * 0.5, (h - 1) * 0.5
    return [cx - cx * math.cos(a) + cy * math.sin(a), cy - cx * math.sin(a) - cy * math.cos(a)]


def centred_shift(angle, w, h):
    """`c - R(-angle) c` for CV-CUDA's `src = R(angle) (dst - shift)`: the centre stays put."""
    a = math.radians(angle)
    cx, cy = (w - 1) * 0.5, (h - 1) * 0.5
    return [cx - cx * math.cos(a) - cy * math.sin(a), cy + cx * math.sin(a) - cy * math.cos(a)]


SHIFTS = {"anchor-shift": anchor_shift, "centred": centred_shift}


def varshape(t):
    return cvcuda.as_images([t[i] for i in range(t.shape[0])])


def rotate_args(angles, shift):
    at = cvcuda.as_tensor(torch.tensor(angles, dtype=torch.float64, device=dev), "N")
    st = cvcuda.as_tensor(
        torch.tensor([shift(a, S, S) for a in angles], dtype=torch.float64, device=dev), "NC")
    return at, st


def inside_mask(angles, margin):
    """Output pixels whose torchvision source point lies `margin` pixels or more inside."""
    ys, xs = torch.meshgrid(torch.arange(S, device=dev, dtype=torch.float64),
                            torch.arange(S, device=dev, dtype=torch.float64), indexing="ij")
    c = (S - 1) * 0.5
    masks = []
    for a in angles:
        r = math.radians(a)
        sx = math.cos(r) * (xs - c) - math.sin(r) * (ys - c) + c
        sy = math.sin(r) * (xs - c) + math.cos(r) * (ys - c) + c
        masks.append((sx >= margin) & (sx <= S - 1 - margin) & (sy >= margin) & (sy <= S - 1 - margin))
    return torch.stack(masks)


def geometry():
    random.seed(3)
    B = 8
    x = torch.rand(B, S, S, 3, device=dev) * 255
    angles = [random.uniform(-45, 45) for _ in range(B)]
    want = torch.stack([TF.rotate(x[i].permute(2, 0, 1), angles[i], InterpolationMode.BILINEAR)
                        for i in range(B)]).permute(0, 2, 3, 1)
    # Either sign of the angle: the comparison needs no assumption about torchvision's.
    deep = inside_mask(angles, 1.0) & inside_mask([-a for a in angles], 1.0)
    for name, shift in SHIFTS.items():
        for sign in (1, -1):
            y = torch.full_like(x, float("nan"))
            at, st = rotate_args([sign * a for a in angles], shift)
            cvcuda.rotate_into(varshape(y), varshape(x), at, st, cvcuda.Interp.LINEAR, stream=cs)
            torch.cuda.synchronize()
            written = ~torch.isnan(y[..., 0])
            both = written & deep
            d = (y - want).abs()[both]
            emit(geometry=name, angle_sign=sign, written_fraction=round(written.float().mean().item(), 4),
                 compared=int(both.sum().item()),
                 median_abs_diff=round(d.median().item(), 5) if d.numel() else None,
                 p99_abs_diff=round(d.quantile(0.99).item(), 5) if d.numel() else None)


def timings():
    random.seed(5)
    for B in (8, 32, 128):
        x = torch.rand(B, S, S, 3, device=dev) * 255
        y = torch.empty_like(x)
        vx, vy = varshape(x), varshape(y)
        angles = [random.uniform(-45, 45) for _ in range(B)]
        for mode, interp in (("nearest", cvcuda.Interp.NEAREST), ("bilinear", cvcuda.Interp.LINEAR)):
            case = f"rotate_{mode}_b{B}"
            for name, shift in SHIFTS.items():
                at, st = rotate_args(angles, shift)
                y.fill_(float("nan"))
                cvcuda.rotate_into(vy, vx, at, st, interp, stream=cs)
                torch.cuda.synchronize()
                frac = (~torch.isnan(y[..., 0])).float().mean().item()
                ms = bench(lambda: cvcuda.rotate_into(vy, vx, at, st, interp, stream=cs))
                emit(case=case, impl=f"cvcuda-{name}", ms=round(ms, 5), layout="NHWC varshape",
                     written_fraction=round(frac, 4))
            at, st = rotate_args(angles, centred_shift)

            def zero_then_rotate():
                y.zero_()
                cvcuda.rotate_into(vy, vx, at, st, interp, stream=cs)

            emit(case=case, impl="cvcuda-centred-zeroed", ms=round(bench(zero_then_rotate), 5),
                 layout="NHWC varshape", written_fraction=1.0)


def chain():
    """`cvcuda_anchors.py`'s `augment_pipeline` chain (crop, resize, rotate, blur, normalize)
    with each shift, and with the centred shift after zeroing the rotation's output."""
    for B in (8, 32, 128):
        case = f"augment_pipeline_b{B}"
        u8 = torch.randint(0, 256, (B, S, S, 3), dtype=torch.uint8, device=dev)
        vs = varshape(u8)
        flip = cvcuda.as_tensor(torch.full((B, 1, 1, 1), 5, dtype=torch.int32, device=dev), "NHWC")
        base = cvcuda.as_tensor(torch.zeros(1, 1, 1, 3, device=dev), "NHWC")
        one = cvcuda.as_tensor(torch.ones(1, 1, 1, 3, device=dev), "NHWC")
        crop = torch.empty(B, 128, 128, 3, device=dev)
        cropc = cvcuda.as_tensor(crop, "NHWC")
        big = torch.empty(B, S, S, 3, device=dev)
        bigc, bigv = cvcuda.as_tensor(big, "NHWC"), varshape(big)
        rot = torch.empty(B, S, S, 3, device=dev)
        rotv, rotc = varshape(rot), cvcuda.as_tensor(rot, "NHWC")
        blur = torch.empty(B, S, S, 3, device=dev)
        blurc = cvcuda.as_tensor(blur, "NHWC")
        outp = torch.empty(B, S, S, 3, device=dev)
        outc = cvcuda.as_tensor(outp, "NHWC")

        def pipe(shift, zero):
            r = torch.zeros(B, 1, 1, 4, dtype=torch.int32, device=dev)
            r[:, 0, 0, 0:2] = torch.randint(0, S // 2 + 1, (B, 2), device=dev, dtype=torch.int32)
            r[:, 0, 0, 2:4] = 128
            cvcuda.crop_flip_normalize_reformat_into(cropc, vs, cvcuda.as_tensor(r, "NHWC"), flip, base, one, stream=cs)
            cvcuda.resize_into(bigc, cropc, cvcuda.Interp.LINEAR, stream=cs)
            at, st = rotate_args([random.uniform(-45, 45) for _ in range(B)], shift)
            if zero:
                rot.zero_()
            cvcuda.rotate_into(rotv, bigv, at, st, cvcuda.Interp.NEAREST, stream=cs)
            cvcuda.gaussian_into(blurc, rotc, (7, 7), (1.5, 1.5), cvcuda.Border.REFLECT101, stream=cs)
            cvcuda.normalize_into(outc, blurc, base, one, cvcuda.NormalizeFlags.SCALE_IS_STDDEV, stream=cs)

        for name, shift in SHIFTS.items():
            emit(case=case, impl=f"cvcuda-chain-{name}", ms=round(bench(lambda: pipe(shift, False)), 5),
                 layout="NHWC")
        emit(case=case, impl="cvcuda-chain-centred-zeroed", ms=round(bench(lambda: pipe(centred_shift, True)), 5),
             layout="NHWC")


if __name__ == "__main__":
    emit(gpu=torch.cuda.get_device_name(), cvcuda=getattr(cvcuda, "__version__", "?"))
    geometry()
    timings()
    chain()
    sys.exit(0)
