"""Echoing before augmentation needs at most as many fresh examples as after augmentation,
which needs at most as many as batch echoing: per workload of the insertion study, each
adjacent pair of the points it has, "at most" (by the resolution, not more)."""

from __future__ import annotations

import itertools

import pandas as pd

from analysis.claims import Claim, Part
from analysis.claims.study import Plan, StudyRuns, resolution_of, shift_fresh

__all__ = ["CLAIM", "ORDER", "boundary"]

ORDER = ("before_augment", "after_augment", "after_batch")
"""The insertion points from the most saving to the least, as the paper orders them."""


def boundary(runs: pd.DataFrame) -> pd.DataFrame:
    """Each point at its claim's boundary: per workload, a point needs one resolution more
    than the next point of `ORDER` it has (so each adjacent pair is just "more")."""
    out = runs
    study = runs["study"] == "insertion"
    for workload in runs.loc[study, "workload"].unique():
        mine = study & (runs["workload"] == workload)
        present = [p for p in ORDER if (mine & (runs["echo_point"] == p)).any()]
        for rank, point in enumerate(present):
            rows = mine & (runs["echo_point"] == point)
            out = shift_fresh(out, rows, (len(present) - 1 - rank) * resolution_of(runs))
    return out


def decide(runs: pd.DataFrame, plan: Plan) -> list[Part]:
    """One part per workload and adjacent pair of its points."""
    study = StudyRuns(runs, "insertion", plan)
    parts = []
    for workload in study.workloads():
        base = study.baseline(workload)
        points = [p for p in ORDER if len(study.select(workload, echo_point=p, echo_factor=2.0))]
        for better, worse in itertools.pairwise(points):
            x = study.select(workload, echo_point=better, echo_factor=2.0)
            y = study.select(workload, echo_point=worse, echo_factor=2.0)
            found = study.compare(x, y, study.delta(base))
            shown = (study.compare(x, base, 0.0), study.compare(y, base, 0.0))
            parts.append(Part(
                f"{workload} {better} <= {worse}",
                found.verdict,
                f"{better} / baseline {shown[0].summary()}; {worse} / baseline "
                f"{shown[1].summary()}; {better} at most {worse}: {found.tally()}",
                found.p_against,
                f"{better} / {worse} {found.headline()}",
            ))  # fmt: skip
    return parts


CLAIM = Claim(
    name="claim_insertion_order",
    statement="Echoing before augmentation needs at most as many fresh examples as after "
    "augmentation, which needs at most as many as batch echoing",
    studies=("insertion",),
    rule="per workload and adjacent points: x < y + resolution, paired sign test both ways "
    "(searches or seeds)",
    decide=decide,
    order=30,
    boundary=boundary,
)
