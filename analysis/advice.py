"""The evidence `echo.advise` reads, computed from the protocol study's records.

`echo` is a leaf library, so the fresh-examples ratios it advises from travel inside it as a
small file, ``echo/evidence.json``. This module makes that file from the protocol study's
runs table (the paper's estimator, `analysis.time_to_target`): for each workload, insertion
point and factor of the tuned insertion and echo-factor studies, the fresh examples to target
relative to the tuned baseline's median, as a median and a min-max over the searches::

    python -m analysis advice --runs results/protocol/runs.csv --out echo/evidence.json

A test holds the committed file equal to what this computes from the committed records.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from analysis._io import atomic_write
from analysis.records import read_runs
from analysis.time_to_target import relative_to_baseline, summarize

__all__ = ["FAMILIES", "STUDIES", "add_command", "dumps", "evidence", "run"]

STUDIES = ("insertion", "echo_factor")
"""The tuned studies that measure each insertion point and factor at a workload's defaults."""

FAMILIES = {
    "cifar10_resnet": "image classification",
    "imagenet_resnet": "image classification",
    "lm1b_transformer": "language modelling",
    "common_crawl_transformer": "language modelling",
    "coco_ssd": "object detection",
}
"""The paper's workload families (a new workload must be placed in one to be advised on)."""

_DIGITS = 4


def evidence(runs: pd.DataFrame, source: str) -> dict[str, Any]:
    """The evidence file's content: one row per workload, insertion point and factor.

    Args:
        runs: The protocol study's runs table (`analysis.records.read_runs`).
        source: The runs table's path, recorded in the file.

    Returns:
        ``{"source", "summary", "scale", "statistic", "rows"}``; each row holds
        ``workload``, ``family``, ``study``, ``echo_point``, ``echo_factor``,
        ``shuffle_buffer``, ``ratio`` (median), ``low`` and ``high`` (min and max over the
        searches), ``searches`` (that reached the target) and ``trials_per_search``.

    Raises:
        ValueError: A workload of those studies has no family in `FAMILIES`, or the table
            holds none of `STUDIES`' tuned echo conditions.
    """
    relative = relative_to_baseline(runs[runs["study"].isin(STUDIES)])
    trials = relative.groupby(["study", "workload"])["trials"].max()
    summary = summarize(relative)
    summary = summary[(summary["echo_point"] != "none") & (summary["n_reached"] > 0)]
    if summary.empty:
        raise ValueError(f"{source} holds no tuned echo condition of the studies {STUDIES}")
    unplaced = sorted(set(summary["workload"]) - set(FAMILIES))
    if unplaced:
        raise ValueError(
            f"workloads {unplaced} have no family in analysis.advice.FAMILIES; valid families: "
            f"{sorted(set(FAMILIES.values()))}"
        )
    summary = summary.sort_values(["workload", "echo_point", "echo_factor", "study"])
    summary = summary.drop_duplicates(["workload", "echo_point", "echo_factor"])
    rows = [
        {
            "workload": row.workload,
            "family": FAMILIES[row.workload],
            "study": row.study,
            "echo_point": row.echo_point,
            "echo_factor": float(row.echo_factor),
            "shuffle_buffer": int(row.shuffle_buffer),
            "ratio": round(float(row.fresh_rel_median), _DIGITS),
            "low": round(float(row.fresh_rel_min), _DIGITS),
            "high": round(float(row.fresh_rel_max), _DIGITS),
            "searches": int(row.n_reached),
            "trials_per_search": _count(trials.get((row.study, row.workload))),
        }
        for row in summary.itertuples(index=False)
    ]
    summary_table = str(Path(source).with_name("summary.csv"))
    return {
        "source": source,
        "summary": summary_table,
        "scale": "cpu",
        "statistic": (
            "fresh examples to target with echoing over the tuned baseline's median; median "
            "and min-max over searches, each search its trial that reached the target with "
            "the fewest fresh examples"
        ),
        "rows": rows,
    }


def _count(value: Any) -> int | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else int(value)


def dumps(content: dict[str, Any]) -> str:
    """The evidence file's text: JSON, one row per line, so that a change reads as a diff."""
    head = {key: value for key, value in content.items() if key != "rows"}
    lines = [json.dumps(head, indent=1)[:-2] + ',\n "rows": [']
    lines += [" " + json.dumps(row) + "," for row in content["rows"]]
    lines[-1] = lines[-1].rstrip(",")
    return "\n".join([*lines, " ]", "}"]) + "\n"


def add_command(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``advice`` on ``python -m analysis``'s subcommands and return its parser."""
    command = commands.add_parser(
        "advice", help="the evidence echo.advise reads (echo/evidence.json), from the records"
    )
    command.add_argument("--runs", required=True, help="the protocol study's runs CSV")
    command.add_argument("--out", required=True, help="JSON to write, e.g. echo/evidence.json")
    return command


def run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``python -m analysis advice``: write the evidence file and say how many rows it holds."""
    if not Path(args.runs).is_file():
        parser.error(f"--runs {args.runs} does not exist")
    content = evidence(read_runs(args.runs), args.runs)
    text = dumps(content)
    atomic_write(args.out, lambda temporary: temporary.write_text(text))
    print(f"wrote {args.out}: {len(content['rows'])} workload, point and factor rows")
