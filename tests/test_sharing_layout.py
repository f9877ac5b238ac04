"""`sharing.layout`: describing batches by their shared storages and rebuilding them."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from sharing.errors import ProtocolError
from sharing.layout import describe, map_storages, rebuild


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
