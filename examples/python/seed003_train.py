#!/usr/bin/env python3
"""Seed 003 end to end from PyTorch: the seed's CNN and training loop, synthetic uint8 images
through a DataLoader, augmented on the GPU by torchvision's batch transforms (as the seed
writes them) or by Streamline's fused `Augment` (one kernel per batch, a random crop, angle and
sigma per image), serial or pipelined on a transform stream. Prints steps per second as JSON
lines, one per batch size and mode, plus each augmentation's and the training step's GPU time.
The seed's loop is kept as written, but for `record_stream`, which names the training stream
(the seed names the transform stream, where it does nothing); `-pinned` modes also pin the
loader's batches and copy the labels on the transform stream.

    python3 examples/python/seed003_train.py [BATCH ...]      (default: 8 32 64 128)

The swap is one line: `gpu_aug = sl.Augment(img_size)` instead of the torchvision Compose.
"""
import json
import os
import random
import sys
import time

import torch
import torch.nn as nn
import torchvision.ops as ops
import torchvision.transforms.v2 as T
import torchvision.transforms.v2.functional as F
from torch.utils.data import DataLoader, Dataset

import streamline as sl

img_size, num_classes = 256, 10
dev = torch.device("cuda")
WORKERS = int(os.environ.get("WORKERS", "8"))
WARMUP, ACTIVE = int(os.environ.get("WARMUP", "10")), int(os.environ.get("ACTIVE", "60"))


def model():
    layers = [nn.Conv2d(3, 16, 1), nn.ReLU(inplace=True)]
    ch = 16
    for _ in range(7):
        layers += [nn.Conv2d(ch, ch * 2, 2, stride=2), nn.ReLU(inplace=True)]
        ch *= 2
    layers += [nn.Conv2d(ch, 4096, 2, stride=2), nn.Flatten(), nn.Linear(4096, num_classes)]
    return nn.Sequential(*layers)


class Fake(Dataset):
    def __len__(self):
        return 1_000_000

    def __getitem__(self, i):
        img = torch.randint(0, 256, (3, img_size, img_size), dtype=torch.uint8)
        return img, torch.randint(0, num_classes, (1,))


# The seed's GPU batch transforms, as written there.
class BatchRandomCrop(T.Transform):
    def __init__(self, s):
        super().__init__()
        self.s = s

    def transform(self, img, params):
        b, _, h, w = img.shape
        top = torch.randint(0, h - self.s + 1, (b,), device=img.device, dtype=torch.float32)
        left = torch.randint(0, w - self.s + 1, (b,), device=img.device, dtype=torch.float32)
        idx = torch.arange(b, device=img.device, dtype=torch.float32)
        boxes = torch.stack([idx, left, top, left + self.s, top + self.s], 1)
        return ops.roi_align(img, boxes, output_size=self.s)


class BatchRandomRotation(T.Transform):
    def __init__(self, d):
        super().__init__()
        self.d = d

    def transform(self, x, params):
        return torch.stack([F.rotate(i, angle=random.uniform(-self.d, self.d)) for i in torch.unbind(x, 0)], 0)


torchvision_aug = T.Compose([T.ToDtype(torch.float32), BatchRandomCrop(img_size // 2), T.Resize(img_size),
                             BatchRandomRotation(45.0), T.GaussianBlur(kernel_size=7),
                             T.Normalize(mean=[0, 0, 0], std=[1, 1, 1])])
streamline_aug = sl.Augment(img_size, seed=3)  # the same transform, fused
AUGS = {"torchvision": torchvision_aug, "streamline": streamline_aug}


def run(aug, pipelined, batch, pinned=False):
    """Steps per second of the seed's loop. ``pinned``: the loader pins its batches and the
    labels travel with the images on the transform stream (the seed copies them from pageable
    memory on the training stream, which makes the host wait for the previous step)."""
    gpu_aug = AUGS[aug]
    m = model().to(dev).train()
    crit = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(m.parameters())
    loader = DataLoader(Fake(), batch_size=batch, num_workers=WORKERS, persistent_workers=False, pin_memory=pinned)
    total = WARMUP + ACTIVE
    if not pipelined:
        for idx, (x, y) in enumerate(loader):
            x = x.to(dev, non_blocking=True)
            y = y.to(dev, non_blocking=True).squeeze()
            x = gpu_aug(x)
            opt.zero_grad()
            loss = crit(m(x), y)
            loss.backward()
            opt.step()
            if idx == WARMUP:
                torch.cuda.synchronize()
                t0 = time.perf_counter()
            if idx == total:
                break
    else:  # the seed's pipelined loop: augment batch N+1 on ts while training on batch N on ms
        ts, ms = torch.cuda.Stream(), torch.cuda.Stream()
        tr = labels = None
        for idx, (x, yn) in enumerate(loader):
            if tr is not None:
                with torch.cuda.stream(ms):
                    if not pinned:
                        labels = labels.to(dev, non_blocking=True).squeeze()
                    ms.wait_stream(ts)
                    # The batch was allocated on ts and is read on ms: the allocator must not
                    # hand its memory to ts again before ms is done (the seed records it on ts).
                    tr.record_stream(ms)
                    labels.record_stream(ms)
                    opt.zero_grad()
                    loss = crit(m(tr), labels)
                    loss.backward()
                    opt.step()
            with torch.cuda.stream(ts):
                x = x.to(dev, non_blocking=True)
                tr = gpu_aug(x)
                tr.record_stream(ts)
                if pinned:
                    yn = yn.to(dev, non_blocking=True).squeeze()
            labels = yn
            if idx == WARMUP:
                torch.cuda.synchronize()
                t0 = time.perf_counter()
            if idx == total:
                break
    torch.cuda.synchronize()
    return ACTIVE / (time.perf_counter() - t0)


def run_whole_step(batch, how):
    """Steps per second of the seed's serial loop with Streamline's augmentation, the whole step
    (augmentation, forward, loss, backward, SGD) either compiled (``how="compiled"``:
    ``torch.compile`` of augmentation and forward, the augmentation a custom operator inside the
    compiled graph) or captured once in a CUDA graph and replayed for every batch
    (``how="graphed"``; the loader's batch is copied into the graph's input). The augmentation
    draws on the device, anew at every step, in both."""
    aug = sl.Augment(img_size, seed=3)
    m = model().to(dev).train()
    crit = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(m.parameters())
    loader = DataLoader(Fake(), batch_size=batch, num_workers=WORKERS, persistent_workers=False)
    total = WARMUP + ACTIVE
    if how == "compiled":
        forward = torch.compile(lambda x8: m(aug(x8)))

        def step(x, y):
            opt.zero_grad()
            crit(forward(x), y).backward()
            opt.step()
    else:
        sx = torch.zeros((batch, 3, img_size, img_size), dtype=torch.uint8, device=dev)
        sy = torch.zeros((batch,), dtype=torch.int64, device=dev)

        def body():
            opt.zero_grad(set_to_none=False)
            crit(m(aug(sx)), sy).backward()
            opt.step()

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                body()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            body()

        def step(x, y):
            sx.copy_(x, non_blocking=True)
            sy.copy_(y, non_blocking=True)
            graph.replay()
    for idx, (x, y) in enumerate(loader):
        step(x.to(dev, non_blocking=True), y.to(dev, non_blocking=True).squeeze())
        if idx == WARMUP:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
        if idx == total:
            break
    torch.cuda.synchronize()
    return ACTIVE / (time.perf_counter() - t0)


def gpu_ms(fn, reps=30):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(reps):
        fn()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) / reps


def timed_parts(batch):
    m = model().to(dev).train()
    crit = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(m.parameters())
    x8 = torch.randint(0, 256, (batch, 3, img_size, img_size), dtype=torch.uint8, device=dev)
    y = torch.randint(0, num_classes, (batch,), device=dev)
    xf = torchvision_aug(x8)

    def step():
        opt.zero_grad()
        crit(m(xf), y).backward()
        opt.step()

    return {"torchvision_aug_ms": gpu_ms(lambda: torchvision_aug(x8)),
            "streamline_aug_ms": gpu_ms(lambda: streamline_aug(x8)), "train_step_ms": gpu_ms(step)}


if __name__ == "__main__":
    batches = [int(b) for b in sys.argv[1:]] or [8, 32, 64, 128]
    print(json.dumps({"torch": torch.__version__, "gpu": torch.cuda.get_device_name(), "workers": WORKERS,
                      "warmup": WARMUP, "active": ACTIVE}), flush=True)
    for b in batches:
        print(json.dumps({"batch": b, **timed_parts(b)}), flush=True)
        sps = {}
        for aug in ("torchvision", "streamline"):
            for pipelined, pinned in ((False, False), (True, False), (True, True)):
                mode = f"{aug}{'-pipelined' if pipelined else ''}{'-pinned' if pinned else ''}"
                sps[mode] = run(aug, pipelined, b, pinned)
                print(json.dumps({"batch": b, "mode": mode, "steps_per_s": round(sps[mode], 2)}), flush=True)
        for how in ("compiled", "graphed"):
            sps[f"streamline-{how}"] = run_whole_step(b, how)
            print(json.dumps({"batch": b, "mode": f"streamline-{how}", "steps_per_s": round(sps[f"streamline-{how}"], 2)}),
                  flush=True)
        print(json.dumps({"batch": b, "speedup_vs_torchvision": {
            k: round(sps[f"streamline{k}"] / sps[f"torchvision{k}"], 3)
            for k in ("", "-pipelined", "-pipelined-pinned")}}), flush=True)
        print(json.dumps({"batch": b, "whole_step_vs_streamline_eager": {
            k: round(sps[f"streamline-{k}"] / sps["streamline"], 3) for k in ("compiled", "graphed")}}), flush=True)
