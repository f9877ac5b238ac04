"""CUDA batches shared as torch.multiprocessing shares them: one CUDA IPC reference per
tensor per consumer, taken when the batch is sent.

Each `share_tensor` call (torch's ``_share_cuda_``, as ``reduce_tensor`` makes for every
pickled CUDA tensor) creates a reference counter set to 1, which the receiving process lowers
once its storage is gone, after its current stream's queued work has run; the producer does
not reuse the memory while any of its counters is above 0, even after it has dropped the
batch itself. So a batch's layout (`sharing.layout.describe`) names each CUDA tensor by its
place among the batch's kept tensors, and `for_send` gives every send, a late joiner's
replay included, handles of its own: no consumer's release frees memory another still
reads, and a consumer's memory stays reserved while echo_on_stall, a re-cut or any tensor of
its own still holds it. A consumer that leaves lowers the counters of the batches it never
opened (`release_unopened`); the producer lowers those made for a send that never happened,
and reads the others (`held`) to outlive every consumer's last tensor.

A loader that makes CUDA tensors itself may make them on a stream of its own, which the
event torch records at share time (on the producer's current stream) does not cover:
`settle` waits for the device first.
"""

from __future__ import annotations

import base64
import contextlib
import os
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch

from sharing import protocol
from sharing.errors import ProtocolError

__all__ = [
    "IPC_BOUND",
    "cuda_devices",
    "for_send",
    "held",
    "ipc_fields",
    "release_counter",
    "release_in_flight",
    "release_unopened",
    "settle",
    "share_tensor",
]

Share = Callable[[torch.Tensor], dict]
"""A CUDA tensor -> the ``ipc`` fields of a new reference to its storage."""

_COUNTERS_PER_FILE = 10_000  # torch's CUDA_IPC_REF_COUNTER_FILE_SIZE
_SHM = "/dev/shm"  # where shm_open puts torch's counter files
_HEADER_BYTES = 64  # a counter file's header (its mapping count), before the counters
_B64_OF_64_BYTES = "A" * 88
IPC_BOUND = {
    "device": 99,
    "handle": _B64_OF_64_BYTES,  # a cudaIpcMemHandle_t: 64 bytes
    "size": 2**50,
    "storage_offset": 2**50,
    "ref_counter_handle": _B64_OF_64_BYTES,  # a shared-memory name, "/torch_PID_RANDOM_N"
    "ref_counter_offset": 2**32,
    "event_handle": _B64_OF_64_BYTES,  # a cudaIpcEventHandle_t: 64 bytes
    "event_sync_required": False,
}
"""The largest ``ipc`` fields one share gives: what `describe` counts toward a message."""


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def share_tensor(tensor: torch.Tensor) -> dict:
    """A new CUDA IPC reference to ``tensor``'s storage, as torch's ``reduce_tensor`` makes
    one (its counter starts at 1; torch's ``shared_cache`` keeps the sender's bookkeeping).

    Args:
        tensor (torch.Tensor): A CUDA tensor.

    Returns:
        dict: Its ``ipc`` fields (`sharing.layout` names them), handles in base64.
    """
    from torch.multiprocessing.reductions import StorageWeakRef, shared_cache

    storage = tensor._typed_storage()
    (device, handle, size, offset, ref_handle, ref_offset, event, sync) = storage._share_cuda_()
    shared_cache[handle] = StorageWeakRef(storage)
    return {
        "device": device,
        "handle": _b64(handle),
        "size": size,
        "storage_offset": offset,
        "ref_counter_handle": _b64(ref_handle),
        "ref_counter_offset": ref_offset,
        "event_handle": _b64(event),
        "event_sync_required": bool(sync),
    }


def release_counter(ipc: dict) -> None:
    """Lower the counter of one reference never opened (as torch's ``rebuild_cuda_tensor``
    does for a storage its process has open already).

    Args:
        ipc (dict): A reference's ``ipc`` fields, as `share_tensor` gives them (malformed
            ones, which name no counter torch made, are ignored).
    """
    handle, offset = ipc.get("ref_counter_handle"), ipc.get("ref_counter_offset")
    if not isinstance(handle, str) or not isinstance(offset, int) or isinstance(offset, bool):
        return
    if not 0 <= offset < _COUNTERS_PER_FILE:  # torch writes there unchecked
        return
    with contextlib.suppress(ValueError):  # not base64
        name = base64.b64decode(handle, validate=True)
        torch.UntypedStorage._release_ipc_counter_cuda(name, offset)


def held(references: list[dict]) -> list[dict]:
    """The references (``ipc`` fields, as `share_tensor` makes them) that a receiver still
    holds: torch's counter for it is above 0. Counters are read from torch's counter file
    (``/dev/shm`` + its name: a 64-byte header, then one int64 per reference); a file that is
    gone (torch removes one once every counter in it is 0) holds none.

    Args:
        references (list[dict]): References made by this process.

    Returns:
        list[dict]: Those still held, in order.
    """
    files: dict[str, bytes] = {}  # each counter file read once
    still = []
    for ipc in references:
        handle, offset = ipc.get("ref_counter_handle"), ipc.get("ref_counter_offset")
        if not isinstance(handle, str) or not isinstance(offset, int) or offset < 0:
            continue
        if handle not in files:
            try:
                with open(_SHM + base64.b64decode(handle).decode(), "rb") as counters:
                    files[handle] = counters.read()
            except (OSError, ValueError):
                files[handle] = b""
        start = _HEADER_BYTES + 8 * offset
        value = files[handle][start : start + 8]
        if len(value) == 8 and int.from_bytes(value, "little", signed=True) > 0:
            still.append(ipc)
    return still


def _cuda_nodes(layout: Any) -> Iterator[dict]:
    """The ``cuda_tensor`` nodes of a layout, depth first."""
    if not isinstance(layout, dict):
        return
    if layout.get("t") == "cuda_tensor":
        yield layout
        return
    items = layout.get("items")
    if isinstance(items, list):
        for item in items:
            if layout.get("t") != "dict":
                yield from _cuda_nodes(item)
            elif isinstance(item, list) and len(item) == 2:
                yield from _cuda_nodes(item[1])


def for_send(layout: dict, keep: list[Any], share: Share | None = None) -> tuple[dict, list[dict]]:
    """``layout`` with a new reference in each CUDA tensor's ``ipc`` (``describe`` left
    there the tensor's index in ``keep``), and those references' ``ipc`` fields.

    Args:
        layout (dict): A batch's layout, from `sharing.layout.describe`.
        keep (list[Any]): The tensors it keeps alive, from the same call.
        share (Share | None): Makes each reference. Default None: `share_tensor`.

    Returns:
        tuple[dict, list[dict]]: The layout to send (``layout`` itself when it has no CUDA
        tensor) and the references made, one per CUDA tensor.
    """
    share = share or share_tensor
    made: list[dict] = []

    def fill(node: Any) -> Any:
        if not isinstance(node, dict):
            return node
        if node.get("t") == "cuda_tensor":
            made.append(share(keep[node["ipc"]]))
            return {**node, "ipc": made[-1]}
        items = node.get("items")
        if node.get("t") == "dict":
            return {**node, "items": [[key, fill(value)] for key, value in items]}
        if isinstance(items, list):
            return {**node, "items": [fill(item) for item in items]}
        return node

    if next(_cuda_nodes(layout), None) is None:
        return layout, made
    return fill(layout), made


def ipc_fields(layout: Any) -> list[dict]:
    """The ``ipc`` fields of every CUDA tensor in a received layout (malformed nodes are
    skipped: what a message does not name cannot be released)."""
    return [node["ipc"] for node in _cuda_nodes(layout) if isinstance(node.get("ipc"), dict)]


def release_unopened(layout: Any, release: Callable[[dict], None] | None = None) -> int:
    """Lower the counter of each CUDA reference in a batch never opened; how many.

    Args:
        layout (Any): A received batch's layout.
        release (Callable[[dict], None] | None): Lowers one. Default None: `release_counter`.
    """
    release = release or release_counter
    fields = ipc_fields(layout)
    for ipc in fields:
        release(ipc)
    return len(fields)


def release_in_flight(sock: socket.socket, *, cuda: bool, wait_s: float = 1.0) -> bool:
    """After a consumer's leave: lower the CUDA counters of the batches still in its socket
    (their descriptors are closed), and, once any batch was CUDA (``cuda``, or one read
    here), of those the producer sends until it reads the leave and closes the connection,
    waiting at most ``wait_s`` for that.

    Args:
        sock (socket.socket): The consumer's connection, its leave sent.
        cuda (bool): Whether this consumer has received a CUDA batch.
        wait_s (float): Most seconds to wait for the producer's close. Default 1.

    Returns:
        bool: Whether the producer closed the connection (everything in flight was seen).
    """
    deadline = time.monotonic() + wait_s
    while True:
        left = deadline - time.monotonic()
        if cuda and left <= 0:
            return False
        sock.settimeout(left if cuda else 0.0)
        try:
            message, fds = protocol.recv(sock)
        except (BlockingIOError, TimeoutError):
            return False
        except (OSError, ProtocolError):
            return True  # the connection is gone, or no longer a producer's
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        if message is None:
            return True
        if message["type"] == "batch":
            cuda = release_unopened(message["layout"]) > 0 or cuda


def _tensors(batch: Any) -> Iterator[torch.Tensor]:
    if isinstance(batch, torch.Tensor):
        yield batch
    elif isinstance(batch, dict):
        for value in batch.values():
            yield from _tensors(value)
    elif isinstance(batch, (tuple, list)):
        for value in batch:
            yield from _tensors(value)


def cuda_devices(batch: Any) -> list[torch.device]:
    """The CUDA devices ``batch``'s tensors are on, in order of first use."""
    devices: dict[torch.device, None] = {}
    for tensor in _tensors(batch):
        if tensor.device.type == "cuda":
            devices[tensor.device] = None
    return list(devices)


def settle(batch: Any) -> None:
    """Wait until the work that made ``batch``'s CUDA tensors has run, on whatever stream
    (its loader's thread, a side stream of its own): each of their devices is synchronised
    (``torch.cuda.synchronize``), so the event torch records at each share covers it."""
    for device in cuda_devices(batch):
        torch.cuda.synchronize(device)
