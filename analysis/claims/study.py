"""The runs one claim reads: a study's rows, each search reduced to its best trial, and the
pairs its comparisons are made of.

A tuned study's value per search is its best trial (`analysis.protocol.best_of_searches`),
and search ``r`` of one condition pairs with search ``r`` of another (the same Sobol points,
the same seeds); a study of fixed hyper-parameters pairs seed ``s`` with seed ``s``. Either
way the pair's key is the row's ``seed`` (a search's best-trial row carries its repetition
there). A run (or a search) that missed its target is censored at its cap: its value lies
above the fresh examples (or seconds) it ran (`Bounds`), so a ratio with it is bounded, not
"worst"; a run that diverged can never reach and lies at infinity.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.claims.rules import Comparison, compare
from analysis.protocol import best_of_searches, crossing_step

__all__ = [
    "CAPS",
    "PREVIOUS_T",
    "Bounds",
    "Horizon",
    "MixedNumerics",
    "Plan",
    "StudyRuns",
    "horizons",
    "resolution_of",
    "shift_fresh",
]

CAPS = {
    "fresh_examples_to_target": "final_fresh_examples",
    "steps_to_target": "final_steps",
    "wall_s_to_target": "final_wall_s",
}
"""A value to target -> the column of how far a run that missed it ran (its cap, or where it
was censored): the missed run's value lies above it."""

Plan = Mapping[str, Mapping[str, int | None]]
"""Study -> workload -> the trials per search its config plans (None: seeds, no search): what
`analysis.claims.claims_table` reads from a config, so that a workload not landed yet is a
part without data and a search still training is left out."""


PREVIOUS_T = 10
"""The trials per search of the protocol's previous plan: a claim is decided there too."""


@dataclass(frozen=True)
class Horizon:
    """The runs table cut to each search's first ``k`` trials (its trial prefix).

    Attributes:
        label: ``T/2``, ``T`` or ``T = 10``, with ``k`` where every search is cut alike
            (``T/2 = 5``).
        runs: The runs whose trial is below its study and workload's ``k`` (untuned runs
            all).
        plan: The plan with ``k`` trials per search.
    """

    label: str
    runs: pd.DataFrame
    plan: Plan


def horizons(runs: pd.DataFrame, plan: Plan | None = None) -> list[Horizon]:
    """The trial prefixes a tuned study's claims are decided at: T/2, the previous plan's
    `PREVIOUS_T` where it lies between T/2 and T, and T (last), T the trials per search the
    plan gives each study and workload (else the most any of its searches landed).

    Args:
        runs: The runs table.
        plan: What the config plans (`Plan`). Default None: the records' own searches.

    Returns:
        The horizons, T's last; only T's when nothing is tuned.
    """
    tuned = runs[runs["trial"].notna()] if len(runs) and "trial" in runs else runs.iloc[:0]
    landed = (tuned.groupby(["study", "workload"])["trial"].max() + 1).astype(int).to_dict()
    full: dict[tuple[str, str], int] = dict(landed)
    for study, workloads in (plan or {}).items():
        full.update({(study, w): int(n) for w, n in workloads.items() if n is not None})
    ks = [("T/2", {key: t // 2 for key, t in full.items()})]
    ks.append((f"T = {PREVIOUS_T}", {key: min(PREVIOUS_T, t) for key, t in full.items()}))
    ks.append(("T", full))
    out, seen = [], set()
    for label, k in reversed(ks):
        shape = tuple(sorted(k.items()))
        if shape in seen or (full and min(k.values()) < 1) or (label != "T" and k == full):
            continue
        seen.add(shape)
        values = set(k.values())
        named = f"{label} = {values.pop()}" if len(values) == 1 and "=" not in label else label
        out.append(Horizon(named, _prefix(runs, k), _plan_at(plan, k)))
    return out[::-1]


def _prefix(runs: pd.DataFrame, k: Mapping[tuple[str, str], int]) -> pd.DataFrame:
    """``runs`` with each search cut to its first ``k[(study, workload)]`` trials."""
    if not len(runs) or "trial" not in runs:
        return runs
    keys = list(zip(runs["study"], runs["workload"], strict=True))
    limit = np.array([k.get(key, math.inf) for key in keys], dtype=float)
    trial = runs["trial"].to_numpy(float)
    return runs[np.isnan(trial) | (trial < limit)]


def _plan_at(plan: Plan | None, k: Mapping[tuple[str, str], int]) -> Plan:
    """``plan`` with ``k`` trials per search (untuned entries as they were)."""
    out: dict[str, dict[str, int | None]] = {
        study: dict(workloads) for study, workloads in (plan or {}).items()
    }
    for (study, workload), trials in k.items():
        out.setdefault(study, {})[workload] = trials
    return out


def resolution_of(runs: pd.DataFrame) -> pd.Series:
    """Each row's resolution of fresh examples to target: its refinement step, else its
    evaluation interval."""
    return runs["refine_every_fresh"].fillna(runs["eval_every_fresh"]).astype(float)


def shift_fresh(runs: pd.DataFrame, where: pd.Series, by: pd.Series | float) -> pd.DataFrame:
    """A copy of ``runs`` whose rows ``where`` need ``by`` more fresh examples to target (a
    claim's boundary, for calibration), reached or not as before."""
    out = runs.copy()
    column = "fresh_examples_to_target"
    out[column] = out[column].astype(float)
    shift = by if isinstance(by, float) else by[where]
    out.loc[where, column] = out.loc[where, column] + shift
    return out


@dataclass(frozen=True)
class Bounds:
    """Per pair key (the index), where each value lies: ``low <= value <= high`` (equal where
    measured; a run censored at ``c``: ``c`` and ``inf``). Positive quantities divide as
    intervals do.

    Attributes:
        low: The lower bounds, by pair key.
        high: The upper bounds, by pair key.
    """

    low: pd.Series
    high: pd.Series

    def __truediv__(self, other: Bounds | float) -> Bounds:
        if not isinstance(other, Bounds):
            return Bounds(self.low / other, self.high / other)
        keys = [key for key in self.low.index if key in other.low.index]
        with np.errstate(divide="ignore", invalid="ignore"):
            low = self.low.loc[keys] / other.high.loc[keys]
            high = self.high.loc[keys] / other.low.loc[keys]
        return Bounds(low.fillna(0.0), high.fillna(math.inf))


class MixedNumerics(ValueError):
    """A study's records were computed in more than one numerics mode or library version."""


_BEST: dict[str, object] = {"runs": None, "rows": {}}
"""The last runs table's searches reduced to their best trials, per study and plan: every
claim on a study reads the same (the calibration decides thousands of tables)."""


def _best_rows(
    runs: pd.DataFrame,
    rows: pd.DataFrame,
    study: str,
    trials: Mapping[tuple[str, str], int] | None,
) -> pd.DataFrame:
    """`best_of_searches` of ``rows`` (``runs``' rows of ``study``), once per table."""
    if not len(rows):
        return rows
    if _BEST["runs"] is not runs:  # held, so that no other table can take its id
        _BEST.update(runs=runs, rows={})
    key = (study, None if trials is None else tuple(sorted(trials.items())))
    cached = _BEST["rows"]
    if key not in cached:
        best = best_of_searches(rows, trials)
        # plain objects: the claims select from these rows hundreds of times per table
        text = [c for c, kind in best.dtypes.items() if isinstance(kind, pd.StringDtype)]
        cached[key] = best.astype(dict.fromkeys(text, object))
    return cached[key]


class StudyRuns:
    """The runs of one study, each search reduced to its best trial.

    Args:
        runs: The runs table (`analysis.records`).
        study: The study's name.
        plan: What the config plans (`Plan`). Default None: the records' own workloads and
            searches.

    Raises:
        MixedNumerics: The study pools records of different numerics.
    """

    def __init__(self, runs: pd.DataFrame, study: str, plan: Plan | None = None):
        self.study = study
        planned = (plan or {}).get(study, {})
        self.planned = list(planned)
        rows = runs[runs["study"] == study] if len(runs) else runs
        kinds = rows["numerics"].value_counts() if "numerics" in rows else ()
        if len(kinds) > 1:
            counts = ", ".join(f"{count} {kind}" for kind, count in kinds.items())
            raise MixedNumerics(
                f"study {study} pools records of different numerics ({counts}): retrain them "
                "in one mode (run_contract.numerics)"
            )
        self.tuned = bool(len(rows)) and rows["trial"].notna().any()
        self.landed = set(rows["workload"].unique()) if len(rows) else set()
        trials = {(study, w): n for w, n in planned.items() if n is not None} if plan else None
        self.rows = _best_rows(runs, rows, study, trials)

    @property
    def unit(self) -> str:
        """What pairs up: ``search`` or ``seed``."""
        return "search" if self.tuned else "seed"

    def workloads(self) -> list[str]:
        """The workloads with runs (complete searches or not), and the planned ones once any
        has landed: a workload without complete searches is a part without data."""
        return sorted(self.landed | set(self.planned if self.landed else []))

    def select(self, workload: str, **fields: object) -> pd.DataFrame:
        """The rows of ``workload`` whose columns equal ``fields`` (None: missing)."""
        rows = self.rows[self.rows["workload"] == workload] if len(self.rows) else self.rows
        for name, value in fields.items():
            rows = rows[rows[name].isna()] if value is None else rows[rows[name] == value]
        return rows

    def baseline(self, workload: str, batch_size: object = None) -> pd.DataFrame:
        """The workload's baseline rows (no echo stage), of one batch size if given."""
        rows = self.select(workload, echo_point="none")
        return rows if batch_size is None else rows[rows["batch_size"] == batch_size]

    @staticmethod
    def values(rows: pd.DataFrame, column: str = "fresh_examples_to_target") -> pd.Series:
        """One value per pair key (``seed``): ``column``, ``inf`` where the run (or every
        trial of the search) missed the target."""
        values = rows[column].to_numpy(float)
        reached = rows["reached"].astype(bool).to_numpy()
        return pd.Series(np.where(reached, values, math.inf), index=rows["seed"].to_numpy())

    @staticmethod
    def bounds(rows: pd.DataFrame, column: str = "fresh_examples_to_target") -> Bounds:
        """One value per pair key (``seed``) as `Bounds`: ``column`` where the run (or the
        search's best trial) reached the target; else from its cap (`CAPS`) to infinity,
        infinity itself for a run that diverged."""
        reached = rows["reached"].astype(bool).to_numpy()
        values = rows[column].to_numpy(float)
        cap = rows[CAPS[column]].to_numpy(float)
        if "diverged" in rows:
            cap = np.where(rows["diverged"].fillna(False).astype(bool), math.inf, cap)
        keys = rows["seed"].to_numpy()
        return Bounds(
            pd.Series(np.where(reached, values, cap), index=keys),
            pd.Series(np.where(reached, values, math.inf), index=keys),
        )

    def delta(self, rows: pd.DataFrame) -> float:
        """The resolution of fresh examples to target of ``rows`` (0 without rows)."""
        return crossing_step(rows) if len(rows) else 0.0

    def compare(
        self,
        x: pd.Series | pd.DataFrame | Bounds,
        y: pd.Series | pd.DataFrame | Bounds,
        margin: float,
        scale_y: float = 1.0,
        tie: float = 0.0,
    ) -> Comparison:
        """`analysis.claims.rules.compare` of ``x`` against ``y * scale_y``, paired by key.

        Args:
            x: Rows (their fresh examples to target as `bounds`), values by pair key (exact;
                ``inf``: missed, cap unknown) or `Bounds`.
            y: The same for the other side.
            margin: The claim's boundary on ``x - y``: 0 for "fewer", ``+delta`` for "at most".
            scale_y: A factor on ``y`` (e.g. ``1 / e`` for "never below the baseline / e").
                Default 1.
            tie: The tie band's half-width about ``margin`` (the resolution, for "fewer").
                Default 0.
        """

        def as_bounds(side: pd.Series | pd.DataFrame | Bounds) -> Bounds:
            if isinstance(side, Bounds):
                return side
            if isinstance(side, pd.Series):
                return Bounds(side, side)
            return self.bounds(side)

        xs, ys = as_bounds(x), as_bounds(y)
        keys = sorted(set(xs.low.index) & set(ys.low.index))
        return compare(
            (xs.low.loc[keys].to_numpy(), xs.high.loc[keys].to_numpy()),
            (scale_y * ys.low.loc[keys].to_numpy(), scale_y * ys.high.loc[keys].to_numpy()),
            margin,
            tie,
        )
