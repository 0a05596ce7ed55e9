"""The torch device a computation runs on (extraction, fitting model-level detectors, training)."""

from __future__ import annotations

import torch

from semshift.errors import InputError

__all__ = ["resolve_device"]


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """``"auto"`` -> CUDA when available, else CPU; anything else as given.

    Raises
    ------
    InputError
        CUDA was asked for but is not available, or the name is not a device.
    """
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except RuntimeError as err:
        raise InputError(f"device {device!r}: {err}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InputError(f"device {device!r} asked for, but CUDA is not available here")
    return dev
