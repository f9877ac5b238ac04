"""Batch echoing gains more at larger batch sizes: per workload of the batch-size study, the
paired ratio of batch echoing's fresh examples to its baseline's (search r, or seed s, at the
same batch size), at each batch size against the next smaller, strict (a pair within the
resolution over the baseline's median of "no difference" is a tie). A search that missed the
target is censored at its cap, so a ratio with it is bounded (`analysis.claims.study.Bounds`)."""

from __future__ import annotations

import itertools
import math

import pandas as pd

from analysis.claims import Claim, Part
from analysis.claims.study import Bounds, Plan, StudyRuns

__all__ = ["CLAIM"]


def _ratios(study: StudyRuns, workload: str, size: object) -> tuple[Bounds, float]:
    """Batch echoing over its baseline at ``size``, per pair key (bounded where either
    missed), and the resolution over the baseline's median."""
    echo = study.bounds(study.select(workload, echo_point="after_batch", batch_size=size))
    rows = study.baseline(workload, size)
    ratio = echo / study.bounds(rows)
    base = study.values(rows)
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
            tie = 0.0 if math.isnan(resolution) else resolution
            found = study.compare(x, y, 0.0, tie=tie)
            parts.append(Part(
                f"{workload} batch {large} < batch {small}",
                found.verdict,
                f"(echo / baseline at {large}) / (at {small}) {found.describe()}, a gap within "
                f"{tie:.3f} tied",
                found.p_against,
                f"(echo / baseline at {large}) / (at {small}) {found.headline()}",
            ))  # fmt: skip
    return parts


CLAIM = Claim(
    name="claim_batch_echo_gains_with_batch_size",
    statement="Batch echoing helps more (relative to its baseline) at each larger batch size",
    studies=("batch_size",),
    rule="per step to a larger batch: its echo / baseline ratio < the smaller's, a pair "
    "within the resolution tied, paired sign test both ways (searches or seeds)",
    decide=decide,
    order=70,
)
