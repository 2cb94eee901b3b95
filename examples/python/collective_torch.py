"""The peer of ``streamline collective``: ``torch.distributed``'s NCCL collectives timed the same
way (per rank, CUDA events around ``iters`` collectives on a zeroed f32 tensor, after warm-up; the
slowest rank's time per collective; the median of ``repeat`` repetitions), one JSON line per
message size from rank 0. Run it with one process per GPU:

    torchrun --nproc_per_node 2 collective_torch.py [--op all_reduce] [--bytes 64K,1G]
"""
import argparse
import json
import os
import statistics

import torch
import torch.distributed as dist


def parse_bytes(s):
    s = s.strip().upper()
    mul = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1:], 1)
    return int(s[:-1] if mul > 1 else s) * mul


BUS = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--op", choices=sorted(BUS), default="all_reduce")
    p.add_argument("--bytes", default="64K,1M,16M,256M,1G")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--repeat", type=int, default=10)
    a = p.parse_args()
    local = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    world, rank = dist.get_world_size(), dist.get_rank()
    for nbytes in [parse_bytes(b) for b in a.bytes.split(",")]:
        n = nbytes // 4
        if a.op == "all_reduce" or a.op == "broadcast":
            buf = torch.zeros(n, device="cuda")
            run = (lambda: dist.all_reduce(buf)) if a.op == "all_reduce" else (lambda: dist.broadcast(buf, 0))
        elif a.op == "all_gather":
            out, part = torch.zeros(n, device="cuda"), torch.zeros(n // world, device="cuda")
            run = lambda: dist.all_gather_into_tensor(out, part)
        else:
            inp, part = torch.zeros(n, device="cuda"), torch.zeros(n // world, device="cuda")
            run = lambda: dist.reduce_scatter_tensor(part, inp)
        for _ in range(3):
            run()
        torch.cuda.synchronize()
        samples = []
        for _ in range(a.repeat):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(a.iters):
                run()
            end.record()
            end.synchronize()
            t = torch.tensor([start.elapsed_time(end) * 1e3 / a.iters], device="cuda")
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            samples.append(t.item())
        us = statistics.median(samples)
        algbw = nbytes / (us * 1e-6) / 1e9
        if rank == 0:
            print(json.dumps({"peer": "torch.distributed", "op": a.op, "world": world, "bytes": nbytes,
                              "us": us, "algbw_gbs": algbw, "busbw_gbs": algbw * BUS[a.op](world),
                              "torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version()))}),
                  flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
