"""Sharing one data loader cuts the CPU needed: at each workload and N >= 2 consumers of the
sharing benchmark, the CPU per batch received (every process of a trial) of our shared loader
against N own loaders, lower by more than `RESOLUTION`, repeat by repeat; and where the
paper's 50% cost saving (`PAPER_RATIO` of the CPU) lies against our interval."""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.claims import Claim, Part
from analysis.claims import _sharing as sharing
from analysis.claims.benchmark import place, relative
from analysis.claims.rules import Comparison
from analysis.claims.study import Plan

__all__ = ["CLAIM", "PAPER_RATIO", "RESOLUTION"]

RESOLUTION = 0.05
"""The smallest saving of CPU per batch the claim counts (5%)."""

PAPER_RATIO = 0.5
"""The paper's cost after sharing, as a share of before (the row ``cost_saving``: 50%
cheaper, by needing less CPU-side hardware)."""

_COLUMN = "cpu_ms_per_batch_received_by_repeat"


def judge(ours: np.ndarray, own: np.ndarray) -> tuple[Comparison, str]:
    """Shared's CPU per batch against own loaders', and where the paper's 0.5x lies."""
    found = relative(ours, own, 1 - RESOLUTION)
    where = place(found, PAPER_RATIO)
    text = f"CPU per batch received over own loaders' {found.describe(unit='x')}"
    text += f"; the paper's {PAPER_RATIO:g}x lies {where} our interval" if where else ""
    return found, text


def decide(table: pd.DataFrame, plan: Plan) -> list[Part]:
    """One part per workload and N >= 2."""
    return sharing.decide(table, _COLUMN, judge)


CLAIM = Claim(
    name="cost_saving",
    statement="Consumers sharing one loader need less CPU per batch than each running its own "
    "(this project's shared loader, N >= 2 consumers)",
    studies=(),
    rule=f"per workload and N: shared's CPU per batch received < {1 - RESOLUTION:g} x own "
    "loaders', paired sign test over the benchmark's interleaved repeats; the paper's 50% "
    "saving against our interval",
    decide=decide,
    order=110,
    table="sharing",
    null=sharing.null,
    resample=sharing.resample,
)
