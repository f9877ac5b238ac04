"""`echo.torch.Echo`: in-process, inside DataLoader workers, and as batch echo."""

from __future__ import annotations

import os

import pytest
import torch
from stage_checks import check_echoed_multiset
from torch.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info

from echo.torch import Echo


def ids(loader) -> list[int]:
    return [int(v) for batch in loader for v in batch]


@pytest.mark.parametrize("factor", [1, 2, 3, 1.5, 2.25])
@pytest.mark.parametrize("buffer", [0, 7])
def test_in_process_counts_and_multiset(factor, buffer):
    source = list(range(200))
    stage = Echo(source, factor, shuffle_buffer=buffer, seed=4)
    out = list(stage)
    check_echoed_multiset(source, out, factor)
    assert (stage.fresh, stage.emitted) == (200, len(out))


@pytest.mark.parametrize("bad", [{"factor": 0.9}, {"shuffle_buffer": -2}, {"seed": -1}])
def test_bad_arguments_raise_value_errors_naming_them(bad):
    args = {"factor": 2.0, "shuffle_buffer": 0, "seed": 0} | bad
    with pytest.raises(ValueError, match=next(iter(bad))):
        Echo(range(3), args.pop("factor"), **args)


@pytest.mark.parametrize("factor", [2, 1.5])
def test_dataloader_workers_read_each_item_once_and_counts_survive(factor):
    source = list(range(301))
    stage = Echo(source, factor, shuffle_buffer=5, seed=1)
    loader = DataLoader(stage, batch_size=8, num_workers=2)
    out = ids(loader)
    check_echoed_multiset(source, out, factor)
    assert stage.fresh == len(source)
    assert stage.emitted == len(out)


def test_worker_draws_are_reproducible():
    def run():
        return ids(DataLoader(Echo(range(120), 1.5, shuffle_buffer=9, seed=3), num_workers=2))

    assert run() == run()


def test_counts_accumulate_across_epochs_with_set_epoch():
    stage = Echo(list(range(40)), 2, shuffle_buffer=4, seed=0)
    loader = DataLoader(stage, batch_size=4, num_workers=2)
    orders = []
    for epoch in range(2):
        stage.set_epoch(epoch)
        orders.append(ids(loader))
    assert stage.fresh == 80
    assert stage.emitted == 160
    assert orders[0] != orders[1]  # each epoch draws its own shuffle


class _SelfSharding(IterableDataset):
    def __iter__(self):
        info = get_worker_info()
        return iter(range(info.id, 50, info.num_workers))


def test_iterable_dataset_source_is_trusted_to_shard_itself():
    out = ids(DataLoader(Echo(_SelfSharding(), 2), batch_size=5, num_workers=2))
    check_echoed_multiset(list(range(50)), out, 2)


def test_plain_iterable_source_is_split_between_workers():
    out = ids(DataLoader(Echo(iter(range(60)), 3), batch_size=5, num_workers=2))
    check_echoed_multiset(list(range(60)), out, 3)


def test_batch_echo_yields_the_same_tensor_objects_without_copying():
    batches = [torch.randn(4, 3) for _ in range(5)]
    out = list(Echo(batches, 2, shuffle=False))
    assert len(out) == 10
    for i, batch in enumerate(batches):
        assert out[2 * i] is batch and out[2 * i + 1] is batch


def test_batch_echo_after_a_dataloader():
    loader = DataLoader(list(range(32)), batch_size=4)
    stage = Echo(loader, 3, shuffle_buffer=2)
    out = list(stage)
    assert len(out) == 24
    assert stage.fresh == 8
    assert sorted(ids(out)) == sorted(list(range(32)) * 3)


class _MapStyle(Dataset):
    """A map-style dataset: iterating it directly would never end (no IndexError)."""

    def __len__(self):
        return 25

    def __getitem__(self, index):
        return index


@pytest.mark.parametrize("factor", [1, 2])
def test_map_style_dataset_is_read_by_index_in_process(factor):
    stage = Echo(_MapStyle(), factor, shuffle=False)
    assert list(stage) == [i for i in range(25) for _ in range(factor)]
    assert (stage.fresh, stage.emitted) == (25, 25 * factor)


def test_identity_stage_counts_while_iterating_and_across_epochs():
    stage = Echo(list(range(10)), 1)
    it = iter(stage)
    for expected in range(1, 4):
        next(it)
        assert (stage.fresh, stage.emitted) == (expected, expected)
    list(stage)
    assert (stage.fresh, stage.emitted) == (13, 13)


def test_batches_per_epoch_for_integer_factor_over_a_sized_source_only():
    assert Echo(range(10), 3).batches_per_epoch(4) == 8
    with pytest.raises(TypeError, match="sized, indexable source"):
        Echo(iter(range(10)), 3).batches_per_epoch(4)


@pytest.mark.parametrize(("num_workers", "buffer", "drop_last"), [(0, 0, False), (2, 5, True)])
def test_batches_per_epoch_of_a_fractional_factor_is_exact_for_each_epoch(
    num_workers, buffer, drop_last
):
    stage = Echo(list(range(101)), 1.5, shuffle_buffer=buffer, seed=3)
    expected = [stage.batches_per_epoch(4, num_workers=num_workers, drop_last=drop_last, epoch=e)
                for e in range(3)]  # fmt: skip
    loader = DataLoader(stage, batch_size=4, num_workers=num_workers, drop_last=drop_last)
    assert [sum(1 for _ in loader) for _ in range(3)] == expected
    assert len(set(expected)) > 1  # the draws differ between epochs
    assert stage.batches_per_epoch(4, num_workers=num_workers, drop_last=drop_last) == sum(
        1 for _ in loader
    )


def test_a_source_that_is_not_iterable_is_refused_when_the_stage_is_built():
    with pytest.raises(ValueError, match=r"source must be iterable.*int 5"):
        Echo(5, 2)


@pytest.mark.parametrize(("factor", "buffer"), [(2.5, 6), (1, 0)])
@pytest.mark.parametrize("stop_at", [0, 1, 37])
def test_resume_mid_epoch_continues_exactly_where_it_stopped(stop_at, factor, buffer):
    def make():
        return Echo(list(range(40)), factor, shuffle_buffer=buffer, seed=9)

    full = make()
    first_epoch = list(full)
    second_epoch = list(full)

    stage = make()
    it = iter(stage)
    head = [next(it) for _ in range(stop_at)]
    state = stage.state_dict()
    assert state["position"] == stop_at

    resumed = make()
    resumed.load_state_dict(state)
    tail = list(resumed)
    assert head + tail == first_epoch
    assert (resumed.fresh, resumed.emitted) == (40, len(first_epoch))
    assert list(resumed) == second_epoch


def test_state_after_a_finished_epoch_points_at_the_next_epoch():
    stage = Echo(list(range(10)), 2, shuffle_buffer=3)
    list(stage)
    state = stage.state_dict()
    assert state == {"epoch": 1, "position": 0, "fresh": 10, "emitted": 20, "units": state["units"]}


def test_load_state_dict_rejects_bad_state():
    with pytest.raises(ValueError, match="position"):
        Echo(range(3), 2).load_state_dict({"epoch": 0, "position": -1, "fresh": 0, "emitted": 0})


@pytest.mark.slow
def test_counts_survive_spawned_workers():
    stage = Echo(list(range(100)), 2, shuffle_buffer=3)
    loader = DataLoader(stage, batch_size=7, num_workers=2, multiprocessing_context="spawn")
    out = ids(loader)
    check_echoed_multiset(list(range(100)), out, 2)
    assert (stage.fresh, stage.emitted) == (100, 200)


def test_nothing_is_left_in_dev_shm():
    before = set(os.listdir("/dev/shm"))
    stage = Echo(list(range(50)), 2)
    ids(DataLoader(stage, batch_size=5, num_workers=2))
    del stage
    assert set(os.listdir("/dev/shm")) - before == set()


def test_seed_none_draws_one_seed_for_the_whole_stage():
    stage = Echo(list(range(50)), 1.5, shuffle_buffer=4, seed=None)
    assert isinstance(stage.seed, int)
    out = ids(DataLoader(stage, batch_size=5, num_workers=2))
    check_echoed_multiset(list(range(50)), out, 1.5)  # one seed: one permutation for all


def test_the_documented_plain_dataloader_example_augments_each_copy_anew():
    """docs/echo.md shows before-augment echoing with a plain DataLoader; run it as shown."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "echo.md").read_text()
    blocks = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "collate_fn" in b]
    assert len(blocks) == 1, "docs/echo.md shows one plain-DataLoader before-augment example"
    raw = [torch.tensor([float(i)]) for i in range(16)]
    namespace = {"raw_dataset": raw, "augment": lambda x: torch.cat([x, torch.rand(1)])}
    exec(blocks[0], namespace)
    rows = [row.tolist() for batch in namespace["loader"] for row in batch]
    copies: dict[float, list[float]] = {}
    for item, draw in rows:
        copies.setdefault(item, []).append(draw)
    assert sorted(copies) == [float(i) for i in range(16)]
    assert all(len(set(draws)) == 2 for draws in copies.values())
