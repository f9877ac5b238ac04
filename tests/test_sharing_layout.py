"""`sharing.layout`: describing batches by their shared storages and rebuilding them."""

from __future__ import annotations

import base64
import os

import numpy as np
import pytest
import torch

from sharing import protocol
from sharing.errors import ProtocolError
from sharing.layout import MAX_LAYOUT_BYTES, describe, map_storages, map_tensors, rebuild
from sharing.protocol import MAX_INT


def roundtrip(batch):
    layout, fds, keep = describe(batch)  # keep: the storages stay alive while in use
    return rebuild(layout, map_storages([os.dup(fd) for fd in fds])), layout, keep


def test_nested_batch_roundtrips_with_values_and_views():
    base = torch.arange(20.0)
    batch = {
        "x": base[4:12].view(2, 4),  # a view with a storage offset
        "pair": (torch.ones(3, dtype=torch.uint8), np.arange(5, dtype=np.int32)),
        "names": ["a", 1, None, 2.5, True],
        "empty": torch.empty(0, 3),
    }
    rebuilt, layout, _ = roundtrip(batch)
    assert torch.equal(rebuilt["x"], base[4:12].view(2, 4))
    assert torch.equal(rebuilt["pair"][1], torch.arange(5, dtype=torch.int32))
    assert rebuilt["names"] == ["a", 1, None, 2.5, True]
    assert rebuilt["empty"].shape == (0, 3)
    assert layout["items"][0][1]["offset"] == 4 * 4  # bytes into the shared storage


def test_tensors_sharing_a_storage_send_it_once():
    base = torch.arange(10)
    layout, fds, _ = describe((base[:5], base[5:]))
    assert len(fds) == 1
    assert [item["storage"] for item in layout["items"]] == [0, 0]


@pytest.mark.parametrize(
    "bad", [object(), {1: torch.ones(1)}, torch.ones(2, dtype=torch.int16).to_sparse()]
)
def test_unshareable_leaves_are_type_errors(bad):
    with pytest.raises(TypeError):
        describe(bad)


@pytest.mark.parametrize(
    "layout",
    [
        {"t": "tensor", "dtype": "float32", "shape": [1000], "storage": 0, "offset": 0},
        {"t": "tensor", "dtype": "float32", "shape": [1], "storage": 3, "offset": 0},
        {"t": "tensor", "dtype": "evil", "shape": [1], "storage": 0, "offset": 0},
        {"t": "tensor", "dtype": "float32", "shape": [-1], "storage": 0, "offset": 0},
        {"t": "dict", "items": [[1, {"t": "value", "v": 1}]]},
        {"t": "module", "name": "os"},
        ["not", "a", "node"],
    ],
)
def test_layouts_pointing_outside_their_storage_or_malformed_are_rejected(layout):
    _, fds, _keep = describe(torch.zeros(4))
    with pytest.raises(ProtocolError):
        rebuild(layout, map_storages([os.dup(fd) for fd in fds]))


def test_a_layout_too_large_for_one_message_is_refused_when_described():
    # One storage (within MAX_STORAGES), but a layout entry per view: the message's limit binds.
    base = torch.arange(4096)

    def fits(views: int) -> bool:
        try:
            layout, _, _ = describe([base[i : i + 1] for i in range(views)])
        except TypeError as error:
            assert f"at most {MAX_LAYOUT_BYTES} bytes" in str(error)
            return False
        # Whatever describe accepts is sent: a batch message with the largest numbers fits.
        protocol.encode(
            "batch", seq=MAX_INT, epoch=MAX_INT, index=MAX_INT, layout=layout, segment=MAX_INT
        )
        return True

    low, high = 1, 4096  # fits(low), not fits(high): the largest batch describe accepts
    assert fits(low) and not fits(high)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    assert low > 500


def _cuda_layout(**changes) -> dict:
    """A well-formed CUDA tensor layout (8 float32 elements at element 2 of a 64-byte storage),
    with ``changes`` applied to it or (keys starting ``ipc_``) to its ``ipc`` fields."""
    handle = base64.b64encode(bytes(64)).decode()
    ipc = {
        "device": 0, "handle": handle, "size": 64, "storage_offset": 0,
        "ref_counter_handle": base64.b64encode(b"/torch_1_2_3").decode(),
        "ref_counter_offset": 0, "event_handle": handle, "event_sync_required": True,
    }  # fmt: skip
    layout = {"t": "cuda_tensor", "dtype": "float32", "shape": [2, 4], "offset": 2, "ipc": ipc}
    for key, value in changes.items():
        target, key = (ipc, key.removeprefix("ipc_")) if key.startswith("ipc_") else (layout, key)
        if value is _DROP:
            del target[key]
        else:
            target[key] = value
    return layout


_DROP = object()


@pytest.mark.parametrize(
    "changes",
    [
        {"dtype": ["float32"]},
        {"dtype": "float128"},
        {"shape": [True, 4]},
        {"shape": [2, -4]},
        {"offset": -1},
        {"offset": "2"},
        {"offset": 9},  # 9 + 8 elements of 4 bytes reach past the 64-byte storage
        {"ipc": None},
        {"ipc_device": "0"},
        {"ipc_device": True},
        {"ipc_size": None},
        {"ipc_storage_offset": -8},
        {"ipc_ref_counter_offset": 1.5},
        {"ipc_handle": 5},
        {"ipc_handle": "not base64!"},
        {"ipc_event_handle": ["a"]},
        {"ipc_event_sync_required": "yes"},
        {"ipc_ref_counter_handle": _DROP},
        {"ipc_extra": 1},
    ],
)
def test_malformed_cuda_layouts_are_protocol_errors(changes):
    with pytest.raises(ProtocolError):
        rebuild(_cuda_layout(**changes), [])


def test_map_tensors_reaches_every_tensor_and_array_so_a_device_move_takes_all():
    batch = {
        "x": torch.ones(2, 3),
        "step": torch.tensor(7),  # 0-dim
        "weights": np.arange(3, dtype=np.float32),
        "meta": ("name", 4),
    }
    moved = map_tensors(batch, lambda tensor: tensor.to(torch.float64))
    assert {key: moved[key].dtype for key in ("x", "step", "weights")} == dict.fromkeys(
        ("x", "step", "weights"), torch.float64
    )
    assert moved["step"].shape == () and moved["meta"] == ("name", 4)
