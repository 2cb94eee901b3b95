"""Streamline from Python: Streamline's GPU kernels (written in Rust) on PyTorch tensors and
streams.

    import streamline as sl
    aug = sl.transforms.Augment(256)          # seed 003's whole transform, one kernel
    x = aug(batch_uint8)                      # on torch's current stream, no sync

Importing needs no GPU; calling a GPU function without one raises :class:`NoGpuError`.
"""
import importlib.util

from . import _ops, functional, ragged, transforms
from ._kernels import KernelModule, load_module
from ._native import NoGpuError
from .functional import (augment, gaussian_blur, heavy, matmul, normalize, resize, roi_align, roi_align_backward, rotate, sgemm,
                         to_float)
from .ragged import RaggedBatch, decode_jpeg
from .transforms import Augment

__all__ = [
    "Augment", "KernelModule", "NoGpuError", "RaggedBatch", "augment", "decode_jpeg", "device_info", "functional",
    "gaussian_blur",
    "gpu_available", "heavy", "load_module", "matmul", "normalize", "resize", "roi_align", "roi_align_backward",
    "ragged", "rotate", "sgemm", "to_float", "transforms",
]


def gpu_available():
    """``None`` when a CUDA device can be used, else the reason it cannot (nothing is
    initialised)."""
    from ._native import gpu_status

    return gpu_status()


def device_info(device=0):
    """``(name, (major, minor), multiprocessors)`` of a device; loads the kernels on it."""
    from ._native import device_info as info

    return info(int(device))


def _register_operators():
    """``torch.ops.streamline.*``, where torch is installed (see ``streamline._ops``)."""
    if importlib.util.find_spec("torch") is None:
        return
    import torch

    _ops.register(torch)


_register_operators()
