"""Checks any echo stage must pass, shared by the PyTorch and tf.data tests."""

from __future__ import annotations

import copy
import itertools
from collections import Counter, defaultdict
from collections.abc import Sequence

import numpy as np


def copies_per_item(source: Sequence[int], output: Sequence[int]) -> Counter:
    """How many times each source item appears in ``output``; fails on invented items."""
    counts = Counter(output)
    invented = set(counts) - set(source)
    assert not invented, f"items never read appear in the output: {sorted(invented)[:5]}"
    return counts


def check_echoed_multiset(source: Sequence[int], output: Sequence[int], factor: float) -> None:
    """Every source item appears floor(factor) or floor(factor)+1 times (exactly factor when
    it is an integer), and nothing else appears."""
    counts = copies_per_item(source, output)
    low = int(factor)
    high = low if float(factor).is_integer() else low + 1
    for item in source:
        assert low <= counts[item] <= high, f"item {item} appeared {counts[item]} times"


def copy_gaps(output: Sequence[int]) -> np.ndarray:
    """Distances in the output between consecutive copies of the same item."""
    last: dict[int, int] = {}
    gaps: defaultdict[int, list[int]] = defaultdict(list)
    for position, item in enumerate(output):
        if item in last:
            gaps[item].append(position - last[item])
        last[item] = position
    return np.array([g for item_gaps in gaps.values() for g in item_gaps])


def ks_statistic(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sample Kolmogorov-Smirnov statistic."""
    grid = np.union1d(a, b)
    cdf_a = np.searchsorted(np.sort(a), grid, side="right") / len(a)
    cdf_b = np.searchsorted(np.sort(b), grid, side="right") / len(b)
    return float(np.max(np.abs(cdf_a - cdf_b)))


def ks_critical(n: int, m: int, alpha_coefficient: float = 1.95) -> float:
    """KS rejection threshold (1.95 is alpha = 0.001)."""
    return alpha_coefficient * np.sqrt((n + m) / (n * m))


def _plain(item):
    """Items as comparable Python values (tensors as nested lists)."""
    return item.tolist() if hasattr(item, "tolist") else item


def check_save_load_state(make, stop_at: int, more: int = 3, epochs: int = 2) -> None:
    """The resume contract every stateful echo stage keeps (after torchdata's
    ``run_test_save_load_state``).

    ``make()`` builds a fresh stage; each ``iter(stage)`` is one epoch. The check stops an
    epoch after ``stop_at`` items, saves ``state_dict()``, resumes in a new stage, saves again
    at once (a second preemption before any step), resumes again, takes ``more`` items, is
    preempted a third time, and finishes: the items joined up must equal an uninterrupted
    run's, later epochs too, and the final state must equal the uninterrupted one's.
    """
    from echo.state import STATE_KEYS

    reference_stage = make()
    reference = [[_plain(x) for x in reference_stage] for _ in range(epochs)]
    stage = make()
    it = iter(stage)
    got = [_plain(next(it)) for _ in range(stop_at)]
    state = stage.state_dict()
    assert set(STATE_KEYS) <= set(state), state
    assert state["position"] == stop_at, state
    del it
    resumed = make()
    resumed.load_state_dict(copy.deepcopy(state))
    assert resumed.state_dict() == state, "state right after load_state_dict must be the loaded one"
    again = make()
    again.load_state_dict(resumed.state_dict())
    it = iter(again)
    got += [_plain(x) for x in itertools.islice(it, more)]
    state = again.state_dict()
    assert state["position"] == min(stop_at + more, len(reference[0])), state
    del it
    last = make()
    last.load_state_dict(state)
    got += [_plain(x) for x in last]
    assert got == reference[0]
    for expected in reference[1:]:
        assert [_plain(x) for x in last] == expected
    assert last.state_dict() == reference_stage.state_dict()
