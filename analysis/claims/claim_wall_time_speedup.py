"""With a slow upstream, echoing reaches the target in less wall time: per insertion point
and echo factor of the wall-time study (batch echoing as well as example echoing), echoing's
wall time to target against the baseline's, strict; and whether our interval of the paired
speed-up holds the paper's 3.25x at e = 5 before augmentation (`PAPER_POINT`,
`PAPER_FACTOR`)."""

from __future__ import annotations

import pandas as pd

from analysis.claims import Claim, Part
from analysis.claims.study import Plan, StudyRuns

__all__ = ["CLAIM", "PAPER_FACTOR", "PAPER_POINT", "PAPER_SPEEDUP"]

PAPER_POINT = "before_augment"
"""The insertion point of the paper's wall-time speed-up."""

PAPER_FACTOR = 5.0
"""The echo factor of the paper's wall-time speed-up."""

PAPER_SPEEDUP = 3.25
"""The paper's speed-up at `PAPER_FACTOR` (ResNet-50, R about 6; the reference table's
``wall_time_speedup``)."""


def decide(runs: pd.DataFrame, plan: Plan) -> list[Part]:
    """One part per workload, insertion point and echo factor."""
    study = StudyRuns(runs, "wall_time", plan)
    parts = []
    for workload in study.workloads():
        base = study.baseline(workload)
        wall = study.bounds(base, "wall_s_to_target")
        r = float(base["R"].median()) if len(base) else float("nan")
        rows = study.select(workload)
        echoes = rows[rows["echo_point"] != "none"].groupby(["echo_point", "echo_factor"])
        for (point, factor), echo in echoes:
            mine = study.bounds(echo, "wall_s_to_target")
            found = study.compare(mine, wall, 0.0)
            text = f"speed-up {found.describe(unit='x', invert=True)}, R {r:.1f}"
            if point == PAPER_POINT and float(factor) == PAPER_FACTOR:
                speedup = study.compare(wall, mine, 0.0)  # its ratios: baseline / echo
                holds = speedup.holds(PAPER_SPEEDUP)
                text += (
                    f"; the paper's {PAPER_SPEEDUP}x lies "
                    f"{'inside' if holds else 'outside'} our interval"
                    if holds is not None
                    else ""
                )
            name = f"{workload} {point} e={factor:g}"
            number = f"speed-up {found.headline(unit='x', invert=True)}"
            parts.append(Part(name, found.verdict, text, found.p_against, number))
    return parts


CLAIM = Claim(
    name="claim_wall_time_speedup",
    statement="With a slow upstream, echoing (at every insertion point studied) reaches the "
    "target in less wall time",
    studies=("wall_time",),
    rule="per insertion point and factor: echo's wall time < the baseline's, paired sign test "
    "both ways over seeds; the paper's 3.25x at e = 5 before augmentation against our interval",
    decide=decide,
    order=90,
    also=("wall_time_speedup", "upstream_to_downstream_ratio"),
    headline=f"imagenet_resnet {PAPER_POINT} e={PAPER_FACTOR:g}",
)
