"""`Echo` in a training loop: epochs without help, source order, length, one-shot sources."""

from __future__ import annotations

import pytest
from torch.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info

from echo.torch import Echo, build_pipeline


def first_batches(loader, epochs=3):
    return [next(iter(loader)).tolist() for _ in range(epochs)]


@pytest.mark.parametrize("persistent", [False, True])
def test_epochs_advance_without_set_epoch(persistent):
    """Issue 14, item 4: Lightning never calls the dataset's set_epoch; with non-persistent
    workers every epoch began with the same batch."""
    stage = Echo(list(range(64)), 2, shuffle_buffer=8, seed=3)
    loader = DataLoader(stage, batch_size=8, num_workers=2, persistent_workers=persistent)
    epochs = [[b.tolist() for b in loader] for _ in range(3)]
    assert len({str(e[0]) for e in epochs}) == 3
    assert stage.epoch == 3
    assert (stage.fresh, stage.emitted) == (3 * 64, 3 * 128)


def test_set_epoch_reaches_persistent_workers():
    def run(epoch):
        stage = Echo(list(range(64)), 2, shuffle_buffer=8, seed=3)
        loader = DataLoader(stage, batch_size=8, num_workers=2, persistent_workers=True)
        list(loader)
        stage.set_epoch(epoch)
        return [b.tolist() for b in loader]

    fresh_stage = Echo(list(range(64)), 2, shuffle_buffer=8, seed=3)
    fresh_stage.set_epoch(5)
    expected = [b.tolist() for b in DataLoader(fresh_stage, batch_size=8, num_workers=2)]
    assert run(5) == expected


class _EpochAware(IterableDataset):
    """An iterable source with its own set_epoch (like an HF IterableDataset)."""

    def __init__(self):
        self.epoch = -1

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info else (0, 1)
        return iter([self.epoch * 100 + i for i in range(worker, 20, workers)])


@pytest.mark.parametrize("num_workers", [0, 2])
def test_the_epoch_is_forwarded_to_a_source_with_set_epoch(num_workers):
    loader = DataLoader(Echo(_EpochAware(), 2), batch_size=5, num_workers=num_workers)
    seen = [{int(v) // 100 for b in loader for v in b} for _ in range(3)]
    assert seen == [{0}, {1}, {2}]


class _ClassSorted(Dataset):
    """An ImageFolder-like dataset: 10 classes of 100 examples, stored class by class."""

    def __len__(self):
        return 1000

    def __getitem__(self, index):
        return index // 100


@pytest.mark.parametrize("buffer", [0, 64])
@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_class_sorted_source_is_read_in_a_new_order_each_epoch(buffer, num_workers):
    """Issue 14, item 5: the source order was never shuffled (1.4 classes per batch)."""
    stage = Echo(_ClassSorted(), 2, shuffle_buffer=buffer, seed=0)
    loader = DataLoader(stage, batch_size=64, num_workers=num_workers)
    epochs = [[b.tolist() for b in loader] for _ in range(2)]
    classes = [len(set(batch)) for batch in epochs[0][:-2]]
    assert sum(classes) / len(classes) >= 9
    assert epochs[0] != epochs[1]
    unshuffled = Echo(_ClassSorted(), 2, shuffle=False)
    assert list(unshuffled)[:4] == [0, 0, 0, 0]


def test_dataloader_length_is_refused_and_batches_per_epoch_is_exact():
    """Issue 14, item 6: each worker emits its own partial batch: len said 9, 10 came."""
    stage = Echo(list(range(90)), 1, seed=0)
    loader = DataLoader(stage, batch_size=10, num_workers=2)
    with pytest.raises(TypeError, match="batches_per_epoch"):
        len(loader)
    assert stage.batches_per_epoch(10, num_workers=2) == len(list(loader)) == 10
    dropped = DataLoader(stage, batch_size=10, num_workers=2, drop_last=True)
    assert stage.batches_per_epoch(10, num_workers=2, drop_last=True) == len(list(dropped)) == 8


def test_a_generator_source_refuses_a_second_epoch():
    """Issue 14, item 9: the second epoch over a generator was silently empty."""
    stage = Echo((i for i in range(10)), 2)
    assert len(list(stage)) == 20
    with pytest.raises(RuntimeError, match="one-shot"):
        list(stage)
    loader = build_pipeline((i for i in range(10)), batch_size=4)
    assert sum(len(b) for b in loader) == 10
    with pytest.raises(RuntimeError, match="one-shot"):
        list(loader)


def test_a_map_style_dataset_without_len_is_refused():
    class NoLen(Dataset):
        def __getitem__(self, index):
            return index

    with pytest.raises(ValueError, match="__len__"):
        Echo(NoLen(), 2)
    with pytest.raises(ValueError, match="__len__"):
        build_pipeline(NoLen(), batch_size=2)


def test_the_worker_table_answers_the_same_before_and_after_workers_take_rows():
    """Without workers the table skips its scan (a pass-through stage's epoch start); its
    answers must match what a scan of the rows gives once a worker has run."""
    from echo.torch.counters import WorkerCountTable

    def answers():
        total = table.total()
        return table.next_epoch(), total.fresh, total.emitted, table.any_active()

    table = WorkerCountTable()
    assert answers() == (0, 0, 0, False)
    table.set_epoch(5)
    assert table.next_epoch() == 5
    row = table.row(3)  # as a DataLoader worker does, in its process
    assert table.next_epoch() == 5
    row.next_epoch, row.active, row.fresh, row.emitted = 6, True, 10, 20
    assert answers() == (6, 10, 20, True)
    table.reset(2)
    assert answers() == (2, 0, 0, False)
    stage = Echo(list(range(8)), 1, shuffle=False)
    stage.set_epoch(4)
    list(stage)
    assert (stage.epoch, stage.fresh, stage.emitted) == (5, 8, 8)
