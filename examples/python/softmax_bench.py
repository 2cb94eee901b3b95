#!/usr/bin/env python3
"""`torch.softmax` over the last dimension on the shapes `softmax bench` times (the Rust example
in `examples/softmax`), f32 and bf16, beside a device-to-device copy of the same bytes: CUDA-event
medians after warm-up, each call on another of several inputs that together exceed L2. Prints
the same columns as the Rust bench, so both can run in one command on the GPU machine:

    cargo run --release -p softmax -- bench && python3 examples/python/softmax_bench.py
"""
import statistics

import torch

SHAPES = [(4096, 1000), (16384, 1000), (8192, 4096), (4096, 32768)]
ROTATE_BYTES = 256 << 20
dev = torch.device("cuda")


def median_ms(fn, inputs):
    runs = max(len(inputs) * 10, 50)
    times = []
    for r in range(runs):
        x = inputs[r % len(inputs)]
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(x)
        end.record()
        end.synchronize()
        if r >= len(inputs):
            times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    print("shape, type, torch ms, torch GB/s, copy ms, copy GB/s")
    for rows, cols in SHAPES:
        for dtype, name in [(torch.float32, "f32"), (torch.bfloat16, "bf16")]:
            nbytes = rows * cols * torch.finfo(dtype).bits // 8
            count = max(2, -(-ROTATE_BYTES // nbytes))
            inputs = [torch.randn(rows, cols, device=dev).to(dtype) for _ in range(count)]
            out = torch.empty(rows, cols, device=dev, dtype=dtype)
            k = median_ms(lambda x: torch.softmax(x, dim=-1), inputs)
            c = median_ms(lambda x, y=out: y.copy_(x), inputs)
            gbs = lambda ms: 2 * nbytes / (ms * 1e6)
            print(f"{rows} x {cols}, {name}, {k:.4f}, {gbs(k):.1f}, {c:.4f}, {gbs(c):.1f}")
            del inputs, out
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
