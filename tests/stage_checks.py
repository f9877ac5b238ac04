"""Checks any echo stage must pass, shared by the PyTorch and tf.data tests."""

from __future__ import annotations

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
