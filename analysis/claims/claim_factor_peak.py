"""Echoing's gains peak at a moderate echo factor, yet e = 16 still beats the baseline: per
workload and echo point of the echo-factor study, e = 16 against the baseline (strict), and
the moderate factor with the fewest fresh examples (by median, of `MODERATE`) against
e = 16 (strict: the gains turned after it); a pair within the resolution of "no difference" is
a tie."""

from __future__ import annotations

import pandas as pd

from analysis.claims import Claim, Part
from analysis.claims.study import Plan, StudyRuns

__all__ = ["CLAIM", "MODERATE", "moderate_best"]

MODERATE = (4.0, 8.0)
"""The factors the paper calls moderate."""


def moderate_best(study: StudyRuns, rows: pd.DataFrame) -> tuple[float, pd.DataFrame] | None:
    """The factor of `MODERATE` whose runs' median fresh examples to target is lowest
    (unreached runs counting as worst), and its rows; None when none was run."""
    best = None
    for factor in MODERATE:
        chosen = rows[rows["echo_factor"] == factor]
        if len(chosen):
            median = float(study.values(chosen).median())
            if best is None or median < best[0]:
                best = (median, factor, chosen)
    return None if best is None else (best[1], best[2])


def decide(runs: pd.DataFrame, plan: Plan) -> list[Part]:
    """Two parts per workload and echo point with e = 16."""
    study = StudyRuns(runs, "echo_factor", plan)
    parts = []
    for workload in study.workloads():
        base = study.baseline(workload)
        delta = study.delta(base)
        for point in ("before_augment", "after_augment"):
            rows = study.select(workload, echo_point=point)
            e16 = rows[rows["echo_factor"] == 16.0]
            best = moderate_best(study, rows)
            if not len(e16) or best is None:
                continue
            factor, moderate = best
            beats = study.compare(e16, base, 0.0, tie=delta)
            peak = study.compare(moderate, e16, 0.0, tie=delta)
            parts.append(Part(f"{workload} {point} e=16 < baseline", beats.verdict,
                              f"e=16 / baseline {beats.describe()}", beats.p_against,
                              f"e=16 / baseline {beats.headline()}"))  # fmt: skip
            parts.append(Part(f"{workload} {point} moderate < e=16", peak.verdict,
                              f"e={factor:g} / e=16 {peak.describe()}", peak.p_against,
                              f"e={factor:g} / e=16 {peak.headline()}"))  # fmt: skip
    return parts


CLAIM = Claim(
    name="claim_factor_peak",
    statement="Gains peak at a moderate e (4 or 8), yet e = 16 still beats the baseline",
    studies=("echo_factor",),
    rule="per point: e=16 < baseline, and the better of e=4 and e=8 (by median) < e=16, a "
    "pair within the resolution tied, paired sign tests both ways (searches or seeds)",
    decide=decide,
    order=60,
)
