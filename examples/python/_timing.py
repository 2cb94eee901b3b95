"""Timing shared by the benchmark scripts: CUDA-event medians after warm-up, each call on another
of several fresh inputs that together exceed the GPU's L2 cache."""
import statistics

import torch

#: bytes the inputs of one timed case span together (several times the L2 of current GPUs)
ROTATE_BYTES = 256 << 20


def input_count(nbytes):
    """How many inputs of ``nbytes`` each span :data:`ROTATE_BYTES` (at least two)."""
    return max(2, -(-ROTATE_BYTES // nbytes))


def median_ms(fn, inputs, runs=None, calls=1):
    """Median milliseconds per call of ``fn(x)`` (``fn(*x)`` for a tuple) over ``inputs`` in
    turn, after one warm-up pass over them; ``runs`` timed runs (default: ten per input, at least
    50) of ``calls`` calls each, queued back to back between the two events (more than one keeps
    the caller's launch path from leaving the GPU waiting)."""
    runs = runs or max(len(inputs) * 10, 50)
    times = []
    for r in range(len(inputs) + runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for k in range(calls):
            x = inputs[(r * calls + k) % len(inputs)]
            fn(*x) if isinstance(x, tuple) else fn(x)
        end.record()
        end.synchronize()
        if r >= len(inputs):
            times.append(start.elapsed_time(end) / calls)
    return statistics.median(times)
