"""Transform classes in the style of ``torchvision.transforms.v2``."""
import random

from . import _native
from . import functional as F
from ._arrays import _torch, capturing


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
        #: device ordinal -> the generator's state there: a CUDA int32 tensor of four values
        #: (the seed, low word first, then the draws made, low word first)
        self.states = {}
        #: the draw ``(boxes, angles, sigmas)`` of the last call (host draws only)
        self.last_draw = None
        torch = _torch()
        if draw_on == "device" and torch is not None and torch.cuda.is_available():
            self._state(torch.cuda.current_device(), None)

    def _state(self, device, stream):
        """The generator's state on ``device``, made on first use: by torch, or while a CUDA
        graph is being captured by Streamline, in memory made outside the capture (a tensor
        made by torch there would be initialised by the graph, at every replay)."""
        state = self.states.get(device)
        if state is None:
            torch = _torch()
            words = [self.seed & 0xFFFFFFFF, self.seed >> 32, 0, 0]
            if capturing():
                from ._kernels import _stream

                rng = _native.AugmentRng(int(device), _stream(stream, int(device)), self.seed)
                state = torch.as_tensor(rng, device=torch.device("cuda", device))
            else:
                signed = [w - (1 << 32) if w >= 1 << 31 else w for w in words]
                state = torch.tensor(signed, dtype=torch.int32, device=torch.device("cuda", device))
            # Under torch.compile(mode="reduce-overhead") a tensor the graph mutates must keep its
            # address for the graph's replays to run (as torch's compiled optimizers mark their
            # state).
            torch._dynamo.mark_static_address(state)
            self.states[device] = state
        return state

    def __call__(self, inpt, *, out=None, stream=None):
        from .ragged import RaggedBatch

        if isinstance(inpt, RaggedBatch):
            if self.draw_on != "device":
                raise ValueError("inpt: a ragged batch is drawn on the device; make the Augment with draw_on='device'")
            dev = inpt.data.get_device()
            kw = {k: v for k, v in self.kwargs.items() if k != "layout"}
            return F.augment_ragged(inpt, out=out, stream=stream, _state=self._state(dev, stream), **kw)
        if self.draw_on == "device":
            torch = _torch()
            if torch is None or not isinstance(inpt, torch.Tensor):
                raise TypeError("inpt: draws on the device need a torch CUDA tensor; pass draw_on='host' otherwise")
            dev = inpt.get_device()
            if dev < 0:
                raise TypeError(f"inpt: must be a CUDA tensor, got a tensor on {inpt.device}")
            return F.augment(inpt, out=out, stream=stream, _state=self._state(dev, stream), **self.kwargs)
        y, self.last_draw = F.augment(inpt, seed=self._rng.getrandbits(64), out=out, stream=stream,
                                      return_draw=True, **self.kwargs)
        return y

    forward = __call__

    def draws(self, device=0, stream=None):
        """How many draws the generator on ``device`` has made, once the work queued on
        ``stream`` (PyTorch's current stream) has finished; the host waits."""
        state = self.states.get(int(device))
        if state is None:
            return 0
        torch = _torch()
        if stream is not None:
            stream.synchronize() if hasattr(stream, "synchronize") else torch.cuda.synchronize(int(device))
        lo, hi = (v & 0xFFFFFFFF for v in state.tolist()[2:])
        return lo | hi << 32

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
