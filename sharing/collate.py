"""Collating samples straight into one shared-memory buffer, described by a `sharing.layout`
layout whose tensors all live in storage 0.

Without a ``collate_fn`` the samples are stacked as torch's ``default_collate`` does
(tensors and arrays stacked, ints as int64, floats as float64, bools as bool, strings as a
list, mappings and sequences field by field; a tuple sample stays a tuple), each field written
once, into the buffer, by ``torch.stack(..., out=)``. With a ``collate_fn``, its batch is
copied into the buffer (one copy per tensor), as is any batch given to `copy_into`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

__all__ = ["collate_into", "copy_into"]

_ALIGN = 64  # each tensor starts at a multiple of this many bytes
_SCALARS = {bool: torch.bool, int: torch.int64, float: torch.float64}

Fill = Callable[[torch.Tensor], None]


class _Plan:
    """Offsets handed out in one buffer, and what to write at each."""

    def __init__(self) -> None:
        self.size = 0
        self.writes: list[tuple[int, int, torch.dtype, list[int], Fill]] = []

    def tensor(self, dtype: torch.dtype, shape: list[int], fill: Fill) -> dict:
        """The layout of a ``dtype`` tensor of ``shape`` that ``fill`` writes."""
        name = str(dtype).removeprefix("torch.")
        count = int(np.prod(shape, dtype=np.int64))
        if count == 0:
            return {"t": "tensor", "dtype": name, "shape": shape, "storage": -1, "offset": 0}
        offset = -(-self.size // _ALIGN) * _ALIGN
        nbytes = count * torch.empty((), dtype=dtype).element_size()
        self.size = offset + nbytes
        self.writes.append((offset, nbytes, dtype, shape, fill))
        return {"t": "tensor", "dtype": name, "shape": shape, "storage": 0, "offset": offset}


def _as_tensor(value: Any) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, np.ndarray) and value.dtype != object:
        return torch.from_numpy(value)
    return None


def _stack(samples: Sequence[Any], plan: _Plan, where: str) -> dict:
    first = samples[0]
    if _as_tensor(first) is not None:
        tensors = [_as_tensor(sample) for sample in samples]
        head = tensors[0]
        for tensor in tensors:
            if tensor is None or tensor.shape != head.shape or tensor.dtype != head.dtype:
                got = "not a tensor" if tensor is None else f"{tensor.dtype} {list(tensor.shape)}"
                raise TypeError(
                    f"cannot stack {where}: sample 0 is a {head.dtype} tensor of shape "
                    f"{list(head.shape)}, another is {got}"
                )
        shape = [len(tensors), *head.shape]
        return plan.tensor(head.dtype, shape, lambda out: torch.stack(tensors, out=out))
    kind = type(first)
    if kind in _SCALARS:
        if any(type(sample) is not kind for sample in samples):
            raise TypeError(f"cannot stack {where}: mixed {kind.__name__} and other values")
        values = torch.tensor(samples, dtype=_SCALARS[kind])
        return plan.tensor(values.dtype, [len(samples)], lambda out: out.copy_(values))
    if isinstance(first, str):
        return {"t": "list", "items": [{"t": "value", "v": str(s)} for s in samples]}
    if isinstance(first, Mapping):
        items = []
        for key in first:
            if not isinstance(key, str):
                raise TypeError(f"batch dict keys must be strings, got {key!r} in {where}")
            items.append([key, _stack([s[key] for s in samples], plan, f"{where}[{key!r}]")])
        return {"t": "dict", "items": items}
    if isinstance(first, (tuple, list)):
        if any(len(sample) != len(first) for sample in samples):
            raise TypeError(f"cannot stack {where}: samples of different lengths")
        fields = [_stack([s[i] for s in samples], plan, f"{where}[{i}]") for i in range(len(first))]
        return {"t": "tuple" if isinstance(first, tuple) else "list", "items": fields}
    raise TypeError(
        f"cannot collate {where} of type {kind.__name__}; samples may hold tensors, numpy "
        "arrays, numbers, strings, and tuples/lists/dicts of them (or pass a collate_fn)"
    )


def _copy(batch: Any, plan: _Plan, where: str) -> dict:
    tensor = _as_tensor(batch)
    if tensor is not None:
        if tensor.device.type != "cpu" or tensor.layout != torch.strided:
            raise TypeError(f"{where} is a {tensor.layout} tensor on {tensor.device}")
        return plan.tensor(tensor.dtype, list(tensor.shape), lambda out: out.copy_(tensor))
    if isinstance(batch, Mapping):
        items = []
        for key, value in batch.items():
            if not isinstance(key, str):
                raise TypeError(f"batch dict keys must be strings, got {key!r} in {where}")
            items.append([key, _copy(value, plan, f"{where}[{key!r}]")])
        return {"t": "dict", "items": items}
    if isinstance(batch, (tuple, list)):
        items = [_copy(value, plan, f"{where}[{i}]") for i, value in enumerate(batch)]
        return {"t": "tuple" if isinstance(batch, tuple) else "list", "items": items}
    if batch is None or isinstance(batch, (bool, int, float, str)):
        return {"t": "value", "v": batch}
    raise TypeError(
        f"cannot share {where} of type {type(batch).__name__}; use tensors, numpy arrays, "
        "numbers, strings, or tuples/lists/dicts of them"
    )


def collate_into(
    samples: Sequence[Any],
    collate_fn: Callable[[list[Any]], Any] | None,
    buffer: Callable[[int], Any],
) -> tuple[dict, int]:
    """Collate ``samples`` into the buffer that ``buffer(size)`` returns (a writable object
    of at least ``size`` bytes, kept by the caller); (layout, bytes used).

    Raises:
        TypeError: The samples (or ``collate_fn``'s batch) cannot be collated or shared.
    """
    plan = _Plan()
    if collate_fn is None:
        layout = _stack(samples, plan, "the samples")
    else:
        layout = _copy(collate_fn(list(samples)), plan, "collate_fn's batch")
    return layout, _write(plan, buffer)


def copy_into(batch: Any, buffer: Callable[[int], Any]) -> tuple[dict, int]:
    """Copy ``batch``'s tensors and arrays into the buffer that ``buffer(size)`` returns (as
    `collate_into`); (layout, bytes used).

    Raises:
        TypeError: ``batch`` holds a leaf that cannot be shared, or a tensor not in CPU memory.
    """
    plan = _Plan()
    layout = _copy(batch, plan, "the batch")
    return layout, _write(plan, buffer)


def _write(plan: _Plan, buffer: Callable[[int], Any]) -> int:
    """Carry out ``plan``'s writes in ``buffer(plan.size)``; the bytes used."""
    if plan.writes:
        memory = buffer(plan.size)
        for offset, nbytes, dtype, shape, fill in plan.writes:
            raw = torch.frombuffer(memory, dtype=torch.uint8, count=nbytes, offset=offset)
            fill(raw.view(dtype).view(shape))
    return plan.size
