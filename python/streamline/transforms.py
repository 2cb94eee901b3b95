"""Transform classes in the style of ``torchvision.transforms.v2``."""
import random

from . import functional as F


class Augment:
    """Seed 003's batch transform as one fused kernel: a uint8 batch in, float32 out, with a
    random crop, angle and blur sigma drawn per image from a seeded generator.

    ``T.Compose([T.ToDtype(torch.float32), BatchRandomCrop(size // 2), T.Resize(size),
    BatchRandomRotation(45), T.GaussianBlur(7), T.Normalize(mean, std)])`` becomes
    ``Augment(size)``; see :func:`streamline.functional.augment` for the arguments. Each call
    draws a new seed from ``seed`` (the same sequence of batches gives the same outputs).
    """

    def __init__(self, size, crop=None, degrees=45.0, interpolation="nearest", kernel_size=7, sigma=(0.1, 2.0),
                 scale=False, mean=None, std=None, layout="NCHW", output_layout="NCHW", seed=None,
                 per_image_sigma=True):
        self.kwargs = dict(size=size, crop=crop, degrees=degrees, interpolation=interpolation,
                           kernel_size=kernel_size, sigma=sigma, scale=scale, mean=mean, std=std,
                           layout=layout, output_layout=output_layout, per_image_sigma=per_image_sigma)
        self._rng = random.Random(seed)
        #: the draw ``(boxes, angles, sigmas)`` of the last call
        self.last_draw = None

    def __call__(self, inpt, *, out=None, stream=None):
        y, self.last_draw = F.augment(inpt, seed=self._rng.getrandbits(64), out=out, stream=stream,
                                      return_draw=True, **self.kwargs)
        return y

    forward = __call__

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items())
        return f"Augment({args})"
