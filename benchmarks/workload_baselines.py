"""Each cpu-scale workload at e=1: fresh examples, steps and wall time to its target over seeds,
and the measured per-batch upstream and downstream times.

Runs the harness in this process, one run at a time, with one torch thread, and writes one
row per (workload, seed) plus a printed summary (median and range over seeds).

    python -m benchmarks.workload_baselines --seeds 0 1 2 3 4 \\
        --out benchmarks/results/workload_baselines.csv
"""

from __future__ import annotations

import argparse
import statistics

from benchmarks.common import machine_note, print_table, write_csv
from experiments import registry
from experiments.harness import RunConfig, run
from run_contract.identity import RunOptions, RunSpec

__all__ = ["COLUMNS", "baseline_row", "main", "summarise"]

COLUMNS = (
    "workload",
    "seed",
    "reached",
    "fresh_examples_to_target",
    "steps_to_target",
    "wall_s_to_target",
    "upstream_ms_per_batch",
    "downstream_ms_per_step",
    "R",
)


def baseline_row(workload: str, seed: int, threads: int) -> dict:
    """Run ``workload`` at e=1 with ``seed`` and summarise its record in one row."""
    config = RunConfig(
        RunSpec(workload=workload, seed=seed), RunOptions(device="cpu", threads=threads)
    )
    record = run(config, progress=False)
    timing = record["timing"]
    return {
        "workload": workload,
        "seed": seed,
        "reached": record["reached"],
        "fresh_examples_to_target": record["fresh_examples_to_target"],
        "steps_to_target": record["steps_to_target"],
        "wall_s_to_target": record["wall_s_to_target"],
        "upstream_ms_per_batch": 1000 * timing["upstream_s_per_batch"],
        "downstream_ms_per_step": 1000 * timing["downstream_s_per_step"],
        "R": timing["R"],
    }


def summarise(rows: list[dict]) -> list[dict]:
    """Median and range over seeds of each workload's numbers."""
    out = []
    for workload in sorted({row["workload"] for row in rows}):
        mine = [row for row in rows if row["workload"] == workload]
        summary = {
            "workload": workload,
            "reached": f"{sum(r['reached'] for r in mine)}/{len(mine)}",
        }
        for column in COLUMNS[3:]:
            values = [row[column] for row in mine if row[column] is not None]
            if values:
                low, mid, high = min(values), statistics.median(values), max(values)
                summary[column] = f"{mid:.3g} ({low:.3g}-{high:.3g})"
            else:
                summary[column] = "-"
        out.append(summary)
    return out


def main() -> None:
    """Parse arguments, run every (workload, seed), write the CSV and print the summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", nargs="+", default=None, help="default: all registered")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", required=True, help="CSV path (written atomically)")
    args = parser.parse_args()
    workloads = args.workloads or registry.names()
    rows = [baseline_row(w, seed, args.threads) for w in workloads for seed in args.seeds]
    write_csv(rows, args.out)
    print(machine_note())
    print_table(summarise(rows), ["workload", "reached", *COLUMNS[3:]])


if __name__ == "__main__":
    main()
