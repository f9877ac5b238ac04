"""The data-echoing paper's estimator over tuned searches, and the expected best of k trials.

A tuned condition (a workload's echo setting, or its baseline) is ``repetitions`` independent
searches of ``trials`` runs each (`experiments.search`; the runs table's ``repetition`` and
``trial`` columns). The paper's estimator reduces each search to its trial that reached the
target with the fewest fresh examples (`best_of_searches`); the median and the min-max over
the searches, relative to the baseline's same statistic, are then what `analysis.time_to_target`
computes over seeds, the searches taking the seeds' place.

Beyond the paper, `expected_best_curves` gives a condition's expected fewest fresh examples
to target among its first k trials: each search's prefix minimum (the best of its trials
1..k, in the order the search ran them) averaged over its searches, for k up to the trials
every search has: whether a gain survives a small tuning budget. A trial that did not reach
the target counts at how far it ran (``final_fresh_examples``: its cap, or where it was
censored once it passed its search's best so far), so each prefix minimum is exactly
``min(fresh examples to target, cap)`` of the search's first k trials, censored or not: a
censored trial stopped above a value its own prefix already holds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from analysis._io import require_columns
from run_contract.identity import identity_columns

__all__ = [
    "CONDITION",
    "CONDITION_KEY",
    "COST_COLUMNS",
    "PART",
    "SEARCHED",
    "best_of_searches",
    "crossing_step",
    "expected_best_curves",
    "study_cost",
]

SEARCHED = "tuned"
"""The ``hparams`` column of a search's best-trial row: the condition, not one setting."""

_TARGET = ["target_metric", "target_value", "target_direction"]

CONDITION_KEY = [
    "study",
    *identity_columns("baseline"),
    *identity_columns("echo"),
    *identity_columns("budget"),
    *_TARGET,
]
"""Columns that identify one tuned condition (all its searches and trials)."""


def _searched(runs: pd.DataFrame) -> pd.Series:
    return runs["trial"].notna() if "trial" in runs else pd.Series(False, index=runs.index)


def crossing_step(rows: pd.DataFrame) -> float:
    """Fresh examples between two located crossings of ``rows``: the largest refinement step
    (``refine_every_fresh``), or the largest evaluation interval where none was refined."""
    refine = rows["refine_every_fresh"].dropna()
    return float(refine.max()) if len(refine) else float(rows["eval_every_fresh"].max())


def best_of_searches(
    runs: pd.DataFrame, trials: Mapping[tuple[str, str], int] | None = None
) -> pd.DataFrame:
    """Each tuned search reduced to its best trial (the paper's per-search value).

    Args:
        runs: The runs table (`analysis.records`); rows without a ``trial`` (fixed
            hyper-parameters, one run per seed) pass through unchanged.
        trials: ``(study, workload)`` -> the trials per search its config plans
            (`planned_trials`). Default None: as many as the most any search of the study and
            workload has landed (a guess: when every search is short of its plan, they all
            pass for complete).

    Returns:
        The untuned rows, then one row per (condition, repetition) whose trials have all
        landed (a search still training is left out): the trial that reached the target with
        the fewest fresh
        examples (ties: fewest steps), or, when none did, the trial that ran the fewest fresh
        examples (``reached`` false: the search's value lies above its
        ``final_fresh_examples``). Its ``seed`` is the repetition, its
        ``hparams`` `SEARCHED` (``best_hparams`` keeps the winner's), ``lr`` the winner's;
        ``trials`` and ``trials_reached`` count the search's trials.

    Raises:
        ValueError: ``runs`` lacks a needed column.
    """
    searched = _searched(runs)
    if not searched.any():
        return runs
    needed = [*CONDITION_KEY, "repetition", "trial", "reached", "fresh_examples_to_target"]
    needed.append("final_fresh_examples")
    require_columns(runs, [*needed, "steps_to_target", "hparams"], "runs")
    tuned = runs[searched].copy()
    reached = tuned["reached"].astype(bool)
    tuned["_order"] = np.where(reached, 0, 1)
    # a search that missed entirely lies above the least of its trials' caps
    tuned["_cap"] = np.where(reached, 0.0, tuned["final_fresh_examples"].astype(float))
    keys = ["_order", "fresh_examples_to_target", "steps_to_target", "_cap", "trial"]
    tuned = tuned.sort_values(keys)
    groups = tuned.groupby([*CONDITION_KEY, "repetition"], dropna=False, sort=False)
    best = groups.head(1).copy()
    counts = groups.agg(trials=("trial", "size"), trials_reached=("reached", "sum"))
    best = best.merge(
        counts.reset_index(), on=[*CONDITION_KEY, "repetition"], how="left", validate="1:1"
    )
    # A search still training (fewer trials than the most its study gives the workload) is
    # not a search yet: its best so far would be biased upwards.
    planned = tuned.groupby(["study", "workload"])["trial"].max().rename("_planned") + 1
    if trials is not None:
        planned = (
            planned.index.to_frame(index=False)
            .apply(lambda row: trials.get((row["study"], row["workload"]), math.inf), axis=1)
            .set_axis(planned.index)
            .rename("_planned")
        )
    best = best.join(planned, on=["study", "workload"])
    best = best[best["trials"] == best.pop("_planned")]
    best["best_hparams"] = best["hparams"]
    best["hparams"] = SEARCHED
    best["seed"] = best["repetition"].astype(int)
    best = best.drop(columns=["_order", "_cap"])
    out = pd.concat([runs[~searched], best], ignore_index=True)
    return out.sort_values(["study", "workload"], kind="stable", ignore_index=True)


def expected_best_curves(runs: pd.DataFrame) -> pd.DataFrame:
    """Per tuned condition: the expected fewest fresh examples to target among its first k
    trials (each search's prefix minimum, averaged over its searches).

    Args:
        runs: The runs table (its tuned rows are used).

    Returns:
        One row per (condition, k) for k = 1 .. the fewest trials any of its searches has,
        with the condition's columns, ``k``, ``searches``, ``trials`` and ``trials_reached``
        (over its searches), ``expected_best_fresh`` (the mean over its searches of the best
        of their first k trials, a trial that missed at how far it ran) and
        ``p_any_reached`` (the share of its searches whose first k trials hold one that
        reached the target); empty when nothing is tuned.
    """
    searched = _searched(runs)
    columns = [*CONDITION_KEY, "k", "searches", "trials", "trials_reached",
               "expected_best_fresh", "p_any_reached"]  # fmt: skip
    if not searched.any():
        return pd.DataFrame(columns=columns)
    require_columns(runs, ["final_fresh_examples", "reached", "repetition"], "runs")
    tuned = runs[searched].sort_values(["repetition", "trial"])
    rows = []
    for key, group in tuned.groupby(CONDITION_KEY, dropna=False, sort=False):
        reached = group["reached"].astype(bool).to_numpy()
        capped = np.where(
            reached, group["fresh_examples_to_target"], group["final_fresh_examples"]
        ).astype(float)
        repetition = group["repetition"].to_numpy()
        searches = [np.flatnonzero(repetition == r) for r in pd.unique(repetition)]
        depth = min(len(trials) for trials in searches)
        best = np.array([np.minimum.accumulate(capped[t][:depth]) for t in searches])
        hit = np.array([np.logical_or.accumulate(reached[t][:depth]) for t in searches])
        for k in range(1, depth + 1):
            row = dict(zip(CONDITION_KEY, key, strict=True))
            row.update(k=k, searches=len(searches), trials=len(group))
            row.update(trials_reached=int(reached.sum()))
            row.update(expected_best_fresh=float(best[:, k - 1].mean()))
            row.update(p_any_reached=float(hit[:, k - 1].mean()))
            rows.append(row)
    return pd.DataFrame(rows, columns=columns)


PART = ("study", "workload")
"""`study_cost`'s default grouping: one row per study and workload."""

CONDITION = ("study", "workload", "echo_point", "echo_factor", "shuffle_buffer", "batch_size")
"""`study_cost`'s grouping per condition (a batch size as the config gives it)."""

COST_COLUMNS = [
    "planned", "landed", "reached", "mean_s", "landed_s", "estimate_s", "eval_share",
]  # fmt: skip
"""Columns of `study_cost` after its grouping columns."""


def study_cost(
    runs: pd.DataFrame | None,
    planned: pd.DataFrame | None = None,
    prior: pd.DataFrame | None = None,
    by: tuple[str, ...] = PART,
) -> pd.DataFrame:
    """What a study's runs cost, per part, and an estimate of the whole.

    Args:
        runs: The runs table of the records that have landed; None or empty: none has (the
            estimate before the study starts).
        planned: Optional rows ``study, record``, ``workload`` and the condition columns
            (`CONDITION`) present: every run the config plans (``experiments.study.plan``),
            landed or not; an ``expected_s`` column, where not NaN, is a run's estimate
            when it has not landed (`analysis.cost.expected_costs`). Default None: the
            landed runs are the plan.
        prior: Optional runs table of another study (e.g. an earlier protocol's, or the
            default study's) whose runs stand in for the cost of those not landed yet.
        by: The grouping columns. Default `PART`; `CONDITION` gives one row per condition.

    Returns:
        One row per group (``by``, then `COST_COLUMNS`): ``landed`` runs and how many
        ``reached`` the target, ``mean_s`` (mean seconds per landed run: the record's
        ``timing.total_s``, training and evaluation, on one core), ``landed_s`` (their
        sum), ``estimate_s`` (the whole group on one core: ``landed_s`` plus, for each run not
        landed, its ``expected_s``, else the mean of the first of these that has runs: its
        condition's landed runs,
        its condition in ``prior``, its workload's landed runs, its workload in ``prior``, all
        landed runs, all of ``prior``) and ``eval_share`` (evaluation over training seconds).

    Raises:
        ValueError: Nothing landed, no ``prior`` and no ``planned`` (nothing to estimate
            from), or a table without the columns read.
    """
    measured = ["study", "record", "workload", "reached", "total_s", "eval_s", "final_wall_s"]
    empty = runs is None or not len(runs)
    if empty:
        if planned is None:
            raise ValueError("no runs have landed: pass the plan (planned) to estimate")
        runs = pd.DataFrame({column: pd.Series(dtype=object) for column in measured})
    require_columns(runs, measured, "runs")
    if planned is None:
        present = [c for c in CONDITION if c in runs and c not in ("study", "record")]
        planned = runs[["study", "record", *present]]
    condition = [c for c in CONDITION[1:] if c in planned]
    table = planned.merge(runs[measured], on=["study", "record"], how="left", suffixes=("", "_run"))
    if "workload_run" in table:
        table = table.drop(columns="workload_run")
    landed = table["total_s"].notna()
    expected = table["total_s"].astype(float)
    if "expected_s" in table:  # the plan's own estimate (`analysis.cost`: censored trials)
        expected = expected.fillna(table["expected_s"].astype(float))
    sources = [runs.drop_duplicates("record")]
    if prior is not None and len(prior):
        sources.append(prior.drop_duplicates("record"))
    levels = [condition, ["workload"]]
    for columns in levels:
        for source in sources:
            keys = [c for c in columns if c in source]
            if not keys or expected.notna().all():
                continue
            # matched as text: a config's values and a runs table's may differ in type
            means = source[keys].astype(str).assign(_s=source["total_s"].to_numpy())
            means = means.groupby(keys, dropna=False)["_s"].mean().rename("_mean")
            wanted = table[keys].astype(str)
            found = wanted.merge(means, left_on=keys, right_index=True, how="left")["_mean"]
            expected = expected.fillna(pd.Series(found.to_numpy(), index=table.index))
    for source in sources:
        if len(source):
            expected = expected.fillna(float(source["total_s"].mean()))
    if expected.isna().any():
        raise ValueError("nothing has landed and there is no prior: no cost to estimate from")
    grouped = table.assign(
        landed=landed,
        reached=table["reached"].fillna(False).astype(bool),
        expected_s=expected,
    )
    cost = (
        grouped.groupby(list(by), sort=False, dropna=False)
        .agg(
            planned=("record", "size"),
            landed=("landed", "sum"),
            reached=("reached", "sum"),
            mean_s=("total_s", "mean"),
            landed_s=("total_s", "sum"),
            estimate_s=("expected_s", "sum"),
            eval_total=("eval_s", "sum"),
            train_total=("final_wall_s", "sum"),
        )
        .reset_index()
    )
    cost["eval_share"] = cost.pop("eval_total") / cost.pop("train_total").replace(0, float("nan"))
    return cost[[*by, *COST_COLUMNS]]
