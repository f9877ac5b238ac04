"""Sharing one data loader raises the training throughput of collocated processes: at each
workload and N >= 2 consumers of the sharing benchmark, the aggregate batches/s of our shared
loader against N own loaders, faster by more than `RESOLUTION`, repeat by repeat; and where
the paper's "up to 2x" (`PAPER_SPEEDUP`) lies against our interval."""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.claims import Claim, Part
from analysis.claims import _sharing as sharing
from analysis.claims.benchmark import place, relative, seconds_per
from analysis.claims.rules import Comparison
from analysis.claims.study import Plan

__all__ = ["CLAIM", "PAPER_SPEEDUP", "RESOLUTION"]

RESOLUTION = 0.05
"""The smallest gain in aggregate throughput the claim counts (5%)."""

PAPER_SPEEDUP = 2.0
"""The paper's largest gain: throughput up to 100% higher (the row ``throughput_increase``)."""

_COLUMN = "aggregate_batches_per_s_by_repeat"


def judge(ours: np.ndarray, own: np.ndarray) -> tuple[Comparison, str]:
    """Shared's seconds per batch against own loaders', and where the paper's 2x lies."""
    found = relative(seconds_per(ours), seconds_per(own), 1 - RESOLUTION)
    where = place(found, PAPER_SPEEDUP, invert=True)
    text = f"aggregate batches/s over own loaders' {found.describe(unit='x', invert=True)}"
    text += f"; the paper's up to {PAPER_SPEEDUP:g}x lies {where} our interval" if where else ""
    return found, text


def decide(table: pd.DataFrame, plan: Plan) -> list[Part]:
    """One part per workload and N >= 2."""
    return sharing.decide(table, _COLUMN, judge)


CLAIM = Claim(
    name="throughput_increase",
    statement="Consumers sharing one loader train faster in aggregate than each running its "
    "own (this project's shared loader, N >= 2 consumers)",
    studies=(),
    rule=f"per workload and N: shared's seconds per batch < {1 - RESOLUTION:g} x own loaders', "
    "paired sign test over the benchmark's interleaved repeats; the paper's up to 2x against "
    "our interval",
    decide=decide,
    order=100,
    table="sharing",
    null=sharing.null,
    resample=sharing.resample,
)
