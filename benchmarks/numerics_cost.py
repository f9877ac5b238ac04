"""What the portable numerics mode costs: training step time per workload, pinned beside native.

    python -m benchmarks.numerics_cost --out benchmarks/results/numerics_cost.csv

Each workload trains ``--steps`` steps at cpu scale on one thread, once per mode and round, in
its own process (a mode is fixed when a process starts, `run_contract.numerics`). The two modes
alternate within a round, and the first mode alternates between rounds, so drift on a shared
machine falls on both. The step time is the record's ``downstream_s_per_step`` (forward,
backward and update; input pipeline and evaluation excluded). Each record's numerics stamp is
checked, so a row is known to have run in the mode it names.

Writes one row per run (``kind=run``) and one per workload (``kind=summary``: the median step
time of each mode and their ratio, ``portable_over_native``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import machine_note, print_table, write_csv
from experiments import registry
from run_contract import numerics

__all__ = ["main", "measure", "summarise"]

MODES: tuple[str, ...] = ("native", "portable")
"""The modes compared; the ratio is the second's step time over the first's."""


def _train(workload: str, mode: str, steps: int, out: Path) -> dict[str, Any]:
    """One run of ``steps`` steps of ``workload`` in numerics ``mode``; its record."""
    batch = registry.defaults(workload, "cpu").hparams["batch_size"]
    fresh = steps * batch
    command = [
        sys.executable, "-m", "experiments.run", "--workload", workload, "--device", "cpu",
        "--threads", "1", "--max-fresh", str(fresh), "--eval-every-fresh", str(fresh),
        "--no-stop-at-target", "--out", str(out),
    ]  # fmt: skip
    env = {**os.environ, numerics.ENV: mode}
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{workload} in mode {mode} failed:\n{done.stderr[-2000:]}")
    record = json.loads(out.read_text())
    if numerics.record_mode(record) != mode:
        raise RuntimeError(f"{out}: trained in mode {numerics.record_mode(record)}, not {mode}")
    return record


def measure(workloads: Sequence[str], steps: int, rounds: int) -> list[dict[str, Any]]:
    """Train every workload ``rounds`` times in each mode, alternating; one row per run.

    Args:
        workloads: Registered workload names.
        steps: Training steps per run.
        rounds: Runs per workload and mode.

    Returns:
        Rows with ``workload``, ``round``, ``mode``, ``steps``, ``s_per_step``, the
        capability ATen ran (``aten``), and the CPU (``cpu_model``, ``cpu_vector_isa``: its widest
        vector instruction set).
    """
    rows = []
    with tempfile.TemporaryDirectory(prefix="numerics-cost-") as folder:
        for workload in workloads:
            for round_ in range(rounds):
                order = MODES if round_ % 2 == 0 else MODES[::-1]
                for mode in order:
                    record = _train(workload, mode, steps, Path(folder) / f"{workload}.json")
                    rows.append({
                        "kind": "run",
                        "workload": workload,
                        "round": round_,
                        "mode": mode,
                        "steps": record["final"]["steps"],
                        "s_per_step": record["timing"]["downstream_s_per_step"],
                        "aten": record["numerics"]["observed"]["aten"],
                        "cpu_model": record["machine"]["cpu_model"],
                        "cpu_vector_isa": record["machine"]["cpu_vector_isa"],
                        "portable_over_native": "",
                    })  # fmt: skip
                    print(f"{workload} round {round_} {mode}: {rows[-1]['s_per_step']:.4f} s/step",
                          file=sys.stderr)  # fmt: skip
    return rows


def summarise(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per workload: the median step time of each mode and the ratio portable / native.

    Args:
        rows: `measure`'s rows.

    Returns:
        One ``kind=summary`` row per workload (``s_per_step`` holds native's median,
        ``portable_over_native`` the ratio of medians).
    """
    out = []
    for workload in dict.fromkeys(r["workload"] for r in rows):
        median = {
            mode: statistics.median(
                r["s_per_step"] for r in rows if r["workload"] == workload and r["mode"] == mode
            )
            for mode in MODES
        }
        out.append({
            "kind": "summary",
            "workload": workload,
            "round": "",
            "mode": "native",
            "steps": "",
            "s_per_step": median["native"],
            "aten": "",
            "cpu_model": "",
            "cpu_vector_isa": "",
            "portable_over_native": median["portable"] / median["native"],
        })  # fmt: skip
    return out


def main(argv: Sequence[str] | None = None) -> None:
    """Run the comparison and write the CSV."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.numerics_cost", description=__doc__)
    parser.add_argument(
        "--workloads", nargs="+", default=registry.names(), choices=registry.names(),
        help="workloads to time (default: all)",
    )  # fmt: skip
    parser.add_argument("--steps", type=int, default=40, help="training steps per run")
    parser.add_argument("--rounds", type=int, default=3, help="runs per workload and mode")
    parser.add_argument("--out", required=True, help="CSV to write")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.rounds < 1:
        parser.error(f"--steps and --rounds must be >= 1, got {args.steps} and {args.rounds}")
    rows = measure(args.workloads, args.steps, args.rounds)
    summary = summarise(rows)
    write_csv([*rows, *summary], args.out)
    print(machine_note())
    print_table(summary, ["workload", "s_per_step", "portable_over_native"])


if __name__ == "__main__":
    main()
