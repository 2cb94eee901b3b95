#!/usr/bin/env python3
"""`roi_align` forward and backward, Streamline against torchvision on the same GPU in the same
run: CUDA-event medians after warm-up, fresh inputs for every timed call (several sets, together
larger than L2). Cases: a detection head (Mask R-CNN's box head: 2 x 256 x 200 x 272 features,
512 boxes per image of 8 to 200 pixels, 7 x 7 bins, sampling_ratio 2, aligned) and seed 003's
crop (128 images of 3 x 256 x 256, one 128 x 128 box each). The backward is timed three ways:
torchvision's (atomic adds), Streamline's atomic one, and Streamline's deterministic one (no
atomics; torchvision has none). Prints JSON lines.

    python3 examples/python/roi_align_bench.py
"""
import json
import torch
import torchvision.ops as ops
from _timing import median_ms

import streamline as sl

dev = torch.device("cuda")
SETS = 4


def boxes_for(n, per, h, w, lo, hi, g):
    k = n * per
    size = torch.rand(k, 2, generator=g) * (hi - lo) + lo
    x1 = torch.rand(k, generator=g) * (w - size[:, 0])
    y1 = torch.rand(k, generator=g) * (h - size[:, 1])
    idx = torch.arange(n).repeat_interleave(per).float()
    return torch.stack([idx, x1, y1, x1 + size[:, 0], y1 + size[:, 1]], 1).to(dev)


def case(name, shape, per, lo, hi, out, ratio, aligned):
    g = torch.Generator().manual_seed(0)
    n, c, h, w = shape
    sets = []
    for _ in range(SETS):
        x = torch.randn(shape, device=dev)
        b = boxes_for(n, per, h, w, lo, hi, g)
        gy = torch.randn(n * per, c, out, out, device=dev)
        sets.append((x, b, gy))
    fwd = {
        "torchvision": median_ms(lambda x, b, gy: ops.roi_align(x, b, out, 1.0, ratio, aligned), sets),
        "streamline": median_ms(lambda x, b, gy: sl.roi_align(x, b, out, 1.0, ratio, aligned), sets),
    }

    def tv_backward(x, b, gy):
        torch.ops.torchvision._roi_align_backward(gy, b, 1.0, out, out, n, c, h, w, ratio, aligned)

    bwd = {
        "torchvision": median_ms(tv_backward, sets),
        "streamline": median_ms(lambda x, b, gy: sl.roi_align_backward(gy, b, shape, out, 1.0, ratio, aligned), sets),
        "streamline_deterministic": median_ms(
            lambda x, b, gy: sl.roi_align_backward(gy, b, shape, out, 1.0, ratio, aligned, deterministic=True), sets),
    }
    for what, t in (("forward", fwd), ("backward", bwd)):
        row = {"case": f"roi_align_{what}_{name}", "gpu": torch.cuda.get_device_name()}
        row.update({f"{k}_ms": round(v, 4) for k, v in t.items()})
        row.update({f"speedup_{k}": round(t["torchvision"] / v, 3) for k, v in t.items() if k != "torchvision"})
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    case("detection_b2", (2, 256, 200, 272), 512, 8, 200, 7, 2, True)
    case("crop128_b128", (128, 3, 256, 256), 1, 128, 128, 128, -1, False)
