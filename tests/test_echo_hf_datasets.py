"""HF `datasets` as `Echo` sources: map-style and iterable, epochs forwarded, resume."""

from __future__ import annotations

import os

import pytest
from torch.utils.data import DataLoader

from echo.torch import Echo

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
datasets = pytest.importorskip("datasets", reason="datasets is not installed")
stateful = pytest.importorskip(
    "torchdata.stateful_dataloader", reason="torchdata is not installed (the `dev` extra)"
)
pytestmark = pytest.mark.filterwarnings("ignore:'set_vital' is deprecated:UserWarning")


def _table(n=64):
    return datasets.Dataset.from_dict({"x": list(range(n)), "label": [i // 8 for i in range(n)]})


def _xs(loader):
    return [int(v) for batch in loader for v in batch["x"]]


def test_map_style_dataset_is_read_by_index_shuffled_each_epoch():
    stage = Echo(_table(), 2, shuffle_buffer=4, seed=0)
    loader = DataLoader(stage, batch_size=8, num_workers=2)
    epochs = [_xs(loader) for _ in range(2)]
    for epoch in epochs:
        assert sorted(epoch) == sorted(list(range(64)) * 2)
    assert epochs[0] != epochs[1]
    assert (stage.fresh, stage.emitted) == (128, 256)


def _iterable(n=64):
    return _table(n).to_iterable_dataset(num_shards=4).shuffle(seed=1, buffer_size=16)


def test_iterable_dataset_reshuffles_each_epoch_through_the_forwarded_epoch():
    """Issue 14, item 4: an HF IterableDataset reshuffles by its set_epoch, which nothing
    called inside the workers, so every epoch read the same order."""
    stage = Echo(_iterable(), 2, seed=0)
    loader = DataLoader(stage, batch_size=8, num_workers=2)
    epochs = [_xs(loader) for _ in range(3)]
    for epoch in epochs:
        assert sorted(epoch) == sorted(list(range(64)) * 2)  # it shards itself by worker
    assert len({tuple(e) for e in epochs}) == 3


@pytest.mark.parametrize("make", [_table, _iterable], ids=["map-style", "iterable"])
def test_resume_under_stateful_dataloader(make):
    def loader():
        return stateful.StatefulDataLoader(
            Echo(make(), 2, shuffle_buffer=3, seed=2), batch_size=8, num_workers=2
        )

    reference = _xs(loader())
    partial = loader()
    it = iter(partial)
    head = [int(v) for _ in range(5) for v in next(it)["x"]]
    state = partial.state_dict()
    del it
    resumed = loader()
    resumed.load_state_dict(state)
    assert head + _xs(resumed) == reference
