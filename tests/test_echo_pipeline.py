"""`build_pipeline`: echo at each insertion point with exact fresh-example accounting."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from stage_checks import check_echoed_multiset

from echo import EchoPoint
from echo.torch import build_pipeline


def read_ids(n: int) -> list[torch.Tensor]:
    return [torch.tensor([i, 0]) for i in range(n)]


def tag_augment(example: torch.Tensor, rng: np.random.Generator) -> torch.Tensor:
    """Keeps the id in column 0 and writes a random 'augmentation' draw in column 1."""
    return torch.tensor([int(example[0]), int(rng.integers(1, 2**30))])


def collect(loader) -> list[torch.Tensor]:
    return [row for batch in loader for row in batch]


@pytest.mark.parametrize("point", list(EchoPoint))
@pytest.mark.parametrize("num_workers", [0, 2])
def test_every_point_echoes_with_exact_counts(point, num_workers):
    n, factor = 96, 2
    loader = build_pipeline(
        read_ids(n),
        tag_augment,
        point=point,
        factor=factor,
        shuffle_buffer=4,
        batch_size=8,
        num_workers=num_workers,
        seed=5,
    )
    rows = collect(loader)
    check_echoed_multiset(list(range(n)), [int(r[0]) for r in rows], factor)
    assert loader.fresh_examples == n
    assert loader.steps == (2 * n // 8 if point is not EchoPoint.AFTER_BATCH else 2 * (n // 8))
    distinct_augmentations = len({(int(r[0]), int(r[1])) for r in rows})
    if point is EchoPoint.BEFORE_AUGMENT:
        assert distinct_augmentations == 2 * n  # each copy augmented anew
    else:
        assert distinct_augmentations == n  # copies identical


def test_batch_echo_repeats_whole_batches():
    loader = build_pipeline(
        read_ids(40), point="after_batch", factor=2, batch_size=10, num_workers=2
    )
    batches = list(loader)
    assert len(batches) == 8
    for first, second in zip(batches[::2], batches[1::2], strict=True):
        assert first is second


@pytest.mark.parametrize("num_workers", [0, 2])
def test_fresh_examples_are_exact_after_every_batch(num_workers):
    """Without echo or buffering, the fresh count equals the examples delivered so far."""
    loader = build_pipeline(read_ids(103), batch_size=10, num_workers=num_workers)
    delivered = 0
    for batch in loader:
        delivered += len(batch)
        assert loader.fresh_examples == delivered
    assert delivered == 103  # the tail batches are kept


def test_fresh_examples_count_reads_not_echoes_mid_stream():
    loader = build_pipeline(
        read_ids(64), point="before_augment", factor=4, batch_size=8, num_workers=2
    )
    seen: set[int] = set()
    for batch in loader:
        seen.update(int(r[0]) for r in batch)
        assert loader.fresh_examples == len(seen)  # no buffer: reads == distinct ids seen


def test_fractional_factor_through_the_pipeline():
    loader = build_pipeline(
        read_ids(400), point="after_augment", factor=1.5, batch_size=16, num_workers=2, seed=2
    )
    rows = [int(r[0]) for r in collect(loader)]
    check_echoed_multiset(list(range(400)), rows, 1.5)
    assert 1.35 < len(rows) / loader.fresh_examples < 1.65


def test_epochs_differ_and_runs_repeat():
    def epochs():
        loader = build_pipeline(
            read_ids(48),
            tag_augment,
            point="before_augment",
            factor=2,
            shuffle_buffer=8,
            batch_size=8,
            num_workers=2,
            seed=11,
        )
        return tuple(torch.cat(list(loader)).tolist() for _ in range(2)), loader.fresh_examples

    (first, second), fresh = epochs()
    assert first != second
    assert fresh == 96
    assert epochs() == ((first, second), fresh)


@pytest.mark.parametrize("point", ["after_augment", "after_batch"])
def test_resume_skips_what_was_delivered(point):
    def make():
        return build_pipeline(
            read_ids(60),
            tag_augment,
            point=point,
            factor=2,
            shuffle_buffer=3,
            batch_size=6,
            num_workers=2,
            seed=1,
        )

    full = make()
    reference = [b.tolist() for b in full]
    partial = make()
    it = iter(partial)
    head = [next(it).tolist() for _ in range(7)]
    state = partial.state_dict()
    del it
    resumed = make()
    resumed.load_state_dict(state)
    tail = [b.tolist() for b in resumed]
    assert head + tail == reference
    assert (resumed.steps, resumed.fresh_examples) == (full.steps, full.fresh_examples)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"point": "after_shuffle"}, "point"),
        ({"point": "after_batch", "factor": 0.5}, "factor"),
        ({"factor": 2.0}, "echo point"),
        ({"batch_size": 0}, "batch_size"),
        ({"num_workers": -1}, "num_workers"),
        ({"point": "after_batch", "factor": 2**70}, "factor"),
        ({"rank": 2, "world_size": 2}, "rank"),
        ({"rank": 0}, "world_size"),
        ({"persistent_workers": True}, "persistent_workers"),
    ],
)
def test_bad_arguments_fail_early_naming_the_argument(kwargs, name):
    args = {"batch_size": 4} | kwargs
    with pytest.raises(ValueError, match=name):
        build_pipeline(read_ids(4), **args)


def test_preempted_twice_resumes_where_the_first_resume_started():
    """Issue 14, item 3: state_dict() right after load_state_dict() said 0 steps into the
    epoch, so a second preemption replayed the whole epoch (40 batches instead of 25)."""

    def make():
        return build_pipeline(read_ids(40), batch_size=1, seed=4)

    reference = [b.tolist() for b in make()]
    first = make()
    it = iter(first)
    head = [next(it).tolist() for _ in range(15)]
    resumed = make()
    resumed.load_state_dict(first.state_dict())
    again = make()
    again.load_state_dict(resumed.state_dict())  # preempted before the next step
    tail = [b.tolist() for b in again]
    assert len(tail) == 25
    assert head + tail == reference


def _torchvision_augment(example, rng):
    v2 = pytest.importorskip("torchvision.transforms.v2")
    image = example[0].float() + torch.arange(64.0).reshape(1, 8, 8)
    return v2.RandomResizedCrop(4, antialias=True)(image)


def test_torchvision_augmentations_are_reproducible_in_process():
    """Issue 14, item 10: torchvision draws from torch's global generator, which only the
    DataLoader workers seeded; with num_workers=0 each run augmented differently."""

    def run(outer_seed):
        torch.manual_seed(outer_seed)
        loader = build_pipeline(read_ids(12), _torchvision_augment, batch_size=4, seed=3)
        return [b.tolist() for _ in range(2) for b in loader]

    assert run(0) == run(1)
    torch.manual_seed(5)
    list(build_pipeline(read_ids(12), _torchvision_augment, batch_size=4))
    after = torch.rand(3)
    torch.manual_seed(5)
    assert torch.equal(after, torch.rand(3))  # training's own torch draws are untouched


@pytest.mark.parametrize("num_workers", [0, 2])
def test_settings_are_one_frozen_dataclass(num_workers):
    import dataclasses

    from echo.torch import PipelineSettings

    loader = build_pipeline(read_ids(8), point="after_batch", factor=2, batch_size=4,
                            num_workers=num_workers)  # fmt: skip
    assert loader.settings == PipelineSettings(
        batch_size=4, point=EchoPoint.AFTER_BATCH, factor=2.0, num_workers=num_workers
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        loader.settings.factor = 3.0


def test_a_settings_object_builds_the_same_pipeline_as_its_fields_by_name():
    from echo.torch import PipelineSettings

    fields = {"point": "before_augment", "factor": 1.5, "shuffle_buffer": 4, "batch_size": 4}
    by_name = build_pipeline(read_ids(24), tag_augment, seed=7, **fields)
    settings = PipelineSettings(seed=7, **fields)
    given = build_pipeline(read_ids(24), tag_augment, settings=settings, pin_memory=False)
    assert given.settings == by_name.settings == settings
    assert [b.tolist() for b in given] == [b.tolist() for b in by_name]
    assert given.fresh_examples == by_name.fresh_examples == 24


def test_a_setting_beside_a_settings_object_or_no_batch_size_is_refused():
    from echo.torch import PipelineSettings

    with pytest.raises(ValueError, match=r"\['factor'\] given beside settings="):
        build_pipeline(read_ids(4), settings=PipelineSettings(batch_size=2), factor=2.0)
    with pytest.raises(TypeError, match="batch_size"):
        build_pipeline(read_ids(4), point="after_batch")


def test_numpy_integers_are_accepted_like_python_ones():
    args = {"shuffle_buffer": np.int64(2), "batch_size": np.int64(4), "seed": np.int32(1)}
    loader = build_pipeline(read_ids(8), point="after_augment", factor=np.int64(2), **args)
    assert sum(len(b) for b in loader) == 16


def test_drop_last_drops_one_partial_batch_per_worker():
    loader = build_pipeline(read_ids(30), batch_size=4, num_workers=2, drop_last=True)
    assert [len(b) for b in loader] == [4] * 6  # 15 per worker: 3 batches each, 3 dropped each
    assert loader.fresh_examples == 24  # the dropped examples never reach training


def test_a_read_that_is_not_iterable_is_refused_when_the_pipeline_is_built():
    with pytest.raises(ValueError, match=r"read must be iterable.*int 5"):
        build_pipeline(5, batch_size=2)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_one_argument_augment_is_called_with_the_example_alone(num_workers):
    loader = build_pipeline(
        read_ids(8), lambda x: x * 10, batch_size=4, shuffle=False, num_workers=num_workers
    )
    assert sorted(int(row[0]) for row in collect(loader)) == [10 * i for i in range(8)]


def test_torchvision_transforms_are_called_with_the_example_alone():
    v1 = pytest.importorskip("torchvision.transforms")
    v2 = pytest.importorskip("torchvision.transforms.v2")
    images = [torch.full((1, 6, 6), float(i)) for i in range(4)]
    for transform in (v1.CenterCrop(4), v2.CenterCrop(4), v2.Compose([v2.CenterCrop(4)])):
        batches = list(build_pipeline(images, transform, batch_size=4, shuffle=False))
        assert batches[0].shape == (4, 1, 4, 4)


def test_an_augment_with_another_signature_is_refused_before_the_first_batch():
    with pytest.raises(ValueError, match=r"augment must take \(example, rng\) or \(example\)"):
        build_pipeline(read_ids(8), lambda x, rng, size: x, batch_size=4)
    with pytest.raises(ValueError, match="augment must be a callable"):
        build_pipeline(read_ids(8), "flip", batch_size=4)


@pytest.mark.parametrize("point", list(EchoPoint))
@pytest.mark.parametrize(("factor", "num_workers"), [(2, 0), (1.5, 0), (1.5, 2)])
def test_batches_per_epoch_is_exact_for_every_point_and_epoch(point, factor, num_workers):
    loader = build_pipeline(
        read_ids(37), tag_augment, point=point, factor=factor, shuffle_buffer=3,
        batch_size=4, num_workers=num_workers, seed=2,
    )  # fmt: skip
    expected = [loader.batches_per_epoch(epoch=e) for e in range(3)]
    assert [sum(1 for _ in loader) for _ in range(3)] == expected
    assert loader.batches_per_epoch() == sum(1 for _ in loader)
    with pytest.raises(TypeError, match="sized, indexable read"):
        build_pipeline(iter(read_ids(4)), batch_size=2).batches_per_epoch()
