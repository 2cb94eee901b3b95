"""JPEG files decoded on the GPU into one ragged batch: images of their own sizes one after the
other in one uint8 CUDA tensor, which :class:`streamline.Augment` takes as it is (each crop is
taken from its image, so no image is resized first), so that a training loop can read files
and feed the GPU without a DataLoader decoding on the CPU."""
from . import _native
from ._arrays import _torch, capturing, current_stream, stream_handle


class RaggedBatch:
    """Images of their own sizes in one CUDA tensor.

    ``data``: uint8, every image's ``height x width x 3`` RGB bytes (HWC) one after the other;
    ``extents``: int32, four values an image (the offset's low and high 32 bits, the height,
    the width), as :class:`streamline.Augment` reads them on the device; ``sizes``: each
    image's ``(height, width)``; ``offsets``: where each starts in ``data``."""

    def __init__(self, data, extents, sizes, offsets, on_hardware=0):
        self.data = data
        self.extents = extents
        self.sizes = [tuple(s) for s in sizes]
        self.offsets = list(offsets)
        #: how many images the GPU's hardware JPEG decoders took
        self.on_hardware = on_hardware

    def __len__(self):
        return len(self.sizes)

    @property
    def device(self):
        return self.data.device

    def image(self, i):
        """Image ``i`` as a ``height x width x 3`` view of ``data``."""
        h, w = self.sizes[i]
        o = self.offsets[i]
        return self.data[o:o + h * w * 3].view(h, w, 3)

    def __repr__(self):
        return f"RaggedBatch({len(self)} images on {self.device}, {self.data.numel()} bytes)"


def decode_jpeg(files, device=None, *, stream=None):
    """Decodes JPEG files (a list of ``bytes``, or of uint8 CPU tensors as
    ``torchvision.io.read_file`` gives them) on the GPU with nvJPEG: the GPU's hardware JPEG
    decoders take every image they can, nvJPEG's CUDA decoder the rest. Returns a
    :class:`RaggedBatch` of RGB images on ``device`` (default: the current CUDA device),
    queued on ``stream`` (default: PyTorch's current stream). The host first waits for the work
    already queued on that stream: the hardware decoders write when called, not in stream order,
    and the batch's memory may be a block that queued work still uses. A file nvJPEG cannot
    read raises ``ValueError`` naming its index. Not inside a CUDA graph capture (nvJPEG's host
    calls cannot be captured)."""
    torch = _torch()
    if torch is None:
        raise TypeError("decode_jpeg: needs torch")
    if capturing():
        raise RuntimeError("decode_jpeg: nvJPEG cannot be captured in a CUDA graph; decode before the capture")
    if isinstance(files, (bytes, bytearray)) or len(files) == 0:
        raise ValueError("files: a non-empty list of JPEG files' bytes")
    blobs = []
    for i, f in enumerate(files):
        if isinstance(f, (bytes, bytearray, memoryview)):
            blobs.append(bytes(f))
        elif isinstance(f, torch.Tensor) and f.dtype == torch.uint8 and f.device.type == "cpu":
            blobs.append(f.contiguous().numpy().tobytes())
        else:
            raise TypeError(f"files: item {i} is {type(f).__name__}; needs bytes or a uint8 CPU tensor")
    dev = torch.device("cuda", torch.cuda.current_device()) if device is None else torch.device(device)
    if dev.type != "cuda":
        raise ValueError(f"device: {dev}; decoding runs on a CUDA device")
    index = torch.cuda.current_device() if dev.index is None else dev.index
    sizes, total = _native.jpeg_layout(index, blobs)
    data = torch.empty(max(total, 1), dtype=torch.uint8, device=torch.device("cuda", index))
    handle = current_stream(torch, index) if stream is None else stream_handle(stream, index, [])
    words, on_hw = _native.jpeg_decode_into(index, handle, blobs, data.data_ptr(), data.numel())
    signed = [w - (1 << 32) if w >= 1 << 31 else w for w in words]
    extents = torch.tensor(signed, dtype=torch.int32).to(data.device, non_blocking=False)
    offsets = [(words[4 * i + 1] << 32) | words[4 * i] for i in range(len(sizes))]
    return RaggedBatch(data, extents, sizes, offsets, on_hw)
