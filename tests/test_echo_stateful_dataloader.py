"""`Echo` under torchdata's `StatefulDataLoader` with workers, and the main-process state."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader

from echo.torch import Echo

stateful = pytest.importorskip(
    "torchdata.stateful_dataloader", reason="torchdata is not installed (the `dev` extra)"
)
StatefulDataLoader = stateful.StatefulDataLoader
pytestmark = pytest.mark.filterwarnings("ignore:'set_vital' is deprecated:UserWarning")


def _loader(num_workers=2, **echo):
    stage = Echo(list(range(200)), 2, **({"shuffle_buffer": 4, "seed": 1} | echo))
    return StatefulDataLoader(stage, batch_size=10, num_workers=num_workers)


def _plain(batches):
    return [b.tolist() for b in batches]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_resume_after_10_of_40_batches_yields_the_other_30(num_workers):
    """Issue 14, item 1: inside workers the state was (epoch 1, position 0), so a resume
    replayed the whole epoch: 40 batches instead of 30."""
    reference = _plain(_loader(num_workers))
    assert len(reference) == 40
    loader = _loader(num_workers)
    it = iter(loader)
    head = _plain(next(it) for _ in range(10))
    state = loader.state_dict()
    del it
    resumed = _loader(num_workers)
    resumed.load_state_dict(state)
    tail = _plain(resumed)
    assert len(tail) == 30
    assert head + tail == reference
    assert (resumed.dataset.fresh, resumed.dataset.emitted) == (200, 400)


def test_resumed_loader_goes_on_to_the_next_epoch():
    reference = _loader()
    epochs = [_plain(reference), _plain(reference)]
    loader = _loader()
    it = iter(loader)
    head = _plain(next(it) for _ in range(5))
    state = loader.state_dict()
    del it
    resumed = _loader()
    resumed.load_state_dict(state)
    assert head + _plain(resumed) == epochs[0]
    assert _plain(resumed) == epochs[1]


def test_delivered_counts_are_exact_where_the_stage_counters_include_prefetch():
    """Issue 14, item 8: after 500 consumed items the workers had read and emitted more."""
    from echo.torch import delivered_counts

    loader = _loader(shuffle_buffer=0)
    it = iter(loader)
    for _ in range(25):  # 250 items: factor 2, so 125 fresh
        next(it)
    counts = delivered_counts(loader.state_dict())
    assert (counts.fresh, counts.emitted) == (125, 250)
    assert loader.dataset.emitted > 250  # the workers' prefetch, as documented
    del it


def test_main_process_state_while_workers_run_is_refused():
    """Issue 14, item 2: the main process reported position 0 while its workers ran, so a
    resume replayed the whole epoch."""
    stage = Echo(list(range(500)), 2, seed=0)
    loader = DataLoader(stage, batch_size=10, num_workers=2)
    it = iter(loader)
    for _ in range(20):
        next(it)
    with pytest.raises(RuntimeError, match="StatefulDataLoader"):
        stage.state_dict()
    del it


def test_main_process_state_between_epochs_is_the_next_epoch():
    stage = Echo(list(range(50)), 2, seed=0)
    loader = DataLoader(stage, batch_size=10, num_workers=2)
    first = [b.tolist() for b in loader]
    state = stage.state_dict()
    assert state == {
        "epoch": 1,
        "position": 0,
        "fresh": 50,
        "emitted": 100,
        "units": state["units"],
    }
    second = [b.tolist() for b in loader]
    again = Echo(list(range(50)), 2, seed=0)
    again.load_state_dict(state)
    assert [b.tolist() for b in DataLoader(again, batch_size=10, num_workers=2)] == second
    assert first != second
    assert torch.tensor(first).flatten().sort().values.tolist() == sorted(list(range(50)) * 2)
