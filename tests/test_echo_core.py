"""The framework-free echo semantics: argument checks and `echo_items`."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from stage_checks import check_echoed_multiset

from echo import ECHO_POINTS, EchoCounts, EchoPoint, check_factor, check_shuffle_buffer
from echo.core import echo_items, stage_rng


@pytest.mark.parametrize("bad", [0.5, 0, -1, math.nan, math.inf, "2", None, True, [2]])
def test_bad_factor_is_a_value_error_naming_the_argument(bad):
    with pytest.raises(ValueError, match="factor"):
        check_factor(bad)


@pytest.mark.parametrize("bad", [-1, 1.5, "8", None, False])
def test_bad_shuffle_buffer_is_a_value_error_naming_the_argument(bad):
    with pytest.raises(ValueError, match="shuffle_buffer"):
        check_shuffle_buffer(bad)


def test_echo_points_are_the_papers_three_insertion_points():
    assert ECHO_POINTS == ("before_augment", "after_augment", "after_batch")
    assert EchoPoint.parse("after_batch") is EchoPoint.AFTER_BATCH
    assert EchoPoint("before_augment") == "before_augment"
    with pytest.raises(ValueError, match="before_augment, after_augment, after_batch"):
        EchoPoint.parse("after_shuffle")


def run(source, factor, buffer, seed=0):
    counts = EchoCounts()
    out = list(echo_items(source, factor, buffer, stage_rng(seed, "t"), counts))
    return out, counts


@settings(max_examples=150, deadline=None)
@given(
    source=st.lists(st.integers(), max_size=60, unique=True),
    factor=st.one_of(st.integers(1, 5), st.floats(1.0, 5.0)),
    buffer=st.integers(0, 25),
    seed=st.integers(0, 2**16),
)
def test_output_is_exactly_the_echoed_multiset_and_counts_match(source, factor, buffer, seed):
    out, counts = run(source, factor, buffer, seed)
    check_echoed_multiset(source, out, factor)
    assert counts.fresh == len(source)
    assert counts.emitted == len(out)
    if float(factor).is_integer():
        assert len(out) == len(source) * int(factor)


@given(source=st.lists(st.integers(), max_size=40), factor=st.integers(1, 4))
def test_without_shuffle_buffer_copies_stay_adjacent_in_source_order(source, factor):
    out, _ = run(source, factor, 0)
    assert out == [item for item in source for _ in range(factor)]


@pytest.mark.parametrize("factor", [1.25, 1.5, 2.7, 3.1])
def test_fractional_factor_has_the_requested_mean(factor):
    n = 20_000
    _, counts = run(range(n), factor, 0, seed=3)
    mean = counts.emitted / counts.fresh
    p = factor - int(factor)
    stderr = math.sqrt(p * (1 - p) / n)
    assert abs(mean - factor) < 5 * stderr


def test_same_seed_same_output_other_seed_other_output():
    a, _ = run(range(500), 2.5, 32, seed=7)
    b, _ = run(range(500), 2.5, 32, seed=7)
    c, _ = run(range(500), 2.5, 32, seed=8)
    assert a == b
    assert a != c


def test_counts_are_exact_while_the_stream_is_consumed():
    counts = EchoCounts()
    stream = echo_items(range(100), 3, 0, stage_rng(0, "t"), counts)
    for emitted, _ in enumerate(stream, start=1):
        assert counts.emitted == emitted
        assert counts.fresh == math.ceil(emitted / 3)


def test_shuffle_buffer_spreads_copies_apart():
    out, _ = run(range(2000), 2, 256, seed=1)
    adjacent = sum(a == b for a, b in itertools.pairwise(out))
    assert adjacent < 20  # without the buffer all 2000 pairs would be adjacent


def test_numpy_numbers_are_accepted_and_huge_factors_refused():
    np = pytest.importorskip("numpy")
    from echo.core import MAX_FACTOR, check_int, check_seed, resolve_seed

    assert check_shuffle_buffer(np.int64(64)) == 64
    assert type(check_seed(np.uint8(3))) is int
    assert check_factor(np.float32(1.5)) == 1.5
    assert check_factor(MAX_FACTOR) == MAX_FACTOR
    with pytest.raises(ValueError, match=r"factor must be a finite number in \[1, 65536\]"):
        check_factor(2**70)
    with pytest.raises(ValueError, match="batch_size must be an integer >= 1, got 0"):
        check_int(0, "batch_size", minimum=1)
    assert resolve_seed(None) != resolve_seed(None)
    assert resolve_seed(np.int64(4)) == 4
