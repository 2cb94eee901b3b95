#!/usr/bin/env python3
"""Seed 003's model trained on a folder of JPEG files, two ways, on the same files in one run:

- the seed's loop: torchvision's `ImageFolder` and a `DataLoader` whose workers decode each
  file with PIL and scale it to cover the square (`Resize` + `CenterCrop`), then the seed's GPU
  batch transforms (torchvision);
- Streamline: threads only read the files' bytes, `sl.decode_jpeg` decodes a batch on the GPU
  (nvJPEG: the hardware JPEG decoders and CUDA) into one ragged batch, and `sl.Augment` crops
  each image from itself (the crop does the resize to the square) in one kernel.

Prints images per second of each as JSON lines (after warm-up), and their ratio.

    python3 examples/python/seed003_files.py DIR [BATCH] [STEPS]    (default 128, 30)

DIR holds class folders of JPEGs, as `examples/python/make_images.py DIR 3000` writes them.
"""
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import torch
import torch.nn as nn
import torchvision
import torchvision.transforms as TT
from torch.utils.data import DataLoader

import streamline as sl
from seed003_train import img_size, model, torchvision_aug

dev = torch.device("cuda")
WORKERS = int(os.environ.get("WORKERS", "8"))
WARMUP = int(os.environ.get("WARMUP", "5"))


def train_step(m, opt, crit, x, y):
    opt.zero_grad()
    loss = crit(m(x), y)
    loss.backward()
    opt.step()


def seed_loop(folder, batch, steps):
    """The seed's DataLoader loop on the folder (PIL decode and resize on the workers)."""
    tf = TT.Compose([TT.Resize(img_size), TT.CenterCrop(img_size), TT.PILToTensor()])
    ds = torchvision.datasets.ImageFolder(folder, transform=tf)
    loader = DataLoader(ds, batch_size=batch, shuffle=True, num_workers=WORKERS, drop_last=True,
                        persistent_workers=False)
    m, crit = model().to(dev).train(), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(m.parameters())
    t0, done = None, 0
    while done < WARMUP + steps:
        for x, y in loader:
            x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
            train_step(m, opt, crit, torchvision_aug(x), y)
            done += 1
            if done == WARMUP:
                torch.cuda.synchronize()
                t0 = time.perf_counter()
            if done == WARMUP + steps:
                break
    torch.cuda.synchronize()
    return steps * batch / (time.perf_counter() - t0)


def streamline_loop(folder, batch, steps):
    """Files read by threads, decoded on the GPU, augmented as a ragged batch."""
    ds = torchvision.datasets.ImageFolder(folder)
    files, labels = [p for p, _ in ds.samples], [c for _, c in ds.samples]
    aug = sl.Augment(img_size, seed=3)
    m, crit = model().to(dev).train(), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(m.parameters())
    g = torch.Generator().manual_seed(0)

    def read(p):
        with open(p, "rb") as f:
            return f.read()

    def batches(pool):
        while True:
            order = torch.randperm(len(files), generator=g).tolist()
            for k in range(0, len(order) - batch + 1, batch):
                idx = order[k:k + batch]
                yield pool.map(read, [files[i] for i in idx]), torch.tensor([labels[i] for i in idx])

    with ThreadPoolExecutor(WORKERS) as pool:
        it = batches(pool)
        nxt = next(it)
        t0 = None
        for step in range(WARMUP + steps):
            data, y = nxt
            b = sl.decode_jpeg(list(data))
            nxt = next(it)  # the next batch's reads start while the GPU works on this one
            x = aug(b)
            train_step(m, opt, crit, x, y.to(dev, non_blocking=True))
            if step + 1 == WARMUP:
                torch.cuda.synchronize()
                t0 = time.perf_counter()
        torch.cuda.synchronize()
    return steps * batch / (time.perf_counter() - t0)


def main():
    folder = sys.argv[1]
    batch = int(sys.argv[2]) if len(sys.argv) > 2 else 128
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 30
    gpu = torch.cuda.get_device_name()
    ours = streamline_loop(folder, batch, steps)
    print(json.dumps({"case": f"seed003_files_streamline_b{batch}", "gpu": gpu, "images_per_s": round(ours, 1)}),
          flush=True)
    theirs = seed_loop(folder, batch, steps)
    print(json.dumps({"case": f"seed003_files_dataloader_b{batch}", "gpu": gpu, "workers": WORKERS,
                      "images_per_s": round(theirs, 1)}), flush=True)
    print(json.dumps({"case": f"seed003_files_ratio_b{batch}", "ratio": round(ours / theirs, 2)}), flush=True)


if __name__ == "__main__":
    main()
