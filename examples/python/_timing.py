"""Timing shared by the benchmark scripts: CUDA-event medians after warm-up, each call on another
of several fresh inputs that together exceed the GPU's L2 cache."""
import statistics

import torch

#: bytes the inputs of one timed case span together (several times the L2 of current GPUs)
ROTATE_BYTES = 256 << 20


def input_count(nbytes):
    """How many inputs of ``nbytes`` each span :data:`ROTATE_BYTES` (at least two)."""
    return max(2, -(-ROTATE_BYTES // nbytes))


def median_ms(fn, inputs, runs=None):
    """Median milliseconds of ``fn(x)`` (``fn(*x)`` for a tuple) over ``inputs`` in turn, after
    one warm-up pass over them; ``runs`` timed calls (default: ten per input, at least 50)."""
    runs = runs or max(len(inputs) * 10, 50)
    times = []
    for r in range(len(inputs) + runs):
        x = inputs[r % len(inputs)]
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*x) if isinstance(x, tuple) else fn(x)
        end.record()
        end.synchronize()
        if r >= len(inputs):
            times.append(start.elapsed_time(end))
    return statistics.median(times)
