"""Run records (one JSON file per training run) into two tidy tables: runs and eval curves.

A record is validated against ``run_contract/schemas/run_record.schema.json``, read as a file.
Its identity columns come from the one declaration of a run's identity,
`run_contract.identity` (a torch-free module: this package imports nothing else of
``experiments``). Runs are grouped into named studies (one figure each); a record may belong
to several studies and then gives one row per study.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from analysis._io import atomic_write, require_columns
from run_contract.identity import ROLES, identity_columns, run_columns
from run_contract.numerics import record_numerics
from run_contract.record import SCHEMA_PATH, load_record

__all__ = [
    "CURVE_COLUMNS",
    "RUN_COLUMNS",
    "SCHEMA_PATH",
    "aggregate",
    "load_record",
    "read_curves",
    "read_runs",
    "write_tables",
]


IDENTITY_COLUMNS = [column for role in ROLES for column in identity_columns(role)]
"""The runs table's columns that identify a run (`run_contract.identity.run_columns`)."""

RUN_COLUMNS = [
    "study", *IDENTITY_COLUMNS, "target_metric", "target_value", "target_direction", "reached",
    "fresh_examples_to_target", "steps_to_target", "wall_s_to_target", "crossing",
    "raw_fresh_examples_to_target", "refine_every_fresh", "diverged", "final_fresh_examples",
    "final_steps", "final_wall_s", "best_metric", "R", "upstream_s_per_batch",
    "downstream_s_per_step", "eval_s", "total_s", "numerics", "config_hash", "record",
]  # fmt: skip
"""Columns of the runs table, in order (one row per study and record).

``*_to_target`` are the refined crossing (the record's ``refined``: the first kept model
that reaches the target) where the run has one, ``crossing == "refined"``, else the
evaluation grid's (``"evaluation"``); ``raw_fresh_examples_to_target`` is always the grid's.
``numerics`` is `run_contract.numerics.record_numerics`: ``unpinned``, or the mode and the
library versions."""

CURVE_COLUMNS = [
    "study", "config_hash", "seed", "workload", "echo_point", "echo_factor", "fresh_examples",
    "steps", "wall_s", "metric", "record",
]  # fmt: skip
"""Columns of the eval-curves table, in order (one row per study, record and evaluation)."""

_TEXT_COLUMNS = ["consume", "hparams", "numerics"]
_BOOL_COLUMNS = ["stop_at_target", "reached", "diverged"]
_NULLABLE_COLUMNS = [
    "budget_cap", "resolution", "repetition", "trial", "fresh_examples_to_target",
    "raw_fresh_examples_to_target", "refine_every_fresh", "steps_to_target", "wall_s_to_target",
    "R", "upstream_s_per_batch", "downstream_s_per_step",
]  # fmt: skip


def _best(curve: list[dict[str, Any]], direction: str) -> float:
    values = [row["metric"] for row in curve]
    return max(values) if direction == "max" else min(values)


def _run_row(study: str, path: str, record: dict[str, Any]) -> dict[str, Any]:
    target, final, timing = record["target"], record["final"], record["timing"]
    refined = record.get("refined")
    crossing = record if refined is None else refined
    return {
        "study": study,
        **run_columns(record),
        "target_metric": target["metric"],
        "target_value": float(target["value"]),
        "target_direction": target["direction"],
        "reached": record["reached"],
        "fresh_examples_to_target": crossing["fresh_examples_to_target"],
        "steps_to_target": crossing["steps_to_target"],
        "wall_s_to_target": crossing["wall_s_to_target"],
        "crossing": "evaluation" if refined is None else "refined",
        "raw_fresh_examples_to_target": record["fresh_examples_to_target"],
        "refine_every_fresh": None if refined is None else refined["every_fresh"],
        "diverged": record.get("diverged", False),
        "final_fresh_examples": final["fresh_examples"],
        "final_steps": final["steps"],
        "final_wall_s": final["wall_s"],
        "best_metric": _best(record["eval_curve"], target["direction"]),
        "R": timing["R"],
        "upstream_s_per_batch": timing["upstream_s_per_batch"],
        "downstream_s_per_step": timing["downstream_s_per_step"],
        "eval_s": timing["eval_s"],
        "total_s": timing["total_s"],
        "numerics": record_numerics(record),
        "config_hash": record["config_hash"],
        "record": path,
    }


def _curve_rows(study: str, path: str, record: dict[str, Any]) -> list[dict[str, Any]]:
    fixed = {
        "study": study,
        "config_hash": record["config_hash"],
        "seed": record["seed"],
        "workload": record["workload"],
        "echo_point": record["echo_point"],
        "echo_factor": float(record["echo_factor"]),
    }
    measured = ("fresh_examples", "steps", "wall_s", "metric")
    return [
        {**fixed, **{key: row[key] for key in measured}, "record": path}
        for row in record["eval_curve"]
    ]


def _typed(rows: list[dict[str, Any]], columns: list[str]) -> pd.DataFrame:
    table = pd.DataFrame(rows, columns=columns)
    for column in [c for c in _NULLABLE_COLUMNS if c in columns]:  # null -> NaN, not object
        table[column] = pd.to_numeric(table[column], errors="coerce").astype(float)
    for column in [c for c in _BOOL_COLUMNS if c in columns]:
        table[column] = table[column].astype(bool)
    return table


def aggregate(
    studies: Mapping[str, Sequence[str | os.PathLike[str]]],
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Read every study's records into the runs and eval-curves tables.

    Args:
        studies: Study name -> the record files that belong to it. A record listed under
            several studies is read once and gives one row per study.

    Returns:
        ``(runs, eval_curves)``: ``runs`` has one row per (study, record) with the columns
        ``RUN_COLUMNS``; ``eval_curves`` one row per (study, record, evaluation) with the
        columns ``CURVE_COLUMNS``. Absent optional fields read as their defaults:
        ``stop_at_target`` True, ``consume`` "". ``best_metric`` is the best metric over the
        whole eval curve in the target's direction.

    Raises:
        ValueError: A record breaks the schema (the message names the file and field), or a
            study name is empty.
    """
    records: dict[str, dict[str, Any]] = {}
    runs, curves = [], []
    for study, paths in studies.items():
        if not study:
            raise ValueError("studies: a study name must be non-empty")
        for path in map(str, paths):
            if path not in records:
                records[path] = load_record(path)
            runs.append(_run_row(study, path, records[path]))
            curves.extend(_curve_rows(study, path, records[path]))
    return _typed(runs, RUN_COLUMNS), _typed(curves, CURVE_COLUMNS)


def write_tables(
    runs: pd.DataFrame,
    curves: pd.DataFrame,
    runs_csv: str | os.PathLike[str],
    curves_csv: str | os.PathLike[str],
) -> None:
    """Write the two tables as CSV files, each atomically (temporary file, then rename).

    Args:
        runs: The runs table from ``aggregate``.
        curves: The eval-curves table from ``aggregate``.
        runs_csv: Where to write ``runs``.
        curves_csv: Where to write ``curves``.
    """
    for table, path in ((runs, runs_csv), (curves, curves_csv)):
        atomic_write(path, lambda temporary, table=table: table.to_csv(temporary, index=False))


def _read(path: str | os.PathLike[str], columns: list[str]) -> pd.DataFrame:
    table = pd.read_csv(path, dtype={column: str for column in _TEXT_COLUMNS})
    require_columns(table, columns, str(path), hint=f"; expected {columns}")
    for column in [c for c in _TEXT_COLUMNS if c in columns]:
        table[column] = table[column].fillna("")
    return _typed(table.to_dict("records"), columns)


def read_runs(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read a runs table written by ``write_tables``, with its types restored.

    Args:
        path: The runs CSV.

    Raises:
        ValueError: A column of ``RUN_COLUMNS`` is missing.
    """
    return _read(path, RUN_COLUMNS)


def read_curves(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read an eval-curves table written by ``write_tables``.

    Args:
        path: The eval-curves CSV.

    Raises:
        ValueError: A column of ``CURVE_COLUMNS`` is missing.
    """
    return _read(path, CURVE_COLUMNS)
