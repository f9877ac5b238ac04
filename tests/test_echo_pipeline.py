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
        ({"persistent_workers": True}, "persistent_workers"),
    ],
)
def test_bad_arguments_fail_early_naming_the_argument(kwargs, name):
    args = {"batch_size": 4} | kwargs
    with pytest.raises(ValueError, match=name):
        build_pipeline(read_ids(4), **args)
