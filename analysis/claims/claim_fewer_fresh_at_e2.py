"""Echoing at e = 2 (before augmentation) needs fewer fresh examples than the baseline, on
every workload: per workload, the insertion study's e = 2 before augmentation against its
baseline, strict (a pair within the resolution of "no difference" is a tie)."""

from __future__ import annotations

import pandas as pd

from analysis.claims import Claim, Part
from analysis.claims.study import Plan, StudyRuns

__all__ = ["CLAIM"]


def decide(runs: pd.DataFrame, plan: Plan) -> list[Part]:
    """One part per workload of the insertion study."""
    study = StudyRuns(runs, "insertion", plan)
    parts = []
    for workload in study.workloads():
        base = study.baseline(workload)
        echo = study.select(workload, echo_point="before_augment", echo_factor=2.0)
        found = study.compare(echo, base, 0.0, tie=study.delta(base))
        text, number = f"e=2 / baseline {found.describe()}", f"e=2 / baseline {found.headline()}"
        parts.append(Part(workload, found.verdict, text, found.p_against, number))
    return parts


CLAIM = Claim(
    name="claim_fewer_fresh_at_e2",
    statement="Echoing at e = 2 (before augmentation) reaches the target with fewer fresh "
    "examples than the baseline, for every workload",
    studies=("insertion",),
    rule="per workload: e=2 < baseline, a pair within the resolution tied, paired sign test "
    "both ways (searches or seeds)",
    decide=decide,
    order=10,
    headline="imagenet_resnet",
)
