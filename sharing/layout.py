"""Placing a batch (nested tuples/lists/dicts of tensors) in a shared-memory slot, and
rebuilding it there as zero-copy tensor views.

A layout is JSON: ``{"t": "tensor", "dtype", "shape", "offset"}``, ``{"t": "tuple" | "list",
"items": [...]}``, ``{"t": "dict", "items": [[key, layout], ...]}`` or ``{"t": "value", "v":
json}`` for plain numbers, strings, booleans and None.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import torch

from sharing.errors import ProtocolError

__all__ = ["ALIGN", "batch_nbytes", "first_dim", "pack", "unpack"]

ALIGN = 64

_DTYPES = {
    str(dtype).removeprefix("torch."): dtype
    for dtype in (
        torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32,
        torch.int16, torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128,
    )
}  # fmt: skip


def _aligned(size: int) -> int:
    return -(-size // ALIGN) * ALIGN


def _as_tensor(value: Any) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value)
    return None


def batch_nbytes(batch: Any) -> int:
    """Bytes the batch's tensors take in a slot, alignment included."""
    tensor = _as_tensor(batch)
    if tensor is not None:
        return _aligned(tensor.numel() * tensor.element_size())
    if isinstance(batch, dict):
        return sum(batch_nbytes(v) for v in batch.values())
    if isinstance(batch, (tuple, list)):
        return sum(batch_nbytes(v) for v in batch)
    return 0


def first_dim(batch: Any) -> int | None:
    """Length of dimension 0 of the batch's first tensor (its batch size), if any."""
    tensor = _as_tensor(batch)
    if tensor is not None:
        return int(tensor.shape[0]) if tensor.dim() else None
    values = batch.values() if isinstance(batch, dict) else batch
    if isinstance(batch, (dict, tuple, list)):
        for value in values:
            size = first_dim(value)
            if size is not None:
                return size
    return None


def pack(batch: Any, buffer: Any, offset: int) -> tuple[dict, int]:
    """Copy the tensors of ``batch`` into ``buffer`` from ``offset``; return (layout, end).

    Raises:
        TypeError: A leaf is neither a tensor/array nor a JSON scalar, or a dict key is not
            a string.
    """
    tensor = _as_tensor(batch)
    if tensor is not None:
        name = str(tensor.dtype).removeprefix("torch.")
        if name not in _DTYPES:
            raise TypeError(f"tensor dtype {tensor.dtype} cannot be shared")
        nbytes = tensor.numel() * tensor.element_size()
        if nbytes:
            target = torch.frombuffer(
                buffer, dtype=tensor.dtype, count=tensor.numel(), offset=offset
            )
            target.view(tensor.shape).copy_(tensor)
        layout = {"t": "tensor", "dtype": name, "shape": list(tensor.shape), "offset": offset}
        return layout, offset + _aligned(nbytes)
    if isinstance(batch, dict):
        items = []
        for key, value in batch.items():
            if not isinstance(key, str):
                raise TypeError(f"batch dict keys must be strings, got {key!r}")
            layout, offset = pack(value, buffer, offset)
            items.append([key, layout])
        return {"t": "dict", "items": items}, offset
    if isinstance(batch, (tuple, list)):
        items = []
        for value in batch:
            layout, offset = pack(value, buffer, offset)
            items.append(layout)
        return {"t": type(batch).__name__, "items": items}, offset
    if batch is None or isinstance(batch, (bool, int, float, str)):
        return {"t": "value", "v": batch}, offset
    raise TypeError(
        f"cannot share a batch leaf of type {type(batch).__name__}; use tensors, numpy "
        "arrays, numbers, strings, or tuples/lists/dicts of them"
    )


def unpack(layout: Any, buffer: Any, low: int, high: int) -> Any:
    """Rebuild a batch from ``layout`` as views into ``buffer`` (no copy).

    Args:
        layout: A layout made by `pack`, received as JSON.
        buffer: The mapped shared memory.
        low: Start of the batch's slot in ``buffer``.
        high: End of the slot: every tensor must lie in ``[low, high)``.

    Raises:
        ProtocolError: The layout is malformed or points outside the slot.
    """
    if not isinstance(layout, dict):
        raise ProtocolError(f"bad layout node {layout!r}")
    kind = layout.get("t")
    if kind == "tensor":
        dtype = _DTYPES.get(layout.get("dtype"))
        shape, offset = layout.get("shape"), layout.get("offset")
        if (
            dtype is None
            or not isinstance(shape, list)
            or not all(isinstance(s, int) and s >= 0 for s in shape)
            or not isinstance(offset, int)
        ):
            raise ProtocolError(f"bad tensor layout {layout!r}")
        count = math.prod(shape)
        nbytes = count * torch.empty((), dtype=dtype).element_size()
        if offset < low or offset + nbytes > high:
            raise ProtocolError(f"tensor layout {layout!r} reaches outside its slot")
        if count == 0:
            return torch.empty(shape, dtype=dtype)
        with warnings.catch_warnings():  # the mapping is read-only on purpose
            warnings.simplefilter("ignore", UserWarning)
            flat = torch.frombuffer(buffer, dtype=dtype, count=count, offset=offset)
        return flat.view(shape)
    items = layout.get("items")
    if kind in ("tuple", "list") and isinstance(items, list):
        values = [unpack(item, buffer, low, high) for item in items]
        return tuple(values) if kind == "tuple" else values
    if kind == "dict" and isinstance(items, list):
        if not all(isinstance(i, list) and len(i) == 2 and isinstance(i[0], str) for i in items):
            raise ProtocolError(f"bad dict layout {layout!r}")
        return {key: unpack(item, buffer, low, high) for key, item in items}
    if kind == "value":
        return layout.get("v")
    raise ProtocolError(f"bad layout node {layout!r}")
