#!/usr/bin/env python3
"""`torch.softmax` over the last dimension on the shapes `softmax bench` times (the Rust example
in `examples/softmax`), f32 and bf16, beside a device-to-device copy of the same bytes: CUDA-event
medians after warm-up, each call on another of several inputs that together exceed L2, of a call
timed alone and per call of a stream of calls queued back to back. Prints the same columns as the
Rust bench, so both can run in one command on the GPU machine:

    cargo run --release -p softmax -- bench && python3 examples/python/softmax_bench.py
"""
import torch
from _timing import input_count, median_ms

SHAPES = [(4096, 1000), (16384, 1000), (8192, 4096), (4096, 16384), (4096, 32768)]
#: calls queued back to back for the "in a stream" times, as in the Rust bench
STREAMED = 16
dev = torch.device("cuda")


def main():
    print(
        "shape, type, torch ms, torch GB/s, copy ms, copy GB/s, "
        "in a stream: torch ms, torch GB/s, copy ms, copy GB/s"
    )
    for rows, cols in SHAPES:
        for dtype, name in [(torch.float32, "f32"), (torch.bfloat16, "bf16")]:
            nbytes = rows * cols * torch.finfo(dtype).bits // 8
            count = input_count(nbytes)
            inputs = [torch.randn(rows, cols, device=dev).to(dtype) for _ in range(count)]
            out = torch.empty(rows, cols, device=dev, dtype=dtype)
            soft = lambda x: torch.softmax(x, dim=-1)
            copy = lambda x, y=out: y.copy_(x)
            k, c = median_ms(soft, inputs), median_ms(copy, inputs)
            ks, cs = median_ms(soft, inputs, calls=STREAMED), median_ms(copy, inputs, calls=STREAMED)
            gbs = lambda ms: 2 * nbytes / (ms * 1e6)
            print(
                f"{rows} x {cols}, {name}, {k:.4f}, {gbs(k):.1f}, {c:.4f}, {gbs(c):.1f}, "
                f"{ks:.4f}, {gbs(ks):.1f}, {cs:.4f}, {gbs(cs):.1f}"
            )
            del inputs, out
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
