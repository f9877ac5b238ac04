"""The fresh examples echoing needs never fall below the baseline's / e: every echo condition
of the insertion and echo-factor studies against its baseline divided by its factor, "at
most" (the baseline / e may exceed echoing by the resolution, not more)."""

from __future__ import annotations

import pandas as pd

from analysis.claims import Claim, Part
from analysis.claims.study import Plan, StudyRuns, resolution_of

__all__ = ["CLAIM", "STUDIES", "boundary"]

STUDIES = ("insertion", "echo_factor")
"""The studies whose echo conditions the claim reads."""


def boundary(runs: pd.DataFrame) -> pd.DataFrame:
    """Echoing at its claim's boundary: every echo run's fresh examples to target divided by
    its factor, less the resolution (just below the baseline's / e when echoing and the
    baseline alike)."""
    out = runs.copy()
    column = "fresh_examples_to_target"
    out[column] = out[column].astype(float)
    rows = out["study"].isin(STUDIES) & (out["echo_point"] != "none")
    out.loc[rows, column] = (
        out.loc[rows, column] / out.loc[rows, "echo_factor"] - resolution_of(out)[rows]
    )
    return out


def decide(runs: pd.DataFrame, plan: Plan) -> list[Part]:
    """One part per workload, echo point and factor (a condition two studies share once)."""
    parts, seen = [], set()
    for name in STUDIES:
        study = StudyRuns(runs, name, plan)
        for workload in study.workloads():
            base = study.baseline(workload)
            rows = study.select(workload)
            echoes = rows[rows["echo_point"] != "none"]
            for (point, factor), echo in echoes.groupby(["echo_point", "echo_factor"]):
                if (workload, point, factor) in seen:
                    continue
                seen.add((workload, point, factor))
                ideal = study.bounds(base) / factor
                found = study.compare(ideal, echo, study.delta(base))
                shown = study.compare(echo, base, 0.0)
                parts.append(Part(
                    f"{workload} {point} e={factor:g}",
                    found.verdict,
                    f"fresh / baseline {shown.summary()} vs 1/e = {1 / factor:.2f}; at or "
                    f"above: {found.tally()}",
                    found.p_against,
                    f"fresh / baseline {shown.headline()} vs 1/e = {1 / factor:.2f}",
                ))  # fmt: skip
    return parts


CLAIM = Claim(
    name="claim_never_below_1_over_e",
    statement="Fresh examples to target never fall below the baseline's / e",
    studies=("insertion", "echo_factor"),
    rule="per condition: baseline / e < echo + resolution, paired sign test both ways "
    "(searches or seeds)",
    decide=decide,
    order=20,
    boundary=boundary,
)
