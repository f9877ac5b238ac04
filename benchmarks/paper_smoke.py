"""Paper-scale smoke: each paper-scale workload (ResNet-32, ResNet-50, SSD300, both
Transformers) trained for ``--steps`` steps by the harness on generated data in its dataset's
layout (`benchmarks.paper_data`), with ``config/paper.yaml``'s ``train`` settings (device,
threads, loader workers) unless overridden; records steps/s and peak device memory.

Each run evaluates before its first step and after its last (on generated data, so the metric
means nothing); steps/s counts training only. Data is written to a temporary folder, removed
afterwards. Workloads run in `benchmarks.paper_data.WRITERS`' order (most important first); one
that fails is reported with its traceback and the others still run, and the exit status is 1
if any failed.

    python -m benchmarks.paper_smoke --out benchmarks/results/paper_smoke.csv
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch
import yaml

from benchmarks.common import machine_note, print_table, write_csv
from benchmarks.paper_data import WRITERS
from experiments import registry
from experiments.harness import Run, RunConfig
from run_contract.identity import RunOptions, RunSpec

__all__ = ["EXAMPLES", "PAPER_CONFIG", "main", "smoke_row"]

PAPER_CONFIG = Path(__file__).parents[1] / "config" / "paper.yaml"
EXAMPLES = {  # generated examples per workload: a few epochs of the default steps at most
    "cifar10_resnet": 10_000,
    "imagenet_resnet": 2_048,
    "coco_ssd": 512,
    "lm1b_transformer": 20_000,
    "common_crawl_transformer": 2_000,
}


def smoke_row(workload: str, root: Path, args: argparse.Namespace) -> dict:
    """Train ``workload`` at paper scale for ``args.steps`` steps on data under ``root``."""
    batch_size = args.batch_size or registry.defaults(workload, "paper").hparams["batch_size"]
    budget = args.steps * batch_size
    spec = RunSpec(
        workload=workload,
        scale="paper",
        batch_size=args.batch_size,
        num_workers=args.num_workers,
        max_fresh=budget,
        eval_every_fresh=budget,
        hparams=args.hparams.get(workload, {}),
        stop_at_target=False,
    )
    options = RunOptions(device=args.device, threads=args.threads, data_dir=str(root))
    started = time.perf_counter()
    run = Run(RunConfig(spec, options))
    cuda = run.device.type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats(run.device)
    record = run.execute(progress=False)
    final, timing = record["final"], record["timing"]
    return {
        "workload": workload,
        "model": type(run.model).__name__,
        "parameters_m": sum(p.numel() for p in run.model.parameters()) / 1e6,
        "batch_size": record["batch_size"],
        "steps": final["steps"],
        "steps_per_s": final["steps"] / final["wall_s"],
        "examples_per_s": final["fresh_examples"] / final["wall_s"],
        "downstream_ms_per_step": 1000 * timing["downstream_s_per_step"],
        "wait_ms_per_step": 1000 * timing["wait_s_per_step"],
        "peak_memory_gib": torch.cuda.max_memory_allocated(run.device) / 2**30 if cuda else None,
        "eval_s": timing["eval_s"],
        "total_s": time.perf_counter() - started,
        "num_workers": args.num_workers,
        "threads": args.threads,
        "device": record["device"],
        "machine": machine_note(),
    }


def main(argv: list[str] | None = None) -> int:
    """Command line: for each workload, generate its data in a temporary folder and train it
    (`smoke_row`); write the CSV after each workload, then print the table.

    Args:
        argv: Command-line arguments (``--help`` lists them). Default None: ``sys.argv[1:]``.

    Returns:
        The exit status: 0 when every workload ran, 1 when any raised (each named, with its
        traceback; the CSV holds the rows of those that ran).
    """
    train = yaml.safe_load(PAPER_CONFIG.read_text())["train"]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="CSV file to write")
    parser.add_argument(
        "--workloads",
        nargs="+",
        default=list(WRITERS),
        choices=list(WRITERS),
        help="(all five, most important first)",
    )
    parser.add_argument("--steps", type=int, default=200, help="training steps each (200)")
    parser.add_argument("--device", default=train["device"], help="(config/paper.yaml's)")
    parser.add_argument("--threads", type=int, default=train["threads"], help="(paper.yaml's)")
    parser.add_argument(
        "--num-workers", type=int, default=train["num_workers"], help="(paper.yaml's)"
    )
    parser.add_argument("--batch-size", type=int, help="instead of each workload's paper default")
    parser.add_argument(
        "--examples", type=float, default=1.0, help="scale of the generated data (1.0)"
    )
    parser.add_argument(
        "--hparams",
        type=json.loads,
        default={},
        help='per-workload overrides as JSON, e.g. \'{"imagenet_resnet": {"image_size": 64}}\'',
    )
    args = parser.parse_args(argv)
    rows, failed = [], []
    for workload in args.workloads:
        try:
            with tempfile.TemporaryDirectory(prefix=f"paper-{workload}-") as root:
                WRITERS[workload](Path(root), max(10, round(EXAMPLES[workload] * args.examples)))
                row = smoke_row(workload, Path(root), args)
        except Exception as error:  # one workload's failure must not cost the others' rows
            traceback.print_exc()
            print(f"{workload:<25} FAILED: {type(error).__name__}: {error}", flush=True)
            failed.append(workload)
            continue
        rows.append(row)
        write_csv(rows, args.out)  # after each workload: a run cut short keeps what it measured
        memory = row["peak_memory_gib"]
        print(
            f"{workload:<25} {row['steps']} steps, {row['steps_per_s']:.2f} steps/s, "
            f"peak memory {'-' if memory is None else f'{memory:.1f} GiB'}",
            flush=True,
        )
    if rows:
        print()
        columns = ["workload", "model", "batch_size", "steps", "steps_per_s", "peak_memory_gib"]
        print_table(rows, [*columns, "eval_s"])
        print(f"wrote {args.out}")
    if failed:
        print(f"paper_smoke: FAILED: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
