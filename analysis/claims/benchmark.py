"""Claims decided from a benchmark's table rather than from run records.

A benchmark row holds, beside its medians, one value per repeat of what the claims compare
(``<column>_by_repeat``: ``"96.5;97.1;95.8"``, written by ``benchmarks.common.join_repeats``).
Repeats are interleaved (repeat ``i`` of every case runs before repeat ``i + 1`` of any), so
repeat ``i`` of one case pairs with repeat ``i`` of another, as search ``r`` pairs with
search ``r`` in a tuned study; the claims decide them by the same paired sign test
(`analysis.claims.rules`).

Calibrating such a claim needs its table drawn under the null and resampled:

* `permute_repeats`: within each group of cases that a claim compares (rows sharing
  ``keys``), each repeat's values are shuffled among the cases (one value per case per
  repeat, the columns of a case moving together), so no case differs from another but by
  chance, while the repeats' drift and noise stay;
* `resample_repeats`: repeats drawn with replacement, one draw for the whole table, so pairs
  stay pairs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from analysis.claims.rules import Comparison, compare

__all__ = [
    "SUFFIX",
    "by_repeat",
    "permute_repeats",
    "place",
    "relative",
    "resample_repeats",
    "seconds_per",
]

SUFFIX = "_by_repeat"
"""The suffix of a column holding one value per repeat."""


def by_repeat(cell: object) -> np.ndarray:
    """One ``*_by_repeat`` cell as its values, in the order the repeats ran (empty when the
    cell is missing: a table written before repeats were kept).

    Args:
        cell: ``"96.5;97.1"``, a number (one repeat), or nan / None / ``""``.
    """
    if cell is None or (isinstance(cell, float) and np.isnan(cell)) or cell == "":
        return np.array([], dtype=float)
    return np.array([float(v) for v in str(cell).split(";")], dtype=float)


def seconds_per(rates: np.ndarray) -> np.ndarray:
    """Rates (per second) as seconds per item, lower better: a rate of 0 (a trial that
    delivered nothing) is ``inf``, which the rule counts as a run that missed."""
    with np.errstate(divide="ignore"):
        return np.where(rates > 0, 1.0 / np.where(rates > 0, rates, 1.0), math.inf)


def relative(x: np.ndarray, y: np.ndarray, factor: float) -> Comparison:
    """Decide ``x < factor * y`` repeat by repeat (lower better: seconds, CPU), by the paired
    sign test of `analysis.claims.rules.compare`, its ratios those of ``x / y``.

    Args:
        x: One value per repeat of the case the claim is about.
        y: The same repeats of the case it is compared with.
        factor: Below 1, a claim that ``x`` is lower, a repeat within ``factor`` of "no
            difference" either way (``x / y`` between ``factor`` and ``1 / factor``) a tie;
            above 1, that it is higher by at most ``factor - 1``.

    Returns:
        The `Comparison` (no pairs: `NO_DATA`).

    Raises:
        ValueError: ``x`` and ``y`` hold different numbers of repeats.
    """
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if factor < 1:  # on the log scale: "no difference" is 0, the tie band |log(x / y)| <= -log f
        with np.errstate(divide="ignore"):
            found = compare(np.log(a), np.log(b), 0.0, tie=-math.log(factor))
    else:
        found = compare(a, b * factor)
    both = np.isfinite(a) & np.isfinite(b) & (b != 0)
    return dataclasses.replace(found, ratios=tuple(sorted((a[both] / b[both]).tolist())))


def place(found: Comparison, value: float, invert: bool = False) -> str:
    """Where the paper's ``value`` lies against our interval of the ratios (``invert``: of
    their inverses, e.g. a speed-up): ``inside``, ``below`` or ``above`` it, or ``""``
    without an interval."""
    low, high = found.interval
    if math.isnan(low):
        return ""
    if invert:
        low, high = 1 / high, 1 / low
    return "inside" if low <= value <= high else ("below" if value < low else "above")


def _join(values: np.ndarray) -> str:
    return ";".join(f"{float(v):.6g}" for v in values)


def _matrix(table: pd.DataFrame, column: str) -> np.ndarray:
    """``column`` as a rows x repeats matrix."""
    rows = [by_repeat(cell) for cell in table[column]]
    sizes = {len(r) for r in rows}
    if len(sizes) > 1:
        raise ValueError(f"{column}: rows hold different numbers of repeats: {sorted(sizes)}")
    return np.vstack(rows) if rows and sizes != {0} else np.empty((len(rows), 0))


def permute_repeats(
    table: pd.DataFrame,
    keys: Sequence[str],
    columns: Sequence[str],
    rng: np.random.Generator,
    extra: str | None = None,
) -> pd.DataFrame:
    """``table`` with each repeat's values shuffled among the rows of each group.

    Args:
        table: A benchmark table with the ``*_by_repeat`` ``columns``.
        keys: The columns whose values make a group of cases compared with one another
            (e.g. ``["workload", "consumers"]``: the loading modes at one N).
        columns: The ``*_by_repeat`` columns of one case, moved together.
        rng: The generator that draws the permutations.
        extra: A ``*_by_repeat`` column holding one more case per group, the same in every
            row of it (e.g. ``in_memory_steps_per_s_by_repeat``, the loop fed from memory,
            which every echo case is compared with); only with one of ``columns``. Default
            None.

    Returns:
        A copy with the permuted cells.

    Raises:
        ValueError: ``extra`` with several ``columns``, or rows with different numbers of
            repeats.
    """
    if extra is not None and len(columns) != 1:
        raise ValueError(f"extra needs exactly one of columns, got {list(columns)}")
    out = table.copy()
    for index in table.groupby(list(keys), sort=False).indices.values():
        rows = table.iloc[index]
        cases = np.stack([_matrix(rows, c) for c in columns], axis=-1)  # case x repeat x col
        if extra is not None:
            cases = np.concatenate([cases, _matrix(rows.iloc[:1], extra)[..., None]])
        for repeat in range(cases.shape[1]):
            cases[:, repeat] = cases[rng.permutation(len(cases)), repeat]
        for k, column in enumerate(columns):
            out.iloc[index, out.columns.get_loc(column)] = [
                _join(values) for values in cases[: len(rows), :, k]
            ]
        if extra is not None:
            out.iloc[index, out.columns.get_loc(extra)] = _join(cases[-1, :, 0])
    return out


def resample_repeats(table: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    """``table`` with its repeats drawn with replacement: one draw for every row and every
    ``*_by_repeat`` column, so repeat ``i`` of one case still pairs with repeat ``i`` of
    another.

    Args:
        table: A benchmark table.
        rng: The generator that draws the repeats.

    Returns:
        A copy with the resampled cells (the table as it is when it holds no repeats).

    Raises:
        ValueError: Rows with different numbers of repeats.
    """
    columns = [c for c in table.columns if c.endswith(SUFFIX)]
    matrices = {c: _matrix(table, c) for c in columns}
    sizes = {m.shape[1] for m in matrices.values()}
    if len(sizes) > 1:
        raise ValueError(f"the table's columns hold different numbers of repeats: {sizes}")
    n = sizes.pop() if sizes else 0
    out = table.copy()
    if not n:
        return out
    drawn = rng.integers(0, n, size=n)
    for column, matrix in matrices.items():
        out[column] = [_join(values) for values in matrix[:, drawn]]
    return out
