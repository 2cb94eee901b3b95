"""Writes a folder of JPEG images for `streamline pipeline augment-train --input DIR`.

Usage: python make_images.py DIR COUNT SIZE

COUNT images of SIZE x SIZE (colour gradients with noise, quality 90) go into ten class
folders `DIR/class0` .. `DIR/class9`, as torchvision's ImageFolder expects. Needs numpy and
Pillow.
"""
import os, sys
import numpy as np
from PIL import Image
out, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(0)
for k in range(n):
    d = os.path.join(out, f"class{k % 10}")
    os.makedirs(d, exist_ok=True)
    y, x = np.mgrid[0:size, 0:size]
    base = np.stack([(x * 255 // size), (y * 255 // size), ((x + y + k) % 256)], -1)
    img = np.clip(base + rng.integers(-40, 40, (size, size, 3)), 0, 255).astype(np.uint8)
    Image.fromarray(img).save(os.path.join(d, f"{k:05d}.jpg"), quality=90)
