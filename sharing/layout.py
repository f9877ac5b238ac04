"""Describing a batch (nested tuples/lists/dicts of tensors) by the shared-memory storages
that hold its tensors, and rebuilding it from those storages as zero-copy views.

A layout is JSON: ``{"t": "tensor", "dtype", "shape", "storage", "offset"}`` (``storage``
indexes the descriptors sent with the message, ``offset`` is in bytes),
``{"t": "tuple" | "list", "items": [...]}``, ``{"t": "dict", "items": [[key, layout], ...]}``
or ``{"t": "value", "v": json}`` for plain numbers, strings, booleans and None.
"""

from __future__ import annotations

import math
import mmap
import os
from typing import Any

import numpy as np
import torch

from sharing.errors import ProtocolError

__all__ = ["MAX_STORAGES", "describe", "first_dim", "map_storages", "rebuild"]

MAX_STORAGES = 250  # descriptors per message (the kernel allows 253)

_DTYPES = {
    str(dtype).removeprefix("torch."): dtype
    for dtype in (
        torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32,
        torch.int16, torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128,
    )
}  # fmt: skip


def _as_tensor(value: Any) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value)
    return None


def first_dim(batch: Any) -> int | None:
    """Length of dimension 0 of the batch's first tensor (its batch size), if any."""
    tensor = _as_tensor(batch)
    if tensor is not None:
        return int(tensor.shape[0]) if tensor.dim() else None
    if isinstance(batch, (dict, tuple, list)):
        for value in batch.values() if isinstance(batch, dict) else batch:
            size = first_dim(value)
            if size is not None:
                return size
    return None


class _Storages:
    """Distinct shared-memory storages of one batch, in order of first use."""

    def __init__(self) -> None:
        self.fds: list[int] = []
        self.keep: list[torch.Tensor] = []
        self._index: dict[int, int] = {}

    def index_of(self, tensor: torch.Tensor) -> int:
        storage = tensor.untyped_storage()
        key = storage.data_ptr()
        if key not in self._index:
            # A DataLoader worker's batch is already in shared memory: this only reads its
            # descriptor. Anything else is moved there (one copy).
            fd, _ = storage._share_fd_cpu_()
            self._index[key] = len(self.fds)
            self.fds.append(fd)
            self.keep.append(tensor)
        return self._index[key]


def describe(batch: Any) -> tuple[dict, list[int], list[torch.Tensor]]:
    """(layout, descriptors of its storages, tensors to keep alive while consumers read).

    Raises:
        TypeError: A leaf cannot be shared (not a CPU tensor/array or JSON scalar), a dict key
            is not a string, or the batch has more than `MAX_STORAGES` storages.
    """
    storages = _Storages()
    layout = _describe(batch, storages)
    if len(storages.fds) > MAX_STORAGES:
        raise TypeError(f"a batch may use at most {MAX_STORAGES} tensor storages")
    return layout, storages.fds, storages.keep


def _describe(batch: Any, storages: _Storages) -> dict:
    tensor = _as_tensor(batch)
    if tensor is not None:
        name = str(tensor.dtype).removeprefix("torch.")
        if name not in _DTYPES or tensor.device.type != "cpu":
            raise TypeError(f"cannot share a {tensor.dtype} tensor on {tensor.device}")
        if not tensor.is_contiguous():
            tensor = tensor.contiguous()
        return {
            "t": "tensor",
            "dtype": name,
            "shape": list(tensor.shape),
            "storage": storages.index_of(tensor),
            "offset": tensor.storage_offset() * tensor.element_size(),
        }
    if isinstance(batch, dict):
        items = []
        for key, value in batch.items():
            if not isinstance(key, str):
                raise TypeError(f"batch dict keys must be strings, got {key!r}")
            items.append([key, _describe(value, storages)])
        return {"t": "dict", "items": items}
    if isinstance(batch, (tuple, list)):
        return {"t": type(batch).__name__, "items": [_describe(v, storages) for v in batch]}
    if batch is None or isinstance(batch, (bool, int, float, str)):
        return {"t": "value", "v": batch}
    raise TypeError(
        f"cannot share a batch leaf of type {type(batch).__name__}; use tensors, numpy "
        "arrays, numbers, strings, or tuples/lists/dicts of them"
    )


def map_storages(fds: list[int]) -> list[mmap.mmap | None]:
    """Map each received descriptor copy-on-write (None for an empty one) and close it."""
    maps: list[mmap.mmap | None] = []
    try:
        for fd in fds:
            size = os.fstat(fd).st_size
            maps.append(mmap.mmap(fd, size, access=mmap.ACCESS_COPY) if size else None)
    finally:
        for fd in fds:
            os.close(fd)
    return maps


def rebuild(layout: Any, maps: list[mmap.mmap | None]) -> Any:
    """Rebuild a batch from ``layout`` as views of the mapped storages (no copy).

    Raises:
        ProtocolError: The layout is malformed or points outside its storage.
    """
    if not isinstance(layout, dict):
        raise ProtocolError(f"bad layout node {layout!r}")
    kind = layout.get("t")
    if kind == "tensor":
        return _rebuild_tensor(layout, maps)
    items = layout.get("items")
    if kind in ("tuple", "list") and isinstance(items, list):
        values = [rebuild(item, maps) for item in items]
        return tuple(values) if kind == "tuple" else values
    if kind == "dict" and isinstance(items, list):
        if not all(isinstance(i, list) and len(i) == 2 and isinstance(i[0], str) for i in items):
            raise ProtocolError(f"bad dict layout {layout!r}")
        return {key: rebuild(item, maps) for key, item in items}
    if kind == "value":
        return layout.get("v")
    raise ProtocolError(f"bad layout node {layout!r}")


def _rebuild_tensor(layout: dict, maps: list[mmap.mmap | None]) -> torch.Tensor:
    dtype = _DTYPES.get(layout.get("dtype"))
    shape, index, offset = layout.get("shape"), layout.get("storage"), layout.get("offset")
    if (
        dtype is None
        or not isinstance(shape, list)
        or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape)
        or not isinstance(index, int)
        or not 0 <= index < len(maps)
        or not isinstance(offset, int)
        or offset < 0
    ):
        raise ProtocolError(f"bad tensor layout {layout!r}")
    count = math.prod(shape)
    if count == 0:
        return torch.empty(shape, dtype=dtype)
    buffer = maps[index]
    nbytes = count * torch.empty((), dtype=dtype).element_size()
    if buffer is None or offset + nbytes > len(buffer):
        raise ProtocolError(f"tensor layout {layout!r} reaches outside its storage")
    flat = torch.frombuffer(buffer, dtype=dtype, count=count, offset=offset)
    return flat.view(shape)
