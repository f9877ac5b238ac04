"""Whether a study locates the target crossing finely enough, at an affordable evaluation cost.

The protocol's resolution goal: for every workload, the crossing of the target is located to
at most ``1/20`` of the tuned baseline's median fresh examples to target (`SPACING_GOAL`), with
evaluation, refinement included, costing at most about a quarter of training time
(`EVAL_SHARE_GOAL`). Per study and workload, `resolution_table` measures both from the
records:

* ``step``: fresh examples between two refined crossings (the records' ``refined.every_fresh``,
  the largest if they differ; the evaluation interval for records without refinement);
* ``baseline_n`` and ``baseline_reached``: the baseline's searches (`best_of_searches`: each
  search's best trial), or its seeds without a search, and how many reached the target;
* ``baseline_median``: the median of those that reached it;
* ``spacing``: ``step / baseline_median``;
* ``eval_share``: evaluation over training seconds of all the part's runs (`study_cost`).

Rule: ``meets`` when ``spacing <= SPACING_GOAL`` and ``eval_share <= EVAL_SHARE_GOAL``; else
the verdict names what is over its goal; ``no baseline`` when no baseline search (or seed)
reached the target yet.
"""

from __future__ import annotations

import pandas as pd

from analysis._io import require_columns
from analysis.protocol import PART, best_of_searches, crossing_step, study_cost

__all__ = ["EVAL_SHARE_GOAL", "RESOLUTION_COLUMNS", "SPACING_GOAL", "resolution_table"]

SPACING_GOAL = 1 / 20
"""Largest step between located crossings, as a fraction of the baseline's median."""

EVAL_SHARE_GOAL = 0.25
"""Largest evaluation time, refinement included, as a fraction of training time."""

MEETS = "meets"
NO_BASELINE = "no baseline"

RESOLUTION_COLUMNS = [
    "study", "workload", "step", "baseline_n", "baseline_reached", "baseline_median",
    "spacing", "one_in", "eval_share", "verdict",
]  # fmt: skip
"""Columns of `resolution_table`."""


def _verdict(spacing: float, eval_share: float) -> str:
    if pd.isna(spacing):
        return NO_BASELINE
    over = []
    if spacing > SPACING_GOAL:
        over.append(f"crossing step over 1/{round(1 / SPACING_GOAL)}")
    if pd.notna(eval_share) and eval_share > EVAL_SHARE_GOAL:
        over.append(f"evaluation over {EVAL_SHARE_GOAL:.0%} of training")
    return "; ".join(over) if over else MEETS


def resolution_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per study and workload with a baseline: `RESOLUTION_COLUMNS` (module doc).

    Args:
        runs: The runs table (`analysis.records`).

    Raises:
        ValueError: ``runs`` lacks a needed column.
    """
    require_columns(runs, ["echo_point", "refine_every_fresh", "eval_every_fresh"], "runs")
    if not len(runs):  # nothing landed yet
        return pd.DataFrame(columns=RESOLUTION_COLUMNS)
    best = best_of_searches(runs)
    baseline = best[best["echo_point"] == "none"]
    share = study_cost(runs).set_index(list(PART))["eval_share"]
    rows = []
    for (study, workload), group in baseline.groupby(list(PART), sort=True):
        step = crossing_step(group)
        reached = group[group["reached"].astype(bool)]
        median = float(reached["fresh_examples_to_target"].median()) if len(reached) else None
        spacing = step / median if median else float("nan")
        eval_share = float(share.get((study, workload), float("nan")))
        rows.append(
            {
                "study": study,
                "workload": workload,
                "step": step,
                "baseline_n": len(group),
                "baseline_reached": len(reached),
                "baseline_median": median,
                "spacing": spacing,
                "one_in": 1 / spacing if pd.notna(spacing) else float("nan"),
                "eval_share": eval_share,
                "verdict": _verdict(spacing, eval_share),
            }
        )
    return pd.DataFrame(rows, columns=RESOLUTION_COLUMNS)
