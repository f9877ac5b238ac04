"""Batch echoing on the ImageNet ResNet needs about as many fresh examples as the baseline:
the insertion study's e = 2 after batching against its baseline, equivalent within
`EQUIVALENCE` of the baseline's median (two one-sided tests), not reproduced on evidence of a
difference beyond it either way (the same tests' opposite sides), and whether our interval of
the paired ratio holds 1."""

from __future__ import annotations

import pandas as pd

from analysis.claims import Claim, Part
from analysis.claims.rules import NOT_REPRODUCED, NOT_RESOLVED, REPRODUCED
from analysis.claims.study import Plan, StudyRuns

__all__ = ["CLAIM", "EQUIVALENCE", "WORKLOAD", "boundary"]

WORKLOAD = "imagenet_resnet"
"""The workload standing in for ResNet-50 on ImageNet."""

EQUIVALENCE = 0.10
""""About as many": within this fraction of the baseline's median fresh examples."""


def boundary(runs: pd.DataFrame) -> pd.DataFrame:
    """Batch echoing at the claim's boundary: `EQUIVALENCE` more fresh examples."""
    out = runs.copy()
    column = "fresh_examples_to_target"
    out[column] = out[column].astype(float)
    rows = (out["study"] == "insertion") & (out["workload"] == WORKLOAD)
    rows &= out["echo_point"] == "after_batch"
    out.loc[rows, column] = out.loc[rows, column] * (1 + EQUIVALENCE)
    return out


def decide(runs: pd.DataFrame, plan: Plan) -> list[Part]:
    """One part: batch echoing against the baseline."""
    study = StudyRuns(runs, "insertion", plan)
    if WORKLOAD not in study.workloads():
        return []
    base = study.baseline(WORKLOAD)
    echo = study.select(WORKLOAD, echo_point="after_batch", echo_factor=2.0)
    values = study.values(base)
    finite = values[values < float("inf")]
    margin = EQUIVALENCE * float(finite.median()) if len(finite) else 0.0
    no_worse, no_better = study.compare(echo, base, margin), study.compare(base, echo, margin)
    if no_worse.verdict == no_better.verdict == REPRODUCED:
        verdict = REPRODUCED
    elif NOT_REPRODUCED in (no_worse.verdict, no_better.verdict):
        verdict = NOT_REPRODUCED
    else:
        verdict = NOT_RESOLVED if no_worse.n_x else no_worse.verdict
    shown = study.compare(echo, base, 0.0)
    holds = shown.holds(1.0)
    where = "" if holds is None else f"; the interval {'holds' if holds else 'excludes'} 1"
    text = (
        f"fresh / baseline {shown.summary()}; within {margin:,.0f} fresh examples: no worse "
        f"{no_worse.tally()}, no better {no_better.tally()}{where}"
    )
    p_against = min(no_worse.p_against, no_better.p_against)
    number = f"fresh / baseline {shown.headline()}"
    return [Part(f"{WORKLOAD} after_batch e=2", verdict, text, p_against, number)]


CLAIM = Claim(
    name="claim_resnet50_batch_echo_no_gain",
    statement="Batch echoing on the ImageNet ResNet needs about as many fresh examples as "
    "the baseline",
    studies=("insertion",),
    rule=f"within {EQUIVALENCE:.0%} of the baseline's median both ways: two one-sided "
    "paired sign tests (searches or seeds); not reproduced when either shows a difference "
    "beyond it",
    decide=decide,
    order=35,
    boundary=boundary,
)
