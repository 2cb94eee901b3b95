#!/usr/bin/env python3
"""Seed 003's training loop under ``torchrun`` with DistributedDataParallel: every rank trains
the seed's CNN on its own GPU, augmenting its own batches there, by torchvision's batch
transforms as the seed writes them or by Streamline's fused ``Augment`` (which runs on the device
of the tensors it is given, on that device's current stream), pipelined on a transform stream as
in the seed; DDP averages the gradients. Rank 0 prints, as JSON lines, the steps per second of
each (each step one batch per GPU) and whether every rank ended with the same weights.

    torchrun --nproc_per_node 2 examples/python/seed003_ddp.py [BATCH_PER_GPU]   (default 128)

Each rank's DataLoader gets the CPUs this process may run on shared among the ranks on the host, two left for the rank's
own threads (the environment variable WORKERS sets another count), so that making the batches
does not bound either loop.
"""
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader

local = int(os.environ.get("LOCAL_RANK", 0))
torch.cuda.set_device(local)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import seed003_train as s3  # noqa: E402  (the seed's model, data and transforms; after set_device)

import streamline as sl  # noqa: E402

WORKERS = (int(os.environ["WORKERS"]) if "WORKERS" in os.environ
           else max(2, len(os.sched_getaffinity(0)) // int(os.environ.get("LOCAL_WORLD_SIZE", 1)) - 2))


def run(aug_name, batch, rank):
    """Steps per second of the seed's pipelined loop (pinned batches) under DDP, and a checksum
    of the weights after it."""
    dev = torch.device("cuda", local)
    aug = s3.torchvision_aug if aug_name == "torchvision" else sl.Augment(s3.img_size, seed=3 + rank)
    torch.manual_seed(0)  # the same initial weights on every rank (DDP also broadcasts rank 0's)
    m = DDP(s3.model().to(dev).train(), device_ids=[local])
    crit = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(m.parameters())
    loader = DataLoader(s3.Fake(), batch_size=batch, num_workers=WORKERS, pin_memory=True)
    ts, ms = torch.cuda.Stream(), torch.cuda.Stream()
    tr = labels = None
    total = s3.WARMUP + s3.ACTIVE
    for idx, (x, yn) in enumerate(loader):
        if tr is not None:
            with torch.cuda.stream(ms):
                ms.wait_stream(ts)
                tr.record_stream(ms)
                labels.record_stream(ms)
                opt.zero_grad()
                crit(m(tr), labels).backward()
                opt.step()
        with torch.cuda.stream(ts):
            tr = aug(x.to(dev, non_blocking=True))
            labels = yn.to(dev, non_blocking=True).squeeze(1)
        if idx == s3.WARMUP:
            torch.cuda.synchronize()
            dist.barrier()
            t0 = time.perf_counter()
        if idx == total:
            break
    torch.cuda.synchronize()
    dist.barrier()
    sps = s3.ACTIVE / (time.perf_counter() - t0)
    flat = torch.cat([p.detach().reshape(-1) for p in m.parameters()])
    sums = [torch.zeros(2, dtype=torch.float64, device=dev) for _ in range(dist.get_world_size())]
    dist.all_gather(sums, torch.stack([flat.double().sum(), flat.double().abs().sum()]))
    same = all(torch.equal(sums[0], s) for s in sums)
    return sps, same


def main():
    batch = int(sys.argv[1]) if len(sys.argv) > 1 else 128
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    rank, world = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        print(json.dumps({"torch": torch.__version__, "gpu": torch.cuda.get_device_name(), "world": world,
                          "batch_per_gpu": batch, "workers_per_rank": WORKERS, "warmup": s3.WARMUP,
                          "active": s3.ACTIVE}), flush=True)
    sps = {}
    for aug in ("torchvision", "streamline"):
        sps[aug], same = run(aug, batch, rank)
        if rank == 0:
            print(json.dumps({"mode": f"{aug}-ddp", "steps_per_s": round(sps[aug], 2),
                              "images_per_s": round(sps[aug] * batch * world, 1), "weights_equal_on_every_rank": same}),
                  flush=True)
        if not same:
            raise SystemExit(f"{aug}: the ranks' weights differ after the run")
    if rank == 0:
        print(json.dumps({"speedup_vs_torchvision_ddp": round(sps["streamline"] / sps["torchvision"], 3)}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
