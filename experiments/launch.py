"""``python -m experiments.launch``: train one workload at several learning rates side by side,
each process with its own input pipeline or all from one shared loader, and record
per-process throughput, total CPU seconds and wall time.

    python -m experiments.launch --workload cifar10_resnet --lrs 0.1 0.05 0.02 0.01 \\
        --loading shared --num-workers 2 --out results/launch/shared

Writes one run record per process (``run_lr<LR>.json``) and ``launch.json``: the mode, each
process's steps, fresh examples, training seconds and steps per second, the CPU seconds of
every process involved (producer and loader workers included, sampled from /proc) and the
wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from experiments import registry
from experiments.procstat import TreeCpu
from run_contract.record import write_json_atomically

__all__ = ["launch", "main"]

LOADING = ("shared", "independent")


def _producer(args: argparse.Namespace) -> tuple[subprocess.Popen, str]:
    kwargs = {"workload": args.workload, "num_workers": args.num_workers, "seed": args.seed}
    command = [
        sys.executable, "-m", "sharing", "serve",
        "--loader", "experiments.consume:workload_loader",
        "--loader-kwargs", json.dumps(kwargs),
        "--epochs", "0", "--consumers", str(len(args.lrs)), "--log-level", "WARNING",
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    endpoint = process.stdout.readline().strip() if process.stdout else ""
    if not endpoint.startswith("unix:"):
        process.kill()
        raise RuntimeError(f"the producer did not start (exit status {process.wait()})")
    return process, endpoint


def _trainer(args: argparse.Namespace, lr: float, out: Path, endpoint: str | None):
    command = [
        sys.executable, "-m", "experiments.run", "--workload", args.workload,
        "--lr", str(lr), "--seed", str(args.seed), "--threads", str(args.threads),
        "--out", str(out),
    ]  # fmt: skip
    if args.max_fresh:
        command += ["--max-fresh", str(args.max_fresh)]
    if args.eval_every_fresh:
        command += ["--eval-every-fresh", str(args.eval_every_fresh)]
    if endpoint:
        command += ["--consume", endpoint]
    else:
        command += ["--num-workers", str(args.num_workers)]
    return subprocess.Popen(command)


def launch(args: argparse.Namespace) -> dict[str, Any]:
    """Start the processes of one launch, wait for the trainers, and summarize."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with TreeCpu(os.getpid()) as tree:
        producer, endpoint = _producer(args) if args.loading == "shared" else (None, None)
        records = {lr: out / f"run_lr{lr:g}.json" for lr in args.lrs}
        trainers = [_trainer(args, lr, path, endpoint) for lr, path in records.items()]
        statuses = [trainer.wait() for trainer in trainers]
        if producer is not None:
            producer.send_signal(signal.SIGTERM)
            producer.wait(timeout=30)
        tree.sample()
    wall = time.perf_counter() - start
    runs = []
    for (lr, path), status in zip(records.items(), statuses, strict=True):
        record = json.loads(path.read_text()) if status == 0 and path.exists() else None
        final = record["final"] if record else {}
        runs.append(
            {
                "lr": lr,
                "exit_status": status,
                "reached": record["reached"] if record else None,
                "steps": final.get("steps"),
                "fresh_examples": final.get("fresh_examples"),
                "train_s": final.get("wall_s"),
                "steps_per_s": final["steps"] / final["wall_s"] if final.get("wall_s") else None,
                "record": path.name,
            }
        )
    summary = {
        "workload": args.workload,
        "loading": args.loading,
        "processes": len(args.lrs),
        "num_workers": args.num_workers,
        "runs": runs,
        "cpu_s": tree.total,
        "wall_s": wall,
    }
    write_json_atomically(summary, out / "launch.json")
    return summary


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns 0 when every trainer wrote its record."""
    parser = argparse.ArgumentParser(
        prog="python -m experiments.launch", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--workload", required=True, choices=registry.names())
    parser.add_argument("--lrs", type=float, nargs="+", required=True, help="one process each")
    parser.add_argument(
        "--loading", choices=LOADING, default="shared", help="shared (default) or independent"
    )
    parser.add_argument("--num-workers", type=int, default=2, help="loader workers, per loader (2)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per trainer (1)")
    parser.add_argument("--seed", type=int, default=0, help="seed (0)")
    parser.add_argument("--max-fresh", type=int, help="fresh-example budget per trainer")
    parser.add_argument("--eval-every-fresh", type=int, help="evaluation interval")
    parser.add_argument("--out", required=True, help="folder for the records and launch.json")
    args = parser.parse_args(argv)
    if any(lr <= 0 for lr in args.lrs):
        parser.error(f"argument --lrs: learning rates must be > 0, got {args.lrs}")
    if len(set(args.lrs)) != len(args.lrs):
        parser.error(f"argument --lrs: learning rates must differ, got {args.lrs}")
    summary = launch(args)
    for run in summary["runs"]:
        print(f"lr={run['lr']:g}: {run['steps']} steps, {run['steps_per_s'] or 0:.2f} steps/s")
    print(f"{args.loading}: {summary['cpu_s']:.1f} CPU s, {summary['wall_s']:.1f} s wall")
    return 0 if all(run["exit_status"] == 0 for run in summary["runs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
