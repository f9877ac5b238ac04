"""One resume contract for every stateful echo stage, checked by one shared test."""

from __future__ import annotations

import pytest
import torch
from stage_checks import check_save_load_state

from echo.state import STATE_KEYS, UNITS, check_state, delivered_counts
from echo.torch import Echo, EchoOnStall, build_pipeline


def _echo():
    return Echo(list(range(40)), 2.5, shuffle_buffer=6, seed=9)


def _echo_identity():
    return Echo(list(range(40)), 1, seed=9)


def _loader(point="after_augment", num_workers=0):
    def make():
        rows = [torch.tensor([i]) for i in range(60)]
        return build_pipeline(
            rows, point=point, factor=2, shuffle_buffer=3, batch_size=6,
            num_workers=num_workers, seed=1,
        )  # fmt: skip

    return make


def _on_stall():
    return EchoOnStall(_loader("after_batch")(), max_factor=1)


class _NodeEpochs:
    """An `EchoNode` driven like the other stages: each ``iter`` is one epoch."""

    def __init__(self):
        from torchdata.nodes import IterableWrapper

        from echo.torch.nodes import EchoNode

        self.node = EchoNode(IterableWrapper(range(30)), 1.5, shuffle_buffer=4, seed=2)
        self._loaded = False

    def __iter__(self):
        if not self._loaded:
            self.node.reset()
        self._loaded = False
        while True:
            try:
                yield next(self.node)
            except StopIteration:
                return

    def state_dict(self):
        return self.node.state_dict()

    def load_state_dict(self, state):
        self.node.load_state_dict(state)
        self._loaded = True


def _node():
    pytest.importorskip("torchdata.nodes", reason="torchdata is not installed (the `dev` extra)")
    return _NodeEpochs()


STAGES = {
    "Echo": _echo,
    "Echo-identity": _echo_identity,
    "EchoLoader": _loader(),
    "EchoLoader-batch-echo-workers": _loader("after_batch", num_workers=2),
    "EchoOnStall(EchoLoader)": _on_stall,
    "EchoNode": _node,
}


@pytest.mark.parametrize("name", list(STAGES))
@pytest.mark.parametrize("stop_at", [0, 1, 7])
def test_every_stage_resumes_exactly_even_when_preempted_twice(name, stop_at):
    make = STAGES[name]
    make()  # skips here when the stage's library is missing
    check_save_load_state(make, stop_at)


@pytest.mark.parametrize("name", list(STAGES))
def test_every_stage_saves_the_same_shape(name):
    stage = STAGES[name]()
    list(stage)
    state = stage.state_dict()
    assert check_state(state, name.split("-")[0].split("(")[0]) is state
    assert set(state) - set(STATE_KEYS) <= {"source", "units"}


@pytest.mark.parametrize("name", list(STAGES))
def test_every_state_names_the_units_of_its_counters(name):
    stage = STAGES[name]()
    list(stage)
    units = stage.state_dict()["units"]
    assert set(units) == {"fresh", "emitted"}
    assert set(units.values()) <= {"items", "examples", "batches"}


def test_a_wrapper_state_and_the_loader_state_in_it_say_what_they_count():
    stage = _on_stall()
    list(stage)
    state = stage.state_dict()
    assert state["units"] == {"fresh": "batches", "emitted": "batches"}
    assert state["source"]["units"] == {"fresh": "examples", "emitted": "batches"}
    assert state["source"]["fresh"] == 60 and state["fresh"] == state["source"]["emitted"] == 20
    with pytest.raises(ValueError, match=r"units.*another kind of stage"):
        _on_stall().load_state_dict(state["source"])


def test_a_state_without_units_is_taken_as_the_stage_own():
    stage = _echo()
    stage.load_state_dict({"epoch": 1, "position": 0, "fresh": 40, "emitted": 100})
    assert stage.state_dict() == {
        "epoch": 1, "position": 0, "fresh": 40, "emitted": 100, "units": UNITS["Echo"]
    }  # fmt: skip


@pytest.mark.parametrize("name", list(STAGES))
def test_every_stage_refuses_a_bad_state_naming_the_key(name):
    stage = STAGES[name]()
    with pytest.raises(ValueError, match="position"):
        stage.load_state_dict({"epoch": 0, "position": -1, "fresh": 0, "emitted": 0})


def test_delivered_counts_sums_every_stage_state_it_finds():
    state = {"_snapshot": {"w0": {"epoch": 0, "position": 3, "fresh": 2, "emitted": 3}},
             "w1": [{"epoch": 0, "position": 4, "fresh": 4, "emitted": 4}]}  # fmt: skip
    counts = delivered_counts(state)
    assert (counts.fresh, counts.emitted) == (6, 7)
