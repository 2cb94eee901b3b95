"""``roi_align``'s boxes, as torchvision takes them: a ``(K, 5)`` tensor of ``[batch_index, x1,
y1, x2, y2]`` or a list of ``(L, 4)`` tensors, one per image, on the host or on the GPU."""
from . import _arrays
from ._arrays import _host_values, array


def host_rows(boxes):
    """The boxes as rows of five floats, read on the host."""
    if isinstance(boxes, (list, tuple)) and boxes and hasattr(boxes[0], "tolist"):
        out = []
        for i, b in enumerate(boxes):
            for row in _host_values(b, "boxes"):
                if len(row) != 4:
                    raise ValueError(f"boxes: image {i}'s boxes need 4 values each, got {len(row)}")
                out.append([float(i)] + [float(v) for v in row])
        return out
    rows = list(_host_values(boxes, "boxes"))
    out = []
    for r in rows:
        r = list(r)
        if len(r) != 5:
            raise ValueError(f"boxes: needs [batch_index, x1, y1, x2, y2] per box, got {len(r)} values")
        out.append([float(v) for v in r])
    return out


def one_tensor(boxes):
    """A list of ``(L, 4)`` tensors on one device as one ``(K, 5)`` tensor there, with the batch
    indices; anything else unchanged (a list across devices is read on the host)."""
    torch = _arrays._torch()
    if torch is not None and isinstance(boxes, (list, tuple)) and boxes and all(
            isinstance(b, torch.Tensor) and b.device == boxes[0].device for b in boxes):
        for i, b in enumerate(boxes):
            if b.dim() != 2 or b.shape[1] != 4:
                raise ValueError(f"boxes: image {i}'s boxes have shape {tuple(b.shape)}; need (L, 4)")
        return torch.cat([torch.cat([torch.full_like(b[:, :1], i), b], 1) for i, b in enumerate(boxes)])
    return boxes


def _on_device(boxes, dev):
    """CUDA tensor boxes as one contiguous ``(K, 5)`` float32 tensor on ``dev``; ``None`` for
    boxes on the host."""
    torch = _arrays._torch()
    if torch is None:
        return None
    b = one_tensor(boxes)
    if not (isinstance(b, torch.Tensor) and b.is_cuda):
        return None
    if b.dim() != 2 or b.shape[1] != 5:
        raise ValueError(f"boxes: has shape {tuple(b.shape)}; needs (K, 5): [batch_index, x1, y1, x2, y2]")
    if b.get_device() != dev:
        raise ValueError(f"boxes: are on cuda:{b.get_device()}; the input is on cuda:{dev}")
    if b.shape[0] == 0:
        raise ValueError("boxes: needs at least one box")
    return b.to(torch.float32).contiguous()


def roi_boxes(boxes, dev, as_native):
    """The boxes as the native call takes them (host rows, or ``as_native`` of the device
    tensor, read by the kernel with no copy and no wait), and ``keep(stream, handle)``, which
    records a tensor made here on an explicit ``stream`` that reads it, so that its memory is not
    handed out again before that read (``None`` when nothing was made)."""
    on_device = _on_device(boxes, dev)
    if on_device is None:
        return host_rows(boxes), None
    b = array(on_device, "boxes", ("float32",), (2,))

    def keep(stream, s):
        if on_device is not boxes and stream is not None:
            torch = _arrays._torch()
            on_device.record_stream(torch.cuda.ExternalStream(s, device=dev))

    return as_native(b), keep
