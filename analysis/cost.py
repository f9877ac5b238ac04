"""What a tuned study's runs still to train cost under incumbent censoring, before they train.

A censored trial (`run_contract.censoring`) stops at its first evaluation past its search's
incumbent that misses the target, so it costs less than the uncensored runs that have landed.
`censored_costs` replays the landed records of each tuned condition to measure that:

* ``full_s``: an uncensored trial (a search's first), the mean of the landed runs that were
  not censored;
* ``within_s``: a trial among the first ``trials`` of a search (as many as each landed search
  has), each landed trial after a search's first stopped against its own search's earlier
  trials, as training in order would have;
* ``past_s``: a trial past them (a grown search), each landed trial stopped against the best
  of another landed search's trials: an upper bound, as a grown search's incumbent is at
  least that good.

A run's cost is its record's ``timing.total_s`` (training and evaluation on one
core), cut where it stops in proportion to its training time there. `expected_costs` gives
each planned run not landed yet its condition's estimate; a condition with nothing landed
(a new echo factor) takes the same study, workload, echo point, shuffle buffer and batch
size's largest landed factor below it, scaled by the ratio of the factors (optimizer steps
per fresh example: more than the cost grew from e = 8 to e = 16).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis._io import require_columns
from run_contract.censoring import incumbent, stop_row

__all__ = [
    "COST_CONDITION",
    "censored_costs",
    "censoring_estimates",
    "censoring_line",
    "expected_costs",
    "speed_since",
    "trained_since",
]

COST_CONDITION = ["study", "workload", "echo_point", "echo_factor", "shuffle_buffer", "batch_size"]
"""The columns of a tuned condition, as `analysis.protocol.CONDITION` groups the cost."""


def _read(path: str) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


def _stopped_cost(record: Mapping[str, Any], total_s: float, row: int | None) -> float:
    """``total_s`` cut at evaluation ``row`` (None: not cut), in proportion to training time."""
    final = record["final"]["wall_s"]
    if row is None or final <= 0:
        return total_s
    return total_s * min(1.0, record["eval_curve"][row]["wall_s"] / final)


def censored_costs(
    runs: pd.DataFrame, read: Callable[[str], dict[str, Any]] = _read
) -> pd.DataFrame:
    """Per tuned condition landed: what a trial costs, uncensored and censored.

    Args:
        runs: The runs table of the landed records (`analysis.records`), with `COST_CONDITION`,
            ``record``, ``repetition``, ``trial`` and ``total_s``.
        read: Reads a record from its path. Default: its JSON file.

    Returns:
        One row per tuned condition: `COST_CONDITION`, ``searches``, ``trials`` (the fewest
        landed in one of its searches), ``full_s``, ``within_s`` and ``past_s`` (module
        docstring); empty when nothing tuned has landed.
    """
    require_columns(runs, [*COST_CONDITION, "record", "repetition", "trial", "total_s"], "runs")
    tuned = runs[runs["trial"].notna()]
    rows = []
    for key, group in tuned.groupby(COST_CONDITION, dropna=False, sort=False):
        searches = []
        for _, search in group.sort_values("trial").groupby("repetition", sort=True):
            pairs = zip(search["record"], search["total_s"], strict=True)
            searches.append([(read(path), float(seconds)) for path, seconds in pairs])
        within = []
        for search in searches:
            for index, (record, total_s) in enumerate(search[1:], start=1):
                best = incumbent([r for r, _ in search[:index]])
                within.append(_stopped_cost(record, total_s, stop_row(record, best)))
        bests = [incumbent([r for r, _ in search]) for search in searches]
        past = [
            _stopped_cost(record, total_s, stop_row(record, best))
            for number, search in enumerate(searches)
            for record, total_s in search
            for other, best in enumerate(bests)
            if other != number
        ]
        full = [s for search in searches for r, s in search if "censored" not in r] or [np.nan]
        rows.append(
            {
                **dict(zip(COST_CONDITION, key, strict=True)),
                "searches": len(searches),
                "trials": min(len(search) for search in searches),
                "full_s": float(np.mean(full)),
                "within_s": float(np.mean(within)) if within else np.nan,
                "past_s": float(np.mean(past)) if past else np.nan,
            }
        )
    columns = [*COST_CONDITION, "searches", "trials", "full_s", "within_s", "past_s"]
    return pd.DataFrame(rows, columns=columns)


def _landed_or_scaled(costs: pd.DataFrame, condition: Mapping[str, Any]) -> pd.Series | None:
    """The costs row of ``condition``, else its largest landed factor below, scaled."""
    text = {c: str(condition[c]) for c in COST_CONDITION}
    matches = costs[np.logical_and.reduce([costs[c].astype(str) == v for c, v in text.items()])]
    if len(matches):
        return matches.iloc[0]
    others = [c for c in COST_CONDITION if c != "echo_factor"]
    same = costs[np.logical_and.reduce([costs[c].astype(str) == text[c] for c in others])]
    factor = float(condition["echo_factor"])
    below = same[same["echo_factor"].astype(float) < factor]
    if not len(below) or condition["echo_point"] == "none":
        return None
    nearest = below.loc[below["echo_factor"].astype(float).idxmax()].copy()
    scale = factor / float(nearest["echo_factor"])
    for column in ("full_s", "within_s", "past_s"):
        nearest[column] *= scale
    return nearest


def expected_costs(planned: pd.DataFrame, costs: pd.DataFrame) -> pd.Series:
    """Each planned run's expected seconds on one core, by `censored_costs`.

    Args:
        planned: One row per planned run: `COST_CONDITION`, ``trial`` (NaN: not tuned) and
            ``censored`` (whether it is censored: a search's trial after its first, in a
            study that censors).
        costs: `censored_costs` of the landed runs.

    Returns:
        Seconds per row of ``planned`` (its index): ``full_s`` for an uncensored trial,
        ``within_s`` for a censored one among its condition's landed number of trials per
        search, ``past_s`` past them; NaN for a run that is not tuned or whose condition
        (and every factor below it) has nothing landed.
    """
    require_columns(planned, [*COST_CONDITION, "trial", "censored"], "planned")
    found: dict[tuple, pd.Series | None] = {}
    values = []
    for _, row in planned.iterrows():
        if pd.isna(row["trial"]):
            values.append(np.nan)
            continue
        key = tuple(str(row[c]) for c in COST_CONDITION)
        if key not in found:
            found[key] = _landed_or_scaled(costs, row)
        cost = found[key]
        if cost is None:
            values.append(np.nan)
        elif not row["censored"]:
            values.append(cost["full_s"])
        else:
            values.append(cost["within_s"] if row["trial"] < cost["trials"] else cost["past_s"])
    return pd.Series(values, index=planned.index, dtype=float)


def censoring_estimates(planned: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Each planned run's estimate with and without censoring.

    Args:
        planned: As `expected_costs`.
        runs: The runs table of the landed records.

    Returns:
        Columns ``censored`` (`expected_costs`) and ``uncensored`` (every trial as a
        search's first), on ``planned``'s index.
    """
    costs = censored_costs(runs)
    return pd.DataFrame(
        {
            "censored": expected_costs(planned, costs),
            "uncensored": expected_costs(planned.assign(censored=False), costs),
        }
    )


def censoring_line(estimates: pd.DataFrame, planned: pd.DataFrame, runs: pd.DataFrame) -> str:
    """One line: the tuned runs still to train, how many are censored, and their estimated
    core-hours with and without censoring (`censoring_estimates`; a run two studies share
    once)."""
    left = ~planned["record"].isin(set(runs["record"])) & estimates["censored"].notna()
    chosen = estimates[left.to_numpy() & ~planned["record"].duplicated().to_numpy()]
    censored = int(planned.loc[chosen.index, "censored"].sum())
    return (
        f"censoring: {censored} of the {len(chosen)} tuned runs still to train are censored "
        f"trials; they cost about {chosen['censored'].sum() / 3600:.1f} core-hours, "
        f"{chosen['uncensored'].sum() / 3600:.1f} trained to their target or budget "
        "(each landed condition's trials replayed: analysis.cost)"
    )


def speed_since(landed: pd.DataFrame, since: pd.Series, least: int = 10) -> pd.DataFrame:
    """Per workload, how many times as long a step trains in the runs of ``since`` as in the
    others: the ratio of the medians of ``downstream_s_per_step`` (a run's seconds per optimizer
    step, evaluation excluded), where each side has at least ``least`` runs.

    A landed run's cost measures the host it trained on; a study that moves to a slower (or
    busier) host costs more per run than its landed runs say. Scaling the landed runs' cost
    by this ratio prices what is still to train at the speed the study trains at now.

    Args:
        landed: One row per landed record, with ``workload`` and ``downstream_s_per_step``.
        since: Boolean, on ``landed``'s index: the runs trained since (e.g. since a budget
            began, `analysis.cli`'s ``--budget-since``).
        least: The fewest runs on each side for a measured ratio. Default 10.

    Returns:
        Index workload (each of ``landed``'s), columns ``ratio`` and ``measured``: a workload
        with fewer than ``least`` runs on a side takes the median of the measured workloads'
        ratios (the host's, as steps of every workload slow down alike), ``measured`` False;
        empty when no workload is measured.
    """
    require_columns(landed, ["workload", "downstream_s_per_step"], "runs")
    ratios = {}
    for workload, group in landed.groupby("workload", sort=True):
        now = group.loc[since.loc[group.index], "downstream_s_per_step"].dropna()
        then = group.loc[~since.loc[group.index], "downstream_s_per_step"].dropna()
        ratios[workload] = np.nan
        if len(now) >= least and len(then) >= least:
            ratios[workload] = float(now.median() / then.median())
    table = pd.DataFrame({"ratio": pd.Series(ratios, dtype=float)})
    table["measured"] = table["ratio"].notna()
    if not table["measured"].any():
        return table.iloc[0:0]
    table["ratio"] = table["ratio"].fillna(table.loc[table["measured"], "ratio"].median())
    return table


def trained_since(landed: pd.DataFrame, before: pd.DataFrame) -> pd.Series:
    """Which rows of ``landed`` (runs, with ``record`` and ``total_s``) trained since
    ``before`` (the runs that had landed then): new records, and records retrained in place
    (their ``total_s`` differs from ``before``'s). Boolean, on ``landed``'s index."""
    then = before.drop_duplicates("record").set_index("record")["total_s"]
    old = landed["record"].map(then)
    return old.isna() | ((landed["total_s"] - old).abs() > 1e-6)
