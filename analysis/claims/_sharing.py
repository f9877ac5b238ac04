"""What the claims on shared loading read from the ``sharing`` benchmark's table: per
workload and number of consumers N >= 2, our shared loader's repeats against every consumer
running its own loader, repeat by repeat."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pandas as pd

from analysis.claims import Part
from analysis.claims.benchmark import by_repeat, permute_repeats, resample_repeats
from analysis.claims.rules import NO_DATA, Comparison

__all__ = ["BASE", "COLUMNS", "KEYS", "MODE", "decide", "null", "pairs", "resample"]

MODE = "shared"
"""The loading mode the claims are decided on: this project's `sharing.Producer`."""

BASE = "own"
"""What it is compared with: every consumer runs its own DataLoader."""

KEYS = ["workload", "consumers"]
"""A group of modes compared with one another."""

COLUMNS = ["aggregate_batches_per_s_by_repeat", "cpu_ms_per_batch_received_by_repeat"]
"""A trial's measured values per repeat (moved together under the null)."""


def pairs(table: pd.DataFrame, column: str) -> Iterator[tuple[str, int, np.ndarray, np.ndarray]]:
    """``(workload, N, ours, own)``: ``column``'s repeats (a ``*_by_repeat`` column) of `MODE`
    and of `BASE` at each workload and N >= 2 where the table has both (empty arrays when the
    table kept no repeats)."""
    for (workload, consumers), rows in table.groupby(KEYS, sort=True):
        if int(consumers) < 2:
            continue
        mine, base = rows[rows["mode"] == MODE], rows[rows["mode"] == BASE]
        if len(mine) != 1 or len(base) != 1:
            continue
        cells = (mine[column].iloc[0], base[column].iloc[0]) if column in rows else (None,) * 2
        yield str(workload), int(consumers), by_repeat(cells[0]), by_repeat(cells[1])


def decide(
    table: pd.DataFrame,
    column: str,
    judge: Callable[[np.ndarray, np.ndarray], tuple[Comparison, str]],
) -> list[Part]:
    """One part per workload and N >= 2 (`pairs` of ``column``): ``judge(ours, own)`` gives
    its comparison and text; a table that kept no repeats gives a part without data."""
    parts = []
    for workload, consumers, ours, own in pairs(table, column):
        name = f"{workload} N={consumers}"
        if not len(ours) or len(ours) != len(own):
            parts.append(Part(name, NO_DATA, "no repeats kept: rerun the benchmark"))
            continue
        found, text = judge(ours, own)
        number = text.split(", reached")[0]  # the ratio and its interval
        parts.append(Part(name, found.verdict, text, found.p_against, number))
    return parts


def null(table: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    """The table under "sharing changes nothing": at each workload and N, each repeat's
    values shuffled between `MODE` and `BASE` (the other modes left out)."""
    compared = table[table["mode"].isin([MODE, BASE])]
    return permute_repeats(compared, KEYS, [c for c in COLUMNS if c in table], rng)


def resample(table: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    """The table's repeats drawn with replacement (`resample_repeats`)."""
    return resample_repeats(table, rng)
