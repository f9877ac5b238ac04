"""`echo.tfdata.echo`: the tf.data stage, and its agreement with the PyTorch stage."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from stage_checks import check_echoed_multiset, copy_gaps, ks_critical, ks_statistic

tf = pytest.importorskip("tensorflow")

from echo.tfdata import EchoCounter, echo  # noqa: E402
from echo.torch import Echo  # noqa: E402

pytestmark = pytest.mark.tf


def tf_ids(n: int, factor: float, buffer: int, seed: int | None, counter=None) -> list[int]:
    ds = tf.data.Dataset.range(n).apply(
        echo(factor, shuffle_buffer=buffer, seed=seed, counter=counter)
    )
    return [int(x) for x in ds.as_numpy_iterator()]


@pytest.mark.parametrize("factor", [1, 2, 3, 1.5, 2.25])
@pytest.mark.parametrize("buffer", [0, 9])
def test_counts_and_multiset(factor, buffer):
    counter = EchoCounter()
    out = tf_ids(150, factor, buffer, seed=1, counter=counter)
    check_echoed_multiset(list(range(150)), out, factor)
    assert (counter.fresh, counter.emitted) == (150, len(out))


def test_without_shuffle_copies_stay_adjacent_in_order():
    assert tf_ids(5, 3, 0, seed=0) == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4]


def test_identity_returns_the_dataset_itself():
    ds = tf.data.Dataset.range(3)
    assert ds.apply(echo(1.0)) is ds


def test_seeded_runs_repeat_and_epochs_differ():
    ds = tf.data.Dataset.range(200).apply(echo(1.5, shuffle_buffer=16, seed=4))
    first, second = (list(ds.as_numpy_iterator()) for _ in range(2))
    assert first != second
    again = tf.data.Dataset.range(200).apply(echo(1.5, shuffle_buffer=16, seed=4))
    assert list(again.as_numpy_iterator()) == first


def test_structured_elements_and_batch_echo():
    ds = tf.data.Dataset.from_tensor_slices(({"x": tf.range(12)}, tf.range(12) * 10))
    batches = list(ds.batch(4).apply(echo(2)).as_numpy_iterator())
    assert len(batches) == 6
    for a, b in zip(batches[::2], batches[1::2], strict=True):
        np.testing.assert_array_equal(a[0]["x"], b[0]["x"])
        np.testing.assert_array_equal(a[1], b[1])
    fractional = list(ds.apply(echo(1.5, seed=0)).as_numpy_iterator())
    check_echoed_multiset(list(range(12)), [int(x["x"]) for x, _ in fractional], 1.5)
    assert all(int(x["x"]) * 10 == int(y) for x, y in fractional)


@pytest.mark.parametrize(
    ("bad", "name"),
    [
        ({"factor": 0.5}, "factor"),
        ({"shuffle_buffer": -1}, "shuffle_buffer"),
        ({"seed": -3}, "seed"),
    ],
)
def test_bad_arguments(bad, name):
    args = {"factor": 2.0} | bad
    with pytest.raises(ValueError, match=name):
        echo(args.pop("factor"), **args)


def torch_ids(n: int, factor: float, buffer: int, seed: int) -> list[int]:
    return list(Echo(range(n), factor, shuffle_buffer=buffer, seed=seed, shuffle=False))


@pytest.mark.parametrize(("factor", "buffer"), [(2, 64), (1.5, 32), (3, 16)])
@pytest.mark.slow
def test_torch_and_tfdata_agree_on_counts_and_copy_gap_distribution(factor, buffer):
    n = 3000
    torch_out = torch_ids(n, factor, buffer, seed=0)
    tf_out = tf_ids(n, factor, buffer, seed=0)
    mean_copies = (len(torch_out) / n, len(tf_out) / n)
    assert abs(mean_copies[0] - mean_copies[1]) < 0.05
    if float(factor).is_integer():
        assert len(torch_out) == len(tf_out) == n * factor
    multiplicities = (Counter(Counter(torch_out).values()), Counter(Counter(tf_out).values()))
    assert set(multiplicities[0]) == set(multiplicities[1])
    gaps_torch, gaps_tf = copy_gaps(torch_out), copy_gaps(tf_out)
    statistic = ks_statistic(gaps_torch, gaps_tf)
    assert statistic < ks_critical(len(gaps_torch), len(gaps_tf)), statistic


@pytest.mark.slow
def test_gap_comparison_can_tell_different_buffers_apart():
    """The agreement test above would notice a stage that shuffled differently."""
    small, large = copy_gaps(tf_ids(3000, 2, 32, 0)), copy_gaps(torch_ids(3000, 2, 64, 0))
    assert ks_statistic(small, large) > ks_critical(len(small), len(large))


def test_variable_shape_elements_take_the_per_element_path():
    ragged = tf.data.Dataset.range(1, 5).map(lambda i: tf.range(i))
    out = [x.tolist() for x in ragged.apply(echo(2)).as_numpy_iterator()]
    assert out == [[0], [0], [0, 1], [0, 1], [0, 1, 2], [0, 1, 2], [0, 1, 2, 3], [0, 1, 2, 3]]


def test_chunked_path_gives_the_papers_flat_map_output():
    """Fixed-shape elements are chunked; the order is that of the per-element flat_map."""
    paper = tf.data.Dataset.range(1000).flat_map(
        lambda t: tf.data.Dataset.from_tensors(t).repeat(3)
    )
    assert tf_ids(1000, 3, 0, seed=5) == [int(x) for x in paper.as_numpy_iterator()]
    check_echoed_multiset(list(range(1000)), tf_ids(1000, 1.5, 0, seed=5), 1.5)


@pytest.mark.parametrize(("factor", "buffer"), [(2, 0), (3, 7), (1, 4)])
def test_cardinality_is_kept_for_integer_factors(factor, buffer):
    ds = tf.data.Dataset.range(10).batch(3).apply(echo(factor, shuffle_buffer=buffer))
    assert int(ds.cardinality()) == 4 * factor == len(list(ds))
    counted = tf.data.Dataset.range(10).apply(echo(factor, counter=EchoCounter()))
    assert int(counted.cardinality()) == 10 * factor
    fractional = tf.data.Dataset.range(10).apply(echo(1.5))
    assert int(fractional.cardinality()) == tf.data.UNKNOWN_CARDINALITY
    endless = tf.data.Dataset.range(10).repeat().apply(echo(factor))
    assert int(endless.cardinality()) == tf.data.INFINITE_CARDINALITY


@pytest.mark.parametrize("factor", [2, 1.5])
@pytest.mark.slow
def test_a_counter_on_the_chunked_path_counts_per_chunk_and_ends_exact(factor):
    counter = EchoCounter()
    # 40 chunks, expanded (and counted) in parallel: no update may be lost
    ds = tf.data.Dataset.range(10_000).apply(echo(factor, seed=1, counter=counter))
    it = ds.as_numpy_iterator()
    first = next(it)
    assert counter.fresh >= 1  # the first chunk, read at once
    rest = list(it)
    assert (counter.fresh, counter.emitted) == (10_000, len(rest) + 1)
    out = [first, *rest]
    if factor == 2:  # the parallel expansion keeps the order: copies adjacent, source order
        assert out == [i for i in range(10_000) for _ in range(2)]
    else:
        assert sorted(set(out)) == list(range(10_000))


def test_numpy_and_none_seeds_agree_with_the_torch_stage():
    np_seed = tf_ids(50, 1.5, 4, seed=np.int64(3))
    assert np_seed == tf_ids(50, 1.5, 4, seed=3)
    assert Echo(range(5), 2, seed=None).seed >= 0
    check_echoed_multiset(list(range(50)), tf_ids(50, 1.5, 4, seed=None), 1.5)
