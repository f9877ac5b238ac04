"""Whether a study's searches have enough trials: its tuned baselines' expected best of k.

The protocol's goal for T, the trials per search: the baseline's expected fewest fresh
examples to target among its first k trials (`analysis.protocol.expected_best_curves`: each
search's best of its trials 1..k, averaged over its searches, a trial that missed the target
counted at how far it ran) has flattened by k = T, that is, it gains no more from T/2 to T
trials than the study can resolve (the crossing's step, `analysis.protocol.crossing_step`).
The curves are the searches' own prefixes, so they are exact under incumbent censoring and
stop at the trials the searches ran: nothing past T is extrapolated. Per tuned baseline (a
study, workload and batch size), `trials_table` gives:

* ``T``: the trials per search (the config's plan, else the most any search landed);
* ``searches``, ``trials``, ``trials_reached``: its searches, their trials, and how many
  reached the target;
* ``best_half``, ``best_T``: the expected best of the first T/2 and T trials (NaN where the
  searches have not run that many);
* ``p_reached_half``: the share of its searches whose first T/2 trials hold one that reached
  the target;
* ``gain_half``: ``best_half - best_T``;
* ``step``: fresh examples between two located crossings;
* ``ratio_shift``: over the tuned echo conditions that share the baseline, the largest change
  of their expected best relative to the baseline's between k = T/2 and T: how far the
  ratios the claims rest on move with the tuning budget (NaN without such a condition);
* ``verdict``: `FLATTENED` when ``gain_half <= step``, else how many steps it gains.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from analysis._io import require_columns
from analysis.protocol import crossing_step, expected_best_curves
from analysis.time_to_target import BASELINE_KEY

__all__ = ["FLATTENED", "TRIALS_COLUMNS", "trials_table"]

FLATTENED = "flattened"
"""The verdict of a baseline whose expected best gains at most one step from T/2 to T."""

TRIALS_COLUMNS = [
    "study", "workload", "batch_size", "T", "searches", "trials", "trials_reached", "best_half",
    "best_T", "p_reached_half", "gain_half", "step", "ratio_shift", "verdict",
]  # fmt: skip
"""Columns of `trials_table`."""


def _verdict(gain_half: float, step: float) -> str:
    if np.isnan(gain_half):
        return "not yet: the searches have not run T trials"
    if gain_half <= step:
        return FLATTENED
    return f"not flattened: T/2 -> T gains {gain_half / step:.1f} steps"


def _planned(runs: pd.DataFrame, trials: Mapping[tuple[str, str], int] | None) -> pd.Series:
    """``(study, workload)`` -> trials per search: the plan where given, else the landed most."""
    landed = runs.groupby(["study", "workload"])["trial"].max() + 1
    if trials is None:
        return landed.astype(int)
    return pd.Series(
        [trials.get(key, int(most)) for key, most in landed.items()], index=landed.index
    )


def trials_table(
    runs: pd.DataFrame, trials: Mapping[tuple[str, str], int] | None = None
) -> pd.DataFrame:
    """One row per tuned baseline: `TRIALS_COLUMNS` (module doc), sorted by study, workload
    and batch size; empty when nothing is tuned.

    Args:
        runs: The runs table (`analysis.records`).
        trials: ``(study, workload)`` -> the trials per search its config plans. Default
            None: as many as the most any of its searches landed.

    Raises:
        ValueError: ``runs`` lacks a needed column.
    """
    require_columns(runs, [*BASELINE_KEY, "echo_point", "refine_every_fresh"], "runs")
    curves = expected_best_curves(runs)
    if curves.empty:
        return pd.DataFrame(columns=TRIALS_COLUMNS)
    planned = _planned(runs[runs["trial"].notna()], trials)
    is_baseline = curves["echo_point"] == "none"
    rows = []
    for key, base in curves[is_baseline].groupby(BASELINE_KEY, dropna=False, sort=True):
        at = dict(zip(BASELINE_KEY, key, strict=True))
        t = int(planned[(at["study"], at["workload"])])
        ks = (max(1, t // 2), t)
        best = base.set_index("k")["expected_best_fresh"].reindex(ks)
        reached = base.set_index("k")["p_any_reached"]
        step = crossing_step(runs[_matches(runs, at) & (runs["echo_point"] == "none")])
        gain_half = float(best[ks[0]] - best[ks[1]])
        rows.append(
            {
                "study": at["study"],
                "workload": at["workload"],
                "batch_size": at["batch_size"],
                "T": t,
                "searches": int(base["searches"].iloc[0]),
                "trials": int(base["trials"].iloc[0]),
                "trials_reached": int(base["trials_reached"].iloc[0]),
                "best_half": float(best[ks[0]]),
                "best_T": float(best[ks[1]]),
                "p_reached_half": float(reached.get(ks[0], np.nan)),
                "gain_half": gain_half,
                "step": step,
                "ratio_shift": _ratio_shift(curves[~is_baseline & _matches(curves, at)], best),
                "verdict": _verdict(gain_half, step),
            }
        )
    return pd.DataFrame(rows, columns=TRIALS_COLUMNS)


def _matches(table: pd.DataFrame, at: Mapping[str, object]) -> pd.Series:
    """Rows of ``table`` whose `BASELINE_KEY` columns equal ``at`` (NaN matching NaN)."""
    match = pd.Series(True, index=table.index)
    for column, value in at.items():
        match &= table[column].isna() if pd.isna(value) else table[column] == value
    return match


def _ratio_shift(echoes: pd.DataFrame, baseline: pd.Series) -> float:
    """The largest range, over ``echoes``' conditions, of their expected best over the
    baseline's (``baseline``: k -> expected best) at the k of ``baseline``'s index."""
    shifts = []
    for _, line in echoes.groupby(["echo_point", "echo_factor", "shuffle_buffer"]):
        ratio = line.set_index("k")["expected_best_fresh"].reindex(baseline.index) / baseline
        if ratio.notna().any():
            shifts.append(float(ratio.max() - ratio.min()))
    return max(shifts, default=float("nan"))
