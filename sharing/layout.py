"""Describing a batch (nested tuples/lists/dicts of tensors) by the shared-memory storages
that hold its tensors, and rebuilding it from those storages as zero-copy views.

A layout is JSON: ``{"t": "tensor", "dtype", "shape", "storage", "offset"}`` (``storage``
indexes the descriptors sent with the message, -1 for an empty tensor; ``offset`` is in
bytes),
``{"t": "cuda_tensor", "dtype", "shape", "offset", "ipc": {...}}`` (a CUDA IPC reference,
made for each send by `sharing.cuda_share.for_send`; ``offset`` in elements),
``{"t": "tuple" | "list", "items": [...]}``,
``{"t": "dict", "items": [[key, layout], ...]}`` or ``{"t": "value", "v": json}`` for plain
numbers, strings, booleans and None. A layout travels in one control message, so `describe`
refuses one that would not fit (`MAX_LAYOUT_BYTES`): each CUDA tensor takes up to about 520
bytes of it (its IPC handles), so a batch holds at most about 125.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import math
import mmap
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from sharing.cuda_share import IPC_BOUND, for_send
from sharing.errors import ProtocolError
from sharing.protocol import MAX_MESSAGE_BYTES

__all__ = [
    "MAX_LAYOUT_BYTES",
    "MAX_STORAGES",
    "describe",
    "first_dim",
    "map_storages",
    "map_tensors",
    "nbytes",
    "rebuild",
]

MAX_STORAGES = 250  # descriptors per message (the kernel allows 253)
MAX_LAYOUT_BYTES = MAX_MESSAGE_BYTES - 256
"""Bytes of a layout's JSON: a batch message's other fields (numbers) take the rest."""

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


def map_tensors(batch: Any, fn: Callable[[torch.Tensor], Any]) -> Any:
    """``batch`` with ``fn`` applied to every tensor and numpy array in it, whatever its
    dimension: so ``device="cuda"`` (`sharing.Producer`) puts all of a batch on the GPU,
    0-dim tensors and arrays too, never part of it.

    Args:
        batch (Any): Tensors, numpy arrays and other values, nested in tuples, lists and dicts.
        fn (Callable[[torch.Tensor], Any]): Applied to each tensor; a numpy array is passed as
            the tensor that shares its memory (``torch.from_numpy``).

    Returns:
        Any: ``batch``'s structure with ``fn``'s results in place of its tensors and arrays;
        other values as they were.
    """
    tensor = _as_tensor(batch)
    if tensor is not None:
        return fn(tensor)
    if isinstance(batch, dict):
        return {key: map_tensors(value, fn) for key, value in batch.items()}
    if isinstance(batch, (tuple, list)):
        return type(batch)(map_tensors(value, fn) for value in batch)
    return batch


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


def nbytes(batch: Any) -> int:
    """Bytes of the tensors and arrays in ``batch``."""
    if isinstance(batch, torch.Tensor):
        return batch.numel() * batch.element_size()
    if hasattr(batch, "nbytes") and not isinstance(batch, (str, bytes)):
        return int(batch.nbytes)
    if isinstance(batch, dict):
        return sum(nbytes(v) for v in batch.values())
    if isinstance(batch, (tuple, list)):
        return sum(nbytes(v) for v in batch)
    return 0


class _Storages:
    """Distinct shared-memory storages of one batch, in order of first use."""

    def __init__(self) -> None:
        self.fds: list[int] = []
        self.keep: list[torch.Tensor] = []
        self._index: dict[int, int] = {}

    def index_of(self, tensor: torch.Tensor) -> int:
        # A DataLoader worker's batch is already in shared memory: this only reads its
        # descriptor. Anything else is moved there once (a copy); a storage shared by several
        # tensors has one descriptor, so it is sent once.
        fd, _ = tensor.untyped_storage()._share_fd_cpu_()
        if fd not in self._index:
            self._index[fd] = len(self.fds)
            self.fds.append(fd)
            self.keep.append(tensor)
        return self._index[fd]


def describe(batch: Any) -> tuple[dict, list[int], list[torch.Tensor]]:
    """(layout, descriptors of its storages, tensors to keep alive while consumers read).

    A CUDA tensor's ``ipc`` is its index in the kept tensors until `sharing.cuda_share.for_send`
    makes a reference to it for one send.

    Raises:
        TypeError: A leaf cannot be shared (not a CPU or CUDA tensor/array or JSON scalar), a
            dict key is not a string, the batch has more than `MAX_STORAGES` storages, or its
            layout, once shared, more than `MAX_LAYOUT_BYTES` (e.g. over about 125 CUDA
            tensors).
    """
    storages = _Storages()
    layout = _describe(batch, storages)
    if len(storages.fds) > MAX_STORAGES:
        raise TypeError(f"a batch may use at most {MAX_STORAGES} tensor storages")
    sent, _ = for_send(layout, storages.keep, lambda tensor: IPC_BOUND)
    size = len(json.dumps(sent, separators=(",", ":")))
    if size > MAX_LAYOUT_BYTES:
        raise TypeError(
            f"a batch's layout may take at most {MAX_LAYOUT_BYTES} bytes (one control message), "
            f"this one takes {size}: share fewer, larger tensors (e.g. stacked)"
        )
    return layout, storages.fds, storages.keep


def _describe(batch: Any, storages: _Storages) -> dict:
    tensor = _as_tensor(batch)
    if tensor is not None:
        name = str(tensor.dtype).removeprefix("torch.")
        if (
            name not in _DTYPES
            or tensor.layout != torch.strided
            or tensor.device.type not in ("cpu", "cuda")
        ):
            raise TypeError(
                f"cannot share a {tensor.layout} {tensor.dtype} tensor on {tensor.device}"
            )
        if not tensor.is_contiguous():
            tensor = tensor.contiguous()
        if tensor.device.type == "cuda":  # shared anew at each send (`sharing.cuda_share`)
            storages.keep.append(tensor)
            return {
                "t": "cuda_tensor",
                "dtype": name,
                "shape": list(tensor.shape),
                "offset": tensor.storage_offset(),
                "ipc": len(storages.keep) - 1,
            }
        return {
            "t": "tensor",
            "dtype": name,
            "shape": list(tensor.shape),
            "storage": storages.index_of(tensor) if tensor.numel() else -1,
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


def _unb64(text: object, name: str) -> bytes | None:
    if text is None:
        return None
    if isinstance(text, str):
        with contextlib.suppress(binascii.Error):
            return base64.b64decode(text, validate=True)
    raise ProtocolError(f"bad CUDA IPC field {name!r}: {text!r:.80}")


_IPC_COUNTS = ("device", "size", "storage_offset", "ref_counter_offset")  # integers >= 0
_IPC_HANDLES = ("handle", "ref_counter_handle", "event_handle")  # base64 or None


def _rebuild_cuda_tensor(layout: dict) -> torch.Tensor:
    """Open a CUDA IPC handle the way torch.multiprocessing does (cached per handle)."""
    from torch.multiprocessing.reductions import rebuild_cuda_tensor

    dtype = _dtype(layout)
    shape, offset, ipc = layout.get("shape"), layout.get("offset"), layout.get("ipc")
    if (
        dtype is None
        or not _counts(shape)
        or not _counts([offset])
        or not isinstance(ipc, dict)
        or set(ipc) != {*_IPC_COUNTS, *_IPC_HANDLES, "event_sync_required"}
        or not _counts([ipc[name] for name in _IPC_COUNTS])
        or not isinstance(ipc["event_sync_required"], bool)
    ):
        raise ProtocolError(f"bad CUDA tensor layout {layout!r:.300}")
    handles = {name: _unb64(ipc[name], name) for name in _IPC_HANDLES}
    count = math.prod(shape)
    if count and (offset + count) * dtype.itemsize > ipc["size"]:
        raise ProtocolError(f"CUDA tensor layout {layout!r:.300} reaches outside its storage")
    stride = torch.empty(shape, device="meta").stride()
    return rebuild_cuda_tensor(
        torch.Tensor, torch.Size(shape), stride, offset, torch.storage.TypedStorage, dtype,
        ipc["device"], handles["handle"], ipc["size"], ipc["storage_offset"], False,
        handles["ref_counter_handle"], ipc["ref_counter_offset"], handles["event_handle"],
        ipc["event_sync_required"],
    )  # fmt: skip


def _dtype(layout: dict) -> torch.dtype | None:
    name = layout.get("dtype")
    return _DTYPES.get(name) if isinstance(name, str) else None


def _counts(values: Any) -> bool:
    """Whether ``values`` is a list of integers >= 0 (JSON's, so no booleans)."""
    return isinstance(values, list) and all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values
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
    if kind == "cuda_tensor":
        return _rebuild_cuda_tensor(layout)
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
    dtype = _dtype(layout)
    shape, index, offset = layout.get("shape"), layout.get("storage"), layout.get("offset")
    if (
        dtype is None
        or not isinstance(shape, list)
        or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape)
        or not isinstance(index, int)
        or not isinstance(offset, int)
        or offset < 0
    ):
        raise ProtocolError(f"bad tensor layout {layout!r}")
    count = math.prod(shape)
    if count == 0:
        return torch.empty(shape, dtype=dtype)
    if not 0 <= index < len(maps):
        raise ProtocolError(f"tensor layout {layout!r} names no received storage")
    buffer = maps[index]
    nbytes = count * torch.empty((), dtype=dtype).element_size()
    if buffer is None or offset + nbytes > len(buffer):
        raise ProtocolError(f"tensor layout {layout!r} reaches outside its storage")
    flat = torch.frombuffer(buffer, dtype=dtype, count=count, offset=offset)
    return flat.view(shape)
