"""Batch echoing gains more at larger batch sizes: per workload of the batch-size study, the
paired ratio of batch echoing's fresh examples to its baseline's (search r, or seed s, at the
same batch size), at each batch size against the next smaller, strict (lower by more than
the resolution over the baseline's median)."""

from __future__ import annotations

import itertools
import math

import pandas as pd

from analysis.claims import Claim, Part
from analysis.claims.study import Plan, StudyRuns

__all__ = ["CLAIM"]


def _ratios(study: StudyRuns, workload: str, size: object) -> tuple[pd.Series, float]:
    """Batch echoing over its baseline at ``size``, per pair key (nan where either missed),
    and the resolution over the baseline's median."""
    echo = study.values(study.select(workload, echo_point="after_batch", batch_size=size))
    rows = study.baseline(workload, size)
    base = study.values(rows)
    keys = sorted(set(echo.index) & set(base.index))
    ratio = (echo.loc[keys] / base.loc[keys]).where(base.loc[keys] < math.inf)
    finite = base[base < math.inf]
    scale = float(finite.median()) if len(finite) else math.nan
    return ratio, study.delta(rows) / scale


def decide(runs: pd.DataFrame, plan: Plan) -> list[Part]:
    """One part per workload and adjacent pair of batch sizes."""
    study = StudyRuns(runs, "batch_size", plan)
    parts = []
    for workload in study.workloads():
        rows = study.select(workload, echo_point="after_batch")
        sizes = sorted(rows["batch_size"].unique())
        for small, large in itertools.pairwise(sizes):
            x, resolution = _ratios(study, workload, large)
            y, _ = _ratios(study, workload, small)
            found = study.compare(x, y, 0.0 if math.isnan(resolution) else -resolution)
            parts.append(Part(
                f"{workload} batch {large} < batch {small}",
                found.verdict,
                f"(echo / baseline at {large}) / (at {small}) {found.describe()}",
            ))  # fmt: skip
    return parts


CLAIM = Claim(
    name="claim_batch_echo_gains_with_batch_size",
    statement="Batch echoing helps more (relative to its baseline) at each larger batch size",
    studies=("batch_size",),
    rule="per step to a larger batch: its echo / baseline ratio < the smaller's - resolution, "
    "paired sign test (searches or seeds)",
    decide=decide,
    order=70,
)
