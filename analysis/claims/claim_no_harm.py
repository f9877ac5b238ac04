"""Echoing does not harm the best quality reached within a budget of fresh examples: per
workload and echo point of the no-harm study, echoing's best metric against the baseline's,
"at most" (worse by at most `TOLERANCE` of the target, not more)."""

from __future__ import annotations

import pandas as pd

from analysis.claims import Claim, Part
from analysis.claims.rules import ALPHA, MIN_PAIRS
from analysis.claims.study import Plan, StudyRuns

__all__ = ["CLAIM", "TOLERANCE", "boundary"]

TOLERANCE = 0.01
"""How much worse than the baseline's best "no harm" allows: this fraction of the target."""


def boundary(runs: pd.DataFrame) -> pd.DataFrame:
    """Echoing at the claim's boundary: its best metric worse by `TOLERANCE` of the target."""
    out = runs.copy()
    rows = (out["study"] == "no_harm") & (out["echo_point"] != "none")
    worse = TOLERANCE * out["target_value"].abs()
    worse = worse.where(out["target_direction"] == "min", -worse)
    out.loc[rows, "best_metric"] = out.loc[rows, "best_metric"] + worse[rows]
    return out


def decide(runs: pd.DataFrame, plan: Plan) -> list[Part]:
    """One part per workload and echo point."""
    study = StudyRuns(runs, "no_harm", plan)
    parts = []
    for workload in study.workloads():
        base = study.baseline(workload)
        if not len(base):
            continue
        sign = 1.0 if (base["target_direction"] == "min").all() else -1.0
        margin = TOLERANCE * abs(float(base["target_value"].iloc[0]))
        metric = base["target_metric"].iloc[0]
        for point in ("after_batch", "before_augment", "after_augment"):
            echo = study.select(workload, echo_point=point)
            if not len(echo):
                continue
            x = pd.Series(sign * echo["best_metric"].to_numpy(float), index=echo["seed"].to_numpy())
            y = pd.Series(sign * base["best_metric"].to_numpy(float), index=base["seed"].to_numpy())
            found = study.compare(x, y, margin)
            few = found.pairs < MIN_PAIRS
            text = (
                f"best {metric} {echo['best_metric'].median():.3f} vs baseline "
                f"{base['best_metric'].median():.3f}; within {margin:.3f} or better: "
                f"{found.tally()}"
                + (f"; {found.pairs} untied pairs cannot decide at {ALPHA:g}" if few else "")
            )
            number = (
                f"best {metric} {echo['best_metric'].median():.3f} vs "
                f"{base['best_metric'].median():.3f}"
            )
            parts.append(Part(f"{workload} {point}", found.verdict, text, found.p_against, number))
    return parts


CLAIM = Claim(
    name="claim_no_harm",
    statement="Echoing does not harm the best quality reached within a budget of fresh examples",
    studies=("no_harm",),
    rule=f"per point: echo's best < baseline's + {TOLERANCE:.0%} of the target (worse-is-higher), "
    "paired sign test both ways over seeds",
    decide=decide,
    order=80,
    boundary=boundary,
)
