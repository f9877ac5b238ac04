"""For the Transformer on LM1B the best echo factor lies between 4 and 8: the echo-factor
study's before-augmentation sweep of ``lm1b_transformer``, the better of e = 4 and e = 8 (by
median) against e = 2 and against e = 16 (strict), and which factor has the lowest median."""

from __future__ import annotations

import pandas as pd

from analysis.claims import Claim, Part
from analysis.claims.claim_factor_peak import moderate_best
from analysis.claims.study import Plan, StudyRuns

__all__ = ["CLAIM", "WORKLOAD"]

WORKLOAD = "lm1b_transformer"
"""The workload standing in for the Transformer on LM1B."""


def decide(runs: pd.DataFrame, plan: Plan) -> list[Part]:
    """Two parts: the best moderate factor against e = 2 and against e = 16."""
    study = StudyRuns(runs, "echo_factor", plan)
    if WORKLOAD not in study.workloads():
        return []
    rows = study.select(WORKLOAD, echo_point="before_augment")
    best = moderate_best(study, rows)
    if best is None:
        return []
    factor, moderate = best
    medians = {
        float(f): float(study.values(group).median()) for f, group in rows.groupby("echo_factor")
    }
    lowest = min(medians, key=medians.get)
    delta = study.delta(study.baseline(WORKLOAD))
    parts = []
    for other in (2.0, 16.0):
        against = rows[rows["echo_factor"] == other]
        found = study.compare(moderate, against, 0.0, tie=delta)
        parts.append(Part(
            f"{WORKLOAD} e={factor:g} < e={other:g}",
            found.verdict,
            f"e={factor:g} / e={other:g} {found.describe()}; lowest median at e={lowest:g}",
            found.p_against,
            f"e={factor:g} / e={other:g} {found.headline()}",
        ))  # fmt: skip
    return parts


CLAIM = Claim(
    name="claim_lm1b_best_factor_4_to_8",
    statement="For the language model on LM1B's stand-in, the best echo factor lies between "
    "4 and 8",
    studies=("echo_factor",),
    rule="the better of e=4 and e=8 (by median) < e=2 and < e=16, a pair within the "
    "resolution tied, paired sign tests both ways (searches or seeds)",
    decide=decide,
    order=65,
)
