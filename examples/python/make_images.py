"""Writes a folder of JPEG images for `streamline pipeline augment-train --input DIR` and for
decoding benchmarks.

Usage: python make_images.py DIR COUNT [SIZE] [--bad N] [--seed S]

COUNT images go into ten class folders `DIR/class0` .. `DIR/class9`, as torchvision's
ImageFolder expects, as JPEG at quality 90 (4:2:0 chroma, as cameras and ImageNet's files
have). Without SIZE their sides spread as ImageNet's do, from 300 to 800 pixels, mostly
landscape; with SIZE every image is SIZE x SIZE. The content is photo-like rather than noise
(which JPEG compresses badly and decoders treat unlike photos): a sky-to-ground gradient, soft
overlapping shapes, smooth texture and a little sensor noise. `--bad N` adds N files that do
not decode (empty, truncated, not a JPEG at all), named `bad*.jpg`, for `--on-bad-image`.
Needs numpy and Pillow.
"""
import argparse
import os

import numpy as np
from PIL import Image


def side_pair(rng):
    """Width and height in 300..800, spread like ImageNet's: about three in four landscape,
    aspect ratios mostly 4:3 and 3:2, the longer side often near 500."""
    long = int(np.clip(rng.normal(500, 90), 300, 800))
    ratio = rng.choice([4 / 3, 3 / 2, 1.0, 16 / 9], p=[0.45, 0.3, 0.15, 0.1])
    short = int(np.clip(long / ratio, 300, 800))
    return (long, short) if rng.random() < 0.75 else (short, long)


def smooth_noise(rng, h, w, cells):
    """Noise in [0, 1] smooth over about `cells` cells per side (bilinear upsampling)."""
    g = rng.random((cells + 2, cells + 2))
    ys, xs = np.linspace(0, cells, h), np.linspace(0, cells, w)
    y0, x0 = ys.astype(int), xs.astype(int)
    fy, fx = (ys - y0)[:, None], (xs - x0)[None, :]
    a, b = g[y0][:, x0], g[y0][:, x0 + 1]
    c, d = g[y0 + 1][:, x0], g[y0 + 1][:, x0 + 1]
    return (a * (1 - fx) + b * fx) * (1 - fy) + (c * (1 - fx) + d * fx) * fy


def photo(rng, w, h):
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    sky, ground = rng.uniform(60, 230, 3), rng.uniform(20, 160, 3)
    horizon = rng.uniform(0.3, 0.7) * h
    t = np.clip((y - horizon) / (0.15 * h) + 0.5, 0, 1)[..., None]
    img = sky * (1 - t) + ground * t
    for _ in range(rng.integers(3, 9)):  # soft-edged shapes: the scene's objects
        cx, cy = rng.uniform(0, w), rng.uniform(0, h)
        rx, ry = rng.uniform(0.05, 0.3) * w, rng.uniform(0.05, 0.3) * h
        r = ((x - cx) / rx) ** 2 + ((y - cy) / ry) ** 2
        alpha = np.clip((1.2 - r) * 4, 0, 1)[..., None] * rng.uniform(0.6, 1.0)
        img = img * (1 - alpha) + rng.uniform(0, 255, 3) * alpha
    # Texture at two scales, as foliage, fabric or gravel have.
    texture = (0.6 * smooth_noise(rng, h, w, int(rng.integers(6, 24)))
               + 0.4 * smooth_noise(rng, h, w, int(rng.integers(60, 140))) - 0.5)
    img = img * (1 + 0.35 * texture[..., None])
    img += rng.normal(0, 3, img.shape)  # sensor noise
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dir")
    p.add_argument("count", type=int)
    p.add_argument("size", type=int, nargs="?", help="every image SIZE x SIZE (default: 300 to 800 a side)")
    p.add_argument("--bad", type=int, default=0, help="files that do not decode, added")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    if a.count < 1 or (a.size is not None and not 8 <= a.size <= 8192) or a.bad < 0:
        p.error("COUNT must be at least 1, SIZE in 8..8192 and --bad at least 0")
    rng = np.random.default_rng(a.seed)
    for k in range(a.count):
        d = os.path.join(a.dir, f"class{k % 10}")
        os.makedirs(d, exist_ok=True)
        w, h = (a.size, a.size) if a.size else side_pair(rng)
        photo(rng, w, h).save(os.path.join(d, f"{k:05d}.jpg"), quality=90, subsampling="4:2:0")
    good = os.path.join(a.dir, "class0", "00000.jpg")
    for k in range(a.bad):
        d = os.path.join(a.dir, f"class{k % 10}")
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, f"bad{k:03d}.jpg")
        kind = k % 3
        with open(path, "wb") as f:
            if kind == 1:  # a JPEG cut off in the middle
                f.write(open(good, "rb").read()[:200])
            elif kind == 2:  # not a JPEG at all
                f.write(b"this is not an image\n")
            # kind 0: empty
    print(f"wrote {a.count} images and {a.bad} bad files to {a.dir}")


if __name__ == "__main__":
    main()
