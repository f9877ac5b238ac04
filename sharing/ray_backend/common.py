"""What the Ray backend's hub, producer and consumer share: its names (``ray:NAME``, the
namespace), its timings, joining the cluster, and batches as they travel through the
object store (tensors as numpy arrays, read back zero-copy or copied)."""

from __future__ import annotations

import logging
import os
import re
import secrets
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import ray
import torch

from sharing.endpoint import RAY_SCHEME as SCHEME
from sharing.endpoint import is_ray_endpoint

__all__ = [
    "AHEAD",
    "GONE_S",
    "GRACE_S",
    "NAMESPACE",
    "POLL_S",
    "READ_S",
    "TELL_S",
    "StoredTensor",
    "connect",
    "default_endpoint",
    "from_store",
    "log",
    "parse",
    "store_nbytes",
    "to_store",
]

log = logging.getLogger("sharing.producer")
"""The Ray backend's logger: the local producer's."""

NAMESPACE = "sharing"
"""The Ray namespace the hubs are named in."""

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
POLL_S = 0.25  # longest a hub call waits before it answers "nothing yet" (a heartbeat too)
GONE_S = 2.0  # a hub that answers no call (each answers within POLL_S) for this long is gone
TELL_S = 5.0  # how long close waits for consumers to learn the stream's end
READ_S = 1.0  # a batch's read checks the producer's hub this often while it waits
AHEAD = 2  # batches a consumer starts pulling before it needs them
GRACE_S = 1e-4  # EchoOnStall's grace, as the local consumer's


def parse(endpoint: str) -> str:
    """The hub's actor name in ``ray:NAME``.

    Raises:
        ValueError: ``endpoint`` is not ``ray:NAME`` with NAME of letters, digits, ``_.-``.
    """
    name = endpoint[len(SCHEME) :] if is_ray_endpoint(endpoint) else ""
    if not _NAME.fullmatch(name):
        raise ValueError(
            f"endpoint must be 'ray:NAME' (NAME: letters, digits, '_', '.', '-'; up to 100), "
            f"got {endpoint!r}"
        )
    return name


def default_endpoint() -> str:
    """A fresh ``ray:NAME``."""
    return f"{SCHEME}sharing-{os.getpid()}-{secrets.token_hex(6)}"


def connect() -> None:
    """Join the Ray cluster this process belongs to (``ray.init`` if not yet)."""
    if not ray.is_initialized():
        ray.init(address=os.environ.get("RAY_ADDRESS"), log_to_driver=False)


@dataclass(frozen=True)
class StoredTensor:
    """A CPU tensor on its way through the object store, as its numpy array (zero-copy)."""

    array: np.ndarray


def to_store(batch: Any) -> Any:
    """``batch`` with every tensor as a `StoredTensor` (Ray stores numpy arrays out of band)."""
    if isinstance(batch, torch.Tensor):
        if batch.device.type != "cpu":
            raise ValueError(f"the ray backend serves CPU tensors, got one on {batch.device}")
        return StoredTensor(batch.detach().contiguous().numpy())
    if isinstance(batch, dict):
        return {key: to_store(value) for key, value in batch.items()}
    if isinstance(batch, (tuple, list)):
        return type(batch)(to_store(value) for value in batch)
    return batch


def from_store(batch: Any, copy: bool) -> Any:
    """`to_store`'s inverse: tensors over the (read-only) store memory, or copies."""
    if isinstance(batch, StoredTensor):
        if copy:
            return torch.from_numpy(batch.array.copy())
        with warnings.catch_warnings():  # read-only by design (the module says why)
            warnings.simplefilter("ignore", UserWarning)
            return torch.from_numpy(batch.array)
    if isinstance(batch, dict):
        return {key: from_store(value, copy) for key, value in batch.items()}
    if isinstance(batch, (tuple, list)):
        return type(batch)(from_store(value, copy) for value in batch)
    if isinstance(batch, np.ndarray) and copy:
        return batch.copy()
    return batch


def store_nbytes(batch: Any) -> int:
    if isinstance(batch, StoredTensor):
        return batch.array.nbytes
    if isinstance(batch, np.ndarray):
        return batch.nbytes
    if isinstance(batch, dict):
        return sum(store_nbytes(value) for value in batch.values())
    if isinstance(batch, (tuple, list)):
        return sum(store_nbytes(value) for value in batch)
    return 0


# ---------------------------------------------------------------------- the hub
