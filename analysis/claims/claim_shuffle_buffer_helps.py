"""A larger shuffle buffer after the echo stage reduces the fresh examples to target: per
workload and echo point of the shuffle-buffer study, every step from one buffer to the next
larger, strict (a pair within the resolution of "no difference" is a tie)."""

from __future__ import annotations

import itertools

import pandas as pd

from analysis.claims import Claim, Part
from analysis.claims.study import Plan, StudyRuns

__all__ = ["CLAIM"]


def decide(runs: pd.DataFrame, plan: Plan) -> list[Part]:
    """One part per workload, echo point and adjacent pair of buffers."""
    study = StudyRuns(runs, "shuffle_buffer", plan)
    parts = []
    for workload in study.workloads():
        for point in ("after_augment", "after_batch"):
            rows = study.select(workload, echo_point=point)
            buffers = sorted(rows["shuffle_buffer"].unique())
            for small, large in itertools.pairwise(buffers):
                x = rows[rows["shuffle_buffer"] == large]
                y = rows[rows["shuffle_buffer"] == small]
                found = study.compare(x, y, 0.0, tie=study.delta(rows))
                parts.append(Part(
                    f"{workload} {point} buffer {large} < {small}",
                    found.verdict,
                    f"fresh, buffer {large} / buffer {small} {found.describe()}",
                    found.p_against,
                    f"buffer {large} / {small} {found.headline()}",
                ))  # fmt: skip
    return parts


CLAIM = Claim(
    name="claim_shuffle_buffer_helps",
    statement="Each larger shuffle buffer after the echo stage reduces fresh examples to target",
    studies=("shuffle_buffer",),
    rule="per point and each step to a larger buffer: larger < smaller, a pair within the "
    "resolution tied, paired sign test both ways over seeds",
    decide=decide,
    order=50,
)
