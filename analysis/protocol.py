"""The data-echoing paper's estimator over tuned searches, and the expected best of k trials.

A tuned condition (a workload's echo setting, or its baseline) is ``repetitions`` independent
searches of ``trials`` runs each (`experiments.search`; the runs table's ``repetition`` and
``trial`` columns). The paper's estimator reduces each search to its trial that reached the
target with the fewest fresh examples (`best_of_searches`); the median and the min-max over
the searches, relative to the baseline's same statistic, are then what `analysis.time_to_target`
computes over seeds, the searches taking the seeds' place.

Beyond the paper, `expected_best_of_k` pools a condition's trials and gives the expected
fewest fresh examples to target among k trials drawn from that pool (with replacement, exact
order statistics of the empirical distribution, as Dodge et al., "Show Your Work", 2019, do
for the best validation score): whether a gain survives a small tuning budget. A trial that
did not reach the target within its cap counts at its cap (``final_fresh_examples``), so the
expectation is of ``min(fresh examples to target, cap)``.
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
    "expected_best_of_k",
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
        examples (ties: fewest steps), or, when none did, the search's first trial
        (``reached`` false). Its ``seed`` is the repetition, its
        ``hparams`` `SEARCHED` (``best_hparams`` keeps the winner's), ``lr`` the winner's;
        ``trials`` and ``trials_reached`` count the search's trials.

    Raises:
        ValueError: ``runs`` lacks a needed column.
    """
    searched = _searched(runs)
    if not searched.any():
        return runs
    needed = [*CONDITION_KEY, "repetition", "trial", "reached", "fresh_examples_to_target"]
    require_columns(runs, [*needed, "steps_to_target", "hparams"], "runs")
    tuned = runs[searched].copy()
    tuned["_order"] = np.where(tuned["reached"].astype(bool), 0, 1)
    tuned = tuned.sort_values(["_order", "fresh_examples_to_target", "steps_to_target", "trial"])
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
    best = best.drop(columns="_order")
    out = pd.concat([runs[~searched], best], ignore_index=True)
    return out.sort_values(["study", "workload"], kind="stable", ignore_index=True)


def expected_best_of_k(values: np.ndarray | list[float], k: int | np.ndarray) -> np.ndarray:
    """The expected minimum of ``k`` draws with replacement from ``values`` (exact).

    With ``v_(1) <= ... <= v_(n)`` sorted, ``P(min = v_(i)) = ((n - i + 1)^k - (n - i)^k) /
    n^k``.

    Args:
        values: The pool (finite numbers).
        k: Draws, >= 1 (an int or an array of them).

    Raises:
        ValueError: An empty pool, a non-finite value, or k < 1.
    """
    pool = np.sort(np.asarray(values, dtype=float))
    draws = np.atleast_1d(np.asarray(k))
    if not len(pool) or not np.isfinite(pool).all():
        raise ValueError(f"values must be a non-empty pool of finite numbers, got {values!r}")
    if (draws < 1).any():
        raise ValueError(f"k must be >= 1, got {k!r}")
    n = len(pool)
    above = (n - np.arange(n, dtype=float)) / n  # P(a draw >= v_(i)), i = 1..n
    exponent = draws[:, None].astype(float)
    p_min = above[None, :] ** exponent - np.append(above[1:], 0.0)[None, :] ** exponent
    return p_min @ pool


def expected_best_curves(runs: pd.DataFrame) -> pd.DataFrame:
    """Per tuned condition: the expected fewest fresh examples to target among k trials.

    Args:
        runs: The runs table (its tuned rows are used).

    Returns:
        One row per (condition, k) for k = 1 .. the pool's size, with the condition's columns,
        ``k``, ``pool`` (trials pooled over its searches), ``pool_reached``,
        ``expected_best_fresh`` (unreached trials at their cap) and ``p_any_reached`` (the
        chance that at least one of k trials reached the target), empty when nothing is
        tuned.
    """
    searched = _searched(runs)
    columns = [*CONDITION_KEY, "k", "pool", "pool_reached", "expected_best_fresh", "p_any_reached"]
    if not searched.any():
        return pd.DataFrame(columns=columns)
    require_columns(runs, ["final_fresh_examples", "reached"], "runs")
    rows = []
    for key, group in runs[searched].groupby(CONDITION_KEY, dropna=False, sort=False):
        reached = group["reached"].astype(bool).to_numpy()
        capped = np.where(
            reached, group["fresh_examples_to_target"], group["final_fresh_examples"]
        ).astype(float)
        k = np.arange(1, len(group) + 1)
        expected = expected_best_of_k(capped, k)
        miss = 1 - reached.mean()
        for draws, value in zip(k, expected, strict=True):
            row = dict(zip(CONDITION_KEY, key, strict=True))
            row.update(k=int(draws), pool=len(group), pool_reached=int(reached.sum()))
            row.update(expected_best_fresh=float(value), p_any_reached=1 - miss**draws)
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
        ``timing.total_s``, set-up, training and evaluation, on one core), ``landed_s`` (their
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
