#!/usr/bin/env python3
"""Seed 000's heavy elementwise, ``x**2 + x**3 * sin(x) * cos(x) + tan(x)``, in float32,
float16 and bfloat16: Streamline's ``sl.heavy`` beside torch eager and ``torch.compile`` of the
seed's own function, on the same inputs in one process. CUDA-event medians after warm-up, each
call on another of several inputs that together exceed L2.

    python3 examples/python/heavy_bench.py
"""
import torch
from _timing import input_count, median_ms

import streamline as sl

SIZES = [10_000_000, 100_000_000]
dev = torch.device("cuda")


def heavy(t):  # seed 000's heavy_computation
    return t.pow(2) + t.pow(3) * torch.sin(t) * torch.cos(t) + torch.tan(t)


def main():
    compiled = torch.compile(heavy)
    print("n, type, streamline ms, torch eager ms, torch.compile ms, compile / streamline")
    for n in SIZES:
        for dtype, name in [(torch.float32, "f32"), (torch.float16, "f16"), (torch.bfloat16, "bf16")]:
            nbytes = n * torch.finfo(dtype).bits // 8
            count = input_count(nbytes)
            inputs = [torch.randn(n, device=dev).to(dtype) for _ in range(count)]
            out = torch.empty(n, device=dev, dtype=dtype)
            ours = median_ms(lambda x, y=out: sl.heavy(x, out=y), inputs)
            eager = median_ms(heavy, inputs)
            comp = median_ms(compiled, inputs)
            print(f"{n:.0e}, {name}, {ours:.4f}, {eager:.4f}, {comp:.4f}, {comp / ours:.2f}x")
            del inputs, out
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
