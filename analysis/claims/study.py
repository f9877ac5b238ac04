"""The runs one claim reads: a study's rows, each search reduced to its best trial, and the
pairs its comparisons are made of.

A tuned study's value per search is its best trial (`analysis.protocol.best_of_searches`),
and search ``r`` of one condition pairs with search ``r`` of another (the same Sobol points,
the same seeds); a study of fixed hyper-parameters pairs seed ``s`` with seed ``s``. Either
way the pair's key is the row's ``seed`` (a search's best-trial row carries its repetition
there).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from analysis.claims.rules import Comparison, compare
from analysis.protocol import best_of_searches, crossing_step

__all__ = ["MixedNumerics", "Plan", "StudyRuns", "resolution_of", "shift_fresh"]

Plan = Mapping[str, Mapping[str, int | None]]
"""Study -> workload -> the trials per search its config plans (None: seeds, no search): what
`analysis.claims.claims_table` reads from a config, so that a workload not landed yet is a
part without data and a search still training is left out."""


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


class MixedNumerics(ValueError):
    """A study's records were computed in more than one numerics mode or library version."""


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
        self.rows = best_of_searches(rows, trials) if len(rows) else rows

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

    def delta(self, rows: pd.DataFrame) -> float:
        """The resolution of fresh examples to target of ``rows`` (0 without rows)."""
        return crossing_step(rows) if len(rows) else 0.0

    def compare(
        self,
        x: pd.Series | pd.DataFrame,
        y: pd.Series | pd.DataFrame,
        margin: float,
        scale_y: float = 1.0,
    ) -> Comparison:
        """`analysis.claims.rules.compare` of ``x`` against ``y * scale_y``, paired by key.

        Args:
            x: Rows (their fresh examples to target, `values`) or values by pair key.
            y: The same for the other side.
            margin: The claim's margin (``-delta`` strict, ``+delta`` at most).
            scale_y: A factor on ``y`` (e.g. ``1 / e`` for "never below the baseline / e").
                Default 1.
        """
        xs = x if isinstance(x, pd.Series) else self.values(x)
        ys = y if isinstance(y, pd.Series) else self.values(y)
        keys = sorted(set(xs.index) & set(ys.index))
        return compare(xs.loc[keys].to_numpy(), scale_y * ys.loc[keys].to_numpy(), margin)
