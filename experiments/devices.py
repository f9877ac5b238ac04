"""Device choice and moving batches to a device, the same code for CPU and CUDA."""

from __future__ import annotations

from typing import Any

import torch

from run_contract.identity import DEVICES

__all__ = ["DEVICES", "describe", "pin", "resolve_device", "to_device"]


def resolve_device(name: str) -> torch.device:
    """The torch device for ``name``.

    Args:
        name: ``"auto"`` (CUDA when available, else CPU), ``"cpu"`` or ``"cuda"``.

    Raises:
        ValueError: ``name`` is not one of `DEVICES`.
        RuntimeError: ``"cuda"`` was asked for and no CUDA device is available.
    """
    if name not in DEVICES:
        raise ValueError(f"device={name!r} is not valid; use one of {', '.join(DEVICES)}")
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device='cuda' but torch sees no CUDA device; use --device cpu or auto")
    return torch.device(name)


def describe(device: torch.device) -> str:
    """``"cpu"`` or ``"cuda (<device name>)"``, as written in run records."""
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    return device.type


def to_device(batch: Any, device: torch.device) -> Any:
    """``batch`` with every tensor inside it (nested tuples, lists, dicts) moved to ``device``;
    non-blocking when the tensor is in pinned memory."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=batch.is_pinned())
    if isinstance(batch, dict):
        return {key: to_device(value, device) for key, value in batch.items()}
    if isinstance(batch, (list, tuple)):
        moved = [to_device(value, device) for value in batch]
        return type(batch)(*moved) if hasattr(batch, "_fields") else type(batch)(moved)
    return batch


def pin(batch: Any) -> Any:
    """``batch`` with every tensor inside it (nested tuples, lists, dicts) in pinned memory, so
    that copies to a CUDA device can be asynchronous."""
    if isinstance(batch, torch.Tensor):
        return batch.pin_memory()
    if isinstance(batch, dict):
        return {key: pin(value) for key, value in batch.items()}
    if isinstance(batch, (list, tuple)):
        pinned = [pin(value) for value in batch]
        return type(batch)(*pinned) if hasattr(batch, "_fields") else type(batch)(pinned)
    return batch
