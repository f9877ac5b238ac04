"""Echoing can compensate for an input pipeline several times slower than training: at each
upstream ratio R > 1 of the echo_speedup benchmark, every echo case that may echo at least R
times (batch echoing at e >= R, `EchoOnStall` capped at >= R) keeps at least `KEPT` of the
steps/s of the same loop fed from memory, round by round; the paper's slowest pipeline so
compensated is `PAPER_RATIO` times slower."""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.claims import Claim, Part
from analysis.claims.benchmark import (
    by_repeat,
    permute_repeats,
    relative,
    resample_repeats,
    seconds_per,
)
from analysis.claims.rules import NO_DATA
from analysis.claims.study import Plan

__all__ = ["CLAIM", "KEPT", "PAPER_RATIO", "boundary", "compared", "null"]

KEPT = 0.90
"""The share of the from-memory steps/s that counts as compensated."""

PAPER_RATIO = 4.0
"""The paper's "an input pipeline 4x slower" (the row ``upstream_slowdown_compensated``)."""

_STEPS, _MEMORY = "steps_per_s_by_repeat", "in_memory_steps_per_s_by_repeat"


def compared(table: pd.DataFrame) -> pd.DataFrame:
    """The cases the claim is about: R > 1 and a factor (or cap) >= R."""
    ratio = table["upstream_ratio_R"].astype(float)
    return table[(ratio > 1) & (table["factor"].astype(float) >= ratio)]


def decide(table: pd.DataFrame, plan: Plan) -> list[Part]:
    """One part per R > 1 and echo case that may echo R times."""
    parts = []
    for _, row in compared(table).sort_values(["upstream_ratio_R", "mode", "factor"]).iterrows():
        name = f"R={float(row['upstream_ratio_R']):g} {row['mode']} e={float(row['factor']):g}"
        echo = by_repeat(row.get(_STEPS))
        memory = by_repeat(row.get(_MEMORY))
        if not len(echo) or len(echo) != len(memory):
            parts.append(Part(name, NO_DATA, "no rounds kept: rerun the benchmark"))
            continue
        found = relative(seconds_per(echo), seconds_per(memory), 1 / KEPT)
        text = f"steps/s over the from-memory loop's {found.describe(unit='x', invert=True)}"
        number = text.split(", reached")[0]  # the ratio and its interval
        parts.append(Part(name, found.verdict, text, found.p_against, number))
    return parts


def null(table: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    """The table at the claim's boundary: at each R, each round's steps/s shuffled among the
    compared echo cases and the loop fed from memory (nothing differs but by chance), then
    the echo cases' multiplied by `KEPT` (echoing keeps exactly `KEPT` in the median)."""
    return boundary(permute_repeats(compared(table), ["upstream_ratio_R"], [_STEPS], rng, _MEMORY))


def boundary(table: pd.DataFrame) -> pd.DataFrame:
    """The echo cases' steps/s multiplied by `KEPT`."""
    out = table.copy()
    out[_STEPS] = [";".join(f"{v * KEPT:.6g}" for v in by_repeat(c)) for c in out[_STEPS]]
    return out


CLAIM = Claim(
    name="upstream_slowdown_compensated",
    statement=f"With an upstream R times slower than training (R > 1), echoing up to R times "
    f"keeps at least {KEPT:.0%} of the steps/s of training fed from memory",
    studies=(),
    rule=f"per R and echo case with e >= R: its seconds per step < the from-memory loop's / "
    f"{KEPT:g}, paired sign test over the benchmark's interleaved rounds",
    decide=decide,
    order=120,
    table="echo_speedup",
    null=null,
    resample=lambda table, rng: resample_repeats(table, rng),
)
