"""``python -m analysis verify``: train committed records again and report bit agreement.

A record is its study's evidence only if anyone can retrain it and get its bits. This command
takes a sample of a config's committed records (the cheapest K, a seeded random K, or given
paths), trains each again here, in its own process and in the record's numerics mode
(`run_contract.numerics`; an unpinned record in ``native``), and compares everything a run
computes: every evaluation's fresh examples, steps and metrics, the crossing and the refined
crossing. Timing is not compared.

Each row names the CPU the record was trained on and the one it was retrained on, so a
disagreement between an ``unpinned`` record and a rerun on another CPU type reads as what it
is (unpinned numerics are the same on one CPU type only), while a ``portable`` record must
agree on any x86-64 CPU with AVX2.

With ``--trained-in DIR`` nothing is trained: each record is compared with its namesake that
a whole workflow run trained into another out_dir (``DIR/<workload>/<file>``).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from run_contract.numerics import ENV, UNPINNED, record_mode

__all__ = ["COLUMNS", "DEFAULT_CHEAPEST", "compare", "retrain", "select", "verify"]

COLUMNS: tuple[str, ...] = (
    "record",
    "numerics",
    "trained_on",
    "verified_on",
    "identical",
    "first_differing_eval",
    "first_differing_fresh",
    "largest_metric_difference",
    "fresh_to_target_was",
    "fresh_to_target_now",
    "refined_fresh_was",
    "refined_fresh_now",
    "other_differences",
)
"""The CSV's columns, one row per record."""

DEFAULT_CHEAPEST = 3
"""Records verified when neither paths nor a sample size are given: the cheapest three."""

_COMPUTED = ("fresh_examples_to_target", "steps_to_target", "reached", "config_hash")
"""Top-level record fields a rerun must reproduce (besides the eval curve and refinement)."""


def _cpu(record: Mapping[str, Any]) -> str:
    machine = record.get("machine") or {}
    model = machine.get("cpu_model") or "CPU not recorded"
    isa = machine.get("cpu_vector_isa")
    return f"{model} ({isa})" if isa else model


def _point(row: Mapping[str, Any]) -> tuple:
    return row["fresh_examples"], row["steps"], row["metric"], sorted(row["metrics"].items())


def _refined(record: Mapping[str, Any], key: str) -> Any:
    return (record.get("refined") or {}).get(key, "")


def compare(old: Mapping[str, Any], new: Mapping[str, Any], name: str) -> dict[str, Any]:
    """How a rerun agrees with a committed record, timing aside.

    Args:
        old: The committed record.
        new: The record trained again.
        name: The committed record's path (the row's ``record``).

    Returns:
        One row of `COLUMNS`: ``identical`` is True when every evaluation (fresh examples,
        steps, every metric), the crossing and the refined crossing agree bit for bit;
        ``first_differing_eval`` is the index of the first evaluation that does not ("" when
        none does; the shorter curve's length when one curve is a prefix of the other).
    """
    curve_old, curve_new = old["eval_curve"], new["eval_curve"]
    pairs = list(zip(curve_old, curve_new, strict=False))
    differing = [i for i, (a, b) in enumerate(pairs) if _point(a) != _point(b)]
    if not differing and len(curve_old) != len(curve_new):
        differing = [len(pairs)]
    other = [key for key in _COMPUTED if old.get(key) != new.get(key)]
    refined_old = {k: v for k, v in (old.get("refined") or {}).items() if k != "wall_s_to_target"}
    refined_new = {k: v for k, v in (new.get("refined") or {}).items() if k != "wall_s_to_target"}
    if refined_old != refined_new:
        other.append("refined")
    first = differing[0] if differing else ""
    return {
        "record": name,
        "numerics": record_mode(old),
        "trained_on": _cpu(old),
        "verified_on": _cpu(new),
        "identical": not differing and not other,
        "first_differing_eval": first,
        "first_differing_fresh": curve_old[first]["fresh_examples"]
        if first != "" and first < len(curve_old)
        else "",
        "largest_metric_difference": max(
            (abs(a["metric"] - b["metric"]) for a, b in pairs), default=0.0
        ),
        "fresh_to_target_was": old["fresh_examples_to_target"],
        "fresh_to_target_now": new["fresh_examples_to_target"],
        "refined_fresh_was": _refined(old, "fresh_examples_to_target"),
        "refined_fresh_now": _refined(new, "fresh_examples_to_target"),
        "other_differences": " ".join(other),
    }


def select(
    paths: Sequence[str],
    *,
    cheapest: int | None = None,
    sample: int | None = None,
    seed: int = 0,
) -> list[str]:
    """The records to verify among ``paths`` (committed records of one config).

    Args:
        paths: Candidate record files.
        cheapest: Take the ``cheapest`` with the least training time (the record's
            ``timing.total_s``). Default None.
        sample: Take ``sample`` drawn at random with ``seed``. Default None. With neither,
            every path.
        seed: The draw's seed. Default 0.

    Returns:
        Record paths, in the order they will be trained.
    """
    if cheapest is not None:

        def cost(path: str) -> float:
            return json.loads(Path(path).read_text())["timing"]["total_s"]

        return sorted(paths, key=cost)[:cheapest]
    if sample is not None:
        return random.Random(seed).sample(sorted(paths), min(sample, len(paths)))
    return list(paths)


def retrain(
    args: Sequence[str], mode: str, threads: int, launcher: Sequence[str] = ()
) -> dict[str, Any]:
    """Train one run again in a new process and return its record.

    Args:
        args: The run's ``python -m experiments.run`` identity options (`RunSpec.args`).
        mode: The numerics mode to train in (`run_contract.numerics.MODES`).
        threads: torch threads (the committed record's, which matrix products depend on).
        launcher: A command the training process runs under, its words before
            ``python``: an emulated CPU (``["qemu-x86_64", "-cpu", "Haswell-v4"]``) or a
            job launcher. Default none.

    Raises:
        RuntimeError: The run failed; the message ends with its error output.
    """
    with tempfile.TemporaryDirectory(prefix="verify-") as folder:
        out = Path(folder) / "record.json"
        command = [
            *launcher, sys.executable, "-m", "experiments.run", *args, "--device", "cpu",
            "--threads", str(threads), "--out", str(out),
        ]  # fmt: skip
        done = subprocess.run(
            command, env={**os.environ, ENV: mode}, capture_output=True, text=True
        )
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)}: training failed\n{done.stderr[-2000:]}")
        return json.loads(out.read_text())


def verify(
    planned: Mapping[str, Sequence[str]],
    trained_in: str | None = None,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Train each record again (or read its namesake in ``trained_in``) and compare.

    Args:
        planned: Committed record path -> its run's identity options (`RunSpec.args`).
        trained_in: A records folder a workflow trained again (``out_dir/records``): compare
            with its records instead of training. Default None.
        progress: Print one line per record on stderr. Default True.

    Returns:
        One `compare` row per record, in ``planned``'s order.
    """
    rows = []
    for index, (path, args) in enumerate(planned.items(), 1):
        old = json.loads(Path(path).read_text())
        if trained_in is not None:
            again = Path(trained_in) / old["workload"] / Path(path).name
            if not again.is_file():
                raise ValueError(f"{again} does not exist (--trained-in {trained_in})")
            new = json.loads(again.read_text())
        else:
            mode = record_mode(old)
            new = retrain(args, "native" if mode == UNPINNED else mode, old.get("threads", 1))
        rows.append(compare(old, new, path))
        if progress:
            row = rows[-1]
            said = "identical" if row["identical"] else (
                f"DIFFERS from evaluation {row['first_differing_eval']} "
                f"{row['other_differences']}".rstrip()
            )  # fmt: skip
            print(f"[{index}/{len(planned)}] {path}: {said}", file=sys.stderr)
    return rows
