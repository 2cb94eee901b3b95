#!/usr/bin/env python3
"""Host time a Python call adds over the same call made from Rust: `normalize` on a small batch
(the GPU work is tiny, so host time is what is measured), called N times from Python (through
the torch-tensor checks, the stream lookup and PyO3) and N times from a Rust loop in the same
process on the same tensors, and N times through the custom operator (the path of compiled
graphs). Prints JSON lines (microseconds per call, medians of rounds)."""
import json
import statistics
import time

import torch

import streamline as sl
from streamline import _native

N, ROUNDS = 2000, 7
dev = torch.device("cuda")
x = torch.rand(1, 3, 8, 8, device=dev)
out = torch.empty_like(x)
mean, std = [0.5, 0.5, 0.5], [0.25, 0.25, 0.25]
stream = torch.cuda.current_stream().cuda_stream


def py_call(alloc):
    t = time.perf_counter()
    if alloc:
        for _ in range(N):
            sl.normalize(x, mean, std)
    else:
        for _ in range(N):
            sl.normalize(x, mean, std, out=out)
    dt = (time.perf_counter() - t) / N
    torch.cuda.synchronize()
    return dt


def rust_call():
    def tensor(t):
        return t.data_ptr(), tuple(t.shape), "float32", None

    dt = _native.host_time("normalize", 0, stream, (tensor(x), mean, std, "NCHW"), tensor(out), N)
    torch.cuda.synchronize()
    return dt


def op_call():
    """The same call through the custom operator (``torch.ops.streamline.normalize``), the
    path ``torch.compile``'s graphs take."""
    op = torch.ops.streamline.normalize
    t = time.perf_counter()
    for _ in range(N):
        op(x, mean, std, "NCHW")
    dt = (time.perf_counter() - t) / N
    torch.cuda.synchronize()
    return dt


def torch_call():
    t = time.perf_counter()
    for _ in range(N):
        torch.sub(x, 0.5).div_(0.25)
    dt = (time.perf_counter() - t) / N
    torch.cuda.synchronize()
    return dt


for f in (py_call, rust_call):  # warm-up: module load, allocator
    f(False) if f is py_call else f()
op_call()
rows = {"rust_us": [], "python_out_us": [], "python_alloc_us": [], "custom_op_us": [], "torch_sub_div_us": []}
for _ in range(ROUNDS):
    rows["rust_us"].append(rust_call() * 1e6)
    rows["python_out_us"].append(py_call(False) * 1e6)
    rows["python_alloc_us"].append(py_call(True) * 1e6)
    rows["custom_op_us"].append(op_call() * 1e6)
    rows["torch_sub_div_us"].append(torch_call() * 1e6)
med = {k: round(statistics.median(v), 2) for k, v in rows.items()}
med["python_over_rust_us"] = round(med["python_out_us"] - med["rust_us"], 2)
med["python_alloc_over_rust_us"] = round(med["python_alloc_us"] - med["rust_us"], 2)
med["custom_op_over_python_alloc_us"] = round(med["custom_op_us"] - med["python_alloc_us"], 2)
print(json.dumps({"case": "host_overhead_normalize", "gpu": torch.cuda.get_device_name(), **med}))
