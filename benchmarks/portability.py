"""Does the portable numerics mode give the same bits on another CPU? A reference table and
its check.

    python -m benchmarks.portability make --out benchmarks/reference/portability.csv
    python -m benchmarks.portability check benchmarks/reference/portability.csv [--cheapest K]
        [--workload W] [--under 'qemu-x86_64 -cpu Haswell-v4']

``make`` trains `RUNS`, short runs spread over the five workloads and the echo insertion
points, each in the ``portable`` mode in its own process, and writes one row per run: its
``python -m experiments.run`` options, a digest of everything it computed (every
evaluation's fresh examples, steps and metrics; timing aside), its last metric, and the CPU
and library versions it ran on. ``check`` trains the table's runs again here and compares
digests; it exits 3 when any differs. On the machine that made the table it only shows
same-machine determinism; on another CPU type it is the real check, and ``--under`` an
emulator it checks a CPU that is not here (the libraries dispatch on the emulated CPU's
vendor and instruction sets; the arithmetic is the emulator's). Rows made with other
library versions than this environment's cannot be compared, and are reported as such.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import shlex
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from analysis.verify import retrain
from benchmarks.common import print_table, write_csv
from experiments import registry
from run_contract.identity import RunSpec

__all__ = ["RUNS", "check", "digest", "main", "make", "read_table", "run_args"]

RUNS: tuple[tuple[str, str, float], ...] = (
    *(
        (workload, point, factor)
        for workload in (
            "cifar10_resnet",
            "common_crawl_transformer",
            "imagenet_resnet",
            "lm1b_transformer",
        )
        for point, factor in (
            ("none", 1.0),
            ("before_augment", 2.0),
            ("after_augment", 2.0),
            ("after_batch", 2.0),
            ("after_augment", 1.5),
        )
    ),
    ("coco_ssd", "none", 1.0),
    ("coco_ssd", "after_augment", 2.0),
)
"""(workload, echo point, echo factor) of each reference run: 22 runs."""

BATCHES = 8
"""Fresh batches each run trains on; it evaluates every `BATCHES` / 2."""

_VERSIONS = ("torch", "mkl", "onednn", "numpy")


def run_args(workload: str, echo_point: str, echo_factor: float) -> list[str]:
    """A reference run's ``python -m experiments.run`` identity options (`RunSpec.args`)."""
    batch = registry.defaults(workload, "cpu").hparams["batch_size"]
    spec = RunSpec(
        workload=workload,
        echo_point=echo_point,
        echo_factor=echo_factor,
        shuffle_buffer=0,
        max_fresh=BATCHES * batch,
        eval_every_fresh=BATCHES // 2 * batch,
        stop_at_target=False,
    )
    return spec.args()


def digest(record: Mapping[str, Any]) -> str:
    """SHA-256 (16 hex digits) of what a run computed: each evaluation's fresh examples,
    steps and metrics, and its final fresh examples and steps; timing aside."""
    computed = {
        "curve": [
            [row["fresh_examples"], row["steps"], row["metrics"]] for row in record["eval_curve"]
        ],
        "final": [record["final"]["fresh_examples"], record["final"]["steps"]],
    }
    text = json.dumps(computed, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _row(args: Sequence[str], record: Mapping[str, Any]) -> dict[str, Any]:
    numerics, machine = record["numerics"], record["machine"]
    return {
        "workload": record["workload"],
        "echo_point": record["echo_point"],
        "echo_factor": record["echo_factor"],
        "args": " ".join(args),
        "digest": digest(record),
        "last_metric": repr(record["eval_curve"][-1]["metric"]),
        "steps": record["final"]["steps"],
        "mode": numerics["mode"],
        "cpu_model": machine["cpu_model"],
        "cpu_vector_isa": machine["cpu_vector_isa"],
        "aten": numerics["observed"]["aten"],
        "mkl_branch": numerics["observed"]["mkl"],
        **{version: numerics["versions"][version] for version in _VERSIONS},
        "train_s": record["timing"]["total_s"],
    }


def make(runs: Sequence[tuple[str, str, float]] = RUNS) -> list[dict[str, Any]]:
    """Train ``runs`` in the portable mode; one table row each."""
    rows = []
    for index, run in enumerate(runs, 1):
        args = run_args(*run)
        rows.append(_row(args, retrain(args, "portable", threads=1)))
        print(f"[{index}/{len(runs)}] {' '.join(map(str, run))}: {rows[-1]['digest']}",
              file=sys.stderr)  # fmt: skip
    return rows


def check(table: Sequence[Mapping[str, str]], launcher: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Train ``table``'s runs again in the portable mode and compare digests.

    Args:
        table: Rows of a table `make` wrote (read as strings).
        launcher: A command each training process runs under (`analysis.verify.retrain`),
            e.g. ``["qemu-x86_64", "-cpu", "Haswell-v4"]``: the libraries then see the
            emulated CPU (vendor, instruction sets) while ``/proc/cpuinfo``, and so the
            record's ``machine``, still names this one. Default none.

    Returns:
        One row per run: ``args``, the table's CPU (``made_on``) and this one
        (``checked_on``, prefixed by the launcher if any), both digests, and ``agrees``:
        True, False, or ``"versions differ"`` when the table was made with other library
        versions (then nothing is concluded).
    """
    out = []
    for index, made in enumerate(table, 1):
        record = retrain(made["args"].split(), "portable", threads=1, launcher=launcher)
        now = _row(made["args"].split(), record)
        versions = [v for v in _VERSIONS if str(now[v]) != made[v]]
        agrees: bool | str = now["digest"] == made["digest"]
        if versions:
            agrees = "versions differ: " + ", ".join(
                f"{v} {made[v]} here {now[v]}" for v in versions
            )
        here = f"{now['cpu_model']} ({now['cpu_vector_isa']})"
        out.append({
            "args": made["args"],
            "made_on": f"{made['cpu_model']} ({made['cpu_vector_isa']})",
            "checked_on": f"{shlex.join(launcher)} on {here}" if launcher else here,
            "digest_made": made["digest"],
            "digest_now": now["digest"],
            "last_metric_made": made["last_metric"],
            "last_metric_now": now["last_metric"],
            "agrees": agrees,
        })  # fmt: skip
        print(f"[{index}/{len(table)}] {made['args']}: {agrees}", file=sys.stderr)
    return out


def read_table(path: str | Path) -> list[dict[str, str]]:
    """The rows of a table `make` wrote."""
    with Path(path).open(newline="") as handle:
        return list(csv.DictReader(handle))


def main(argv: Sequence[str] | None = None) -> None:
    """Run ``make`` or ``check`` from the command line."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.portability",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    made = commands.add_parser("make", help="train the reference runs and write the table")
    made.add_argument("--out", required=True, help="CSV to write")
    checked = commands.add_parser("check", help="train a table's runs again and compare")
    checked.add_argument("table", help="a table `make` wrote")
    checked.add_argument(
        "--cheapest", type=int, metavar="K", help="only the K runs quickest to train"
    )
    checked.add_argument(
        "--workload",
        action="append",
        choices=sorted({workload for workload, _, _ in RUNS}),
        help="only this workload's runs (repeatable; default: all)",
    )
    checked.add_argument(
        "--under",
        metavar="COMMAND",
        default="",
        help="train each run under this command, e.g. an emulated CPU: "
        "--under 'qemu-x86_64 -cpu Haswell-v4' (an Intel AVX2 CPU; default: none)",
    )
    checked.add_argument("--out", help="CSV of the comparison (default: none)")
    args = parser.parse_args(argv)
    if args.command == "make":
        rows = make()
        write_csv(rows, args.out)
        print_table(rows, ["workload", "echo_point", "digest", "last_metric", "train_s"])
        return
    launcher = shlex.split(args.under)
    if launcher and shutil.which(launcher[0]) is None:
        parser.error(f"argument --under: {launcher[0]!r} is not a program on PATH")
    table = read_table(args.table)
    if args.workload:
        table = [row for row in table if row["workload"] in args.workload]
    if args.cheapest is not None:
        if args.cheapest < 1:
            parser.error(f"argument --cheapest: must be >= 1, got {args.cheapest}")
        table = sorted(table, key=lambda row: float(row["train_s"]))[: args.cheapest]
    rows = check(table, launcher)
    if args.out:
        write_csv(rows, args.out)
    print_table(rows, ["args", "made_on", "checked_on", "agrees"])
    if any(row["agrees"] is False for row in rows):
        raise SystemExit(3)


if __name__ == "__main__":
    main()
