"""Transform classes in the style of ``torchvision.transforms.v2``."""
import random

from . import _native
from . import functional as F


class Augment:
    """Seed 003's batch transform as one fused kernel: a uint8 batch in, float32 out, with a
    random crop, angle and blur sigma per image.

    ``T.Compose([T.ToDtype(torch.float32), BatchRandomCrop(size // 2), T.Resize(size),
    BatchRandomRotation(45), T.GaussianBlur(7), T.Normalize(mean, std)])`` becomes
    ``Augment(size)``; see :func:`streamline.functional.augment` for the arguments.

    The random values are drawn on the GPU from a counter-based generator (Philox4x32-10)
    whose seed and count of draws live in device memory: every call draws the next batch's
    values, and so does every replay of a CUDA graph that captured a call (``torch.cuda.graph``,
    ``torch.compile(mode="reduce-overhead")``). The same ``seed`` gives the same sequence of
    batches, eager or replayed. :meth:`device_draw` computes the ``k``-th call's values on the
    host. ``draw_on="host"`` draws on the host from ``seed`` instead (a captured call then
    replays its one draw), and keeps each call's draw in ``last_draw``.
    """

    def __init__(self, size, crop=None, degrees=45.0, interpolation="nearest", kernel_size=7, sigma=(0.1, 2.0),
                 scale=False, mean=None, std=None, layout="NCHW", output_layout="NCHW", seed=None,
                 per_image_sigma=True, draw_on="device"):
        if draw_on not in ("device", "host"):
            raise ValueError(f"draw_on: {draw_on!r}; allowed: 'device', 'host'")
        self.kwargs = dict(size=size, crop=crop, degrees=degrees, interpolation=interpolation,
                           kernel_size=kernel_size, sigma=sigma, scale=scale, mean=mean, std=std,
                           layout=layout, output_layout=output_layout, per_image_sigma=per_image_sigma)
        self.draw_on = draw_on
        #: the generator's seed
        self.seed = (random.getrandbits(64) if seed is None else int(seed)) & (2**64 - 1)
        self._rng = random.Random(self.seed)
        self._device_rngs = {}
        #: the draw ``(boxes, angles, sigmas)`` of the last call (host draws only)
        self.last_draw = None

    def _device_rng(self, device):
        rng = self._device_rngs.get(device)
        if rng is None:
            rng = self._device_rngs[device] = _native.AugmentRng(int(device), self.seed)
        return rng

    def __call__(self, inpt, *, out=None, stream=None):
        if self.draw_on == "device":
            return F.augment(inpt, out=out, stream=stream, _rng=self._device_rng, **self.kwargs)
        y, self.last_draw = F.augment(inpt, seed=self._rng.getrandbits(64), out=out, stream=stream,
                                      return_draw=True, **self.kwargs)
        return y

    forward = __call__

    def draws(self, device=0, stream=None):
        """How many draws the generator on ``device`` has made, once the work queued on
        ``stream`` (PyTorch's current stream) has finished; the host waits."""
        rng = self._device_rngs.get(int(device))
        if rng is None:
            return 0
        from ._kernels import _stream

        return rng.draws(_stream(stream, int(device)))

    def device_draw(self, k, shape):
        """The draw ``(boxes, angles, sigmas)`` that the ``k``-th call (from 0) on a batch of
        ``shape`` (the input's shape in its layout) makes on the device, computed on the host."""
        shape = tuple(int(v) for v in shape)
        if len(shape) != 4:
            raise ValueError(f"shape: {shape}; needs the batch's four dimensions")
        n, h, w = (shape[0], shape[2], shape[3]) if str(self.kwargs["layout"]).upper() == "NCHW" else shape[:3]
        a = self.kwargs
        size = int(a["size"])
        crop = size // 2 if a["crop"] is None else int(a["crop"])
        lo, hi = F._pair(a["sigma"], "sigma")
        return _native.augment_device_draw_at((n, h, w), crop, size, float(a["degrees"]), (float(lo), float(hi)),
                                              self.seed, int(k), bool(a["per_image_sigma"]))

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items())
        return f"Augment({args}, seed={self.seed}, draw_on={self.draw_on!r})"
