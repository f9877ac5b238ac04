"""Data echoing on a GPU: a ResNet-50 training step fed by a CPU-bound JPEG pipeline.

The pipeline is a DataLoader with ``--workers`` processes decoding JPEG files (generated into
a temporary ImageFolder, removed afterwards) and making random-resized crops with flips; the
step is torchvision's ResNet-50 under bf16 autocast on ``--device``. R is measured: the
loader's seconds per batch (iterated alone) over the step's seconds per step fed one batch
from memory. Then steps/s without echo (e=1), with batch echoing at ``--factors`` and with
`echo.torch.EchoOnStall`, rounds interleaved, each against the ideal min(e, R) (the cases and
rows of `benchmarks.echo_speedup`).

    python -m benchmarks.gpu_echo --device cuda --out benchmarks/results/gpu_echo.csv
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time

import torch

from benchmarks.common import machine_note, print_table, write_csv
from benchmarks.echo_speedup import (
    SPEEDUP_COLUMNS,
    echo_cases,
    median_rates,
    speedups,
    steps_per_second,
)
from benchmarks.jpeg_training import JpegCrops, TrainStep, jpeg_loader, write_jpeg_folder
from experiments.devices import describe, resolve_device

__all__ = ["loader_seconds_per_batch", "main", "run"]


def loader_seconds_per_batch(loader, batches: int, warmup: int) -> float:
    """Seconds per batch of ``loader`` iterated alone, after ``warmup`` batches."""
    iterator = iter(loader)
    for _ in itertools.islice(iterator, warmup):
        pass
    start = time.perf_counter()
    for _ in itertools.islice(iterator, batches):
        pass
    return (time.perf_counter() - start) / batches


def run(args: argparse.Namespace, root: str) -> list[dict]:
    """Measure R, then the steps/s of every echo case on ``args.device``.

    Args:
        args: The parsed command line of `main`.
        root: The JPEG ImageFolder (`benchmarks.jpeg_training.write_jpeg_folder`).

    Returns:
        One row per echo case: R, the step's and the loader's times, the columns
        ``SPEEDUP_COLUMNS`` (`benchmarks.echo_speedup.speedups`) and the settings.
    """
    device = resolve_device(args.device)
    torch.set_num_threads(args.threads)
    dataset = JpegCrops(root, args.image_size)
    loader = jpeg_loader(dataset, args.batch_size, args.workers, pin_memory=device.type == "cuda")
    step = TrainStep(args.arch, device)
    first = next(iter(loader))
    resident = (first[0].to(device), first[1].to(device))
    step_s = step.seconds_per_step(resident, args.steps)
    warmup = 2 * args.workers + 1  # the batches prefetched while the clock was not running
    upstream_s = loader_seconds_per_batch(loader, args.steps, warmup)
    ratio = upstream_s / step_s
    print(
        f"{args.arch} step {1000 * step_s:.1f} ms, loader {1000 * upstream_s:.1f} ms per batch "
        f"({args.workers} workers): R = {ratio:.2f}",
        flush=True,
    )
    cases = echo_cases(loader, args.factors, args.max_factor)
    rate = median_rates(
        cases,
        args.rounds,
        lambda batches: steps_per_second(
            batches, step, args.steps, warmup=warmup, finish=step.finish
        ),
    )
    rows = []
    for case in speedups(rate, ratio):
        rows.append(
            {
                "arch": args.arch,
                "device": describe(device),
                "batch_size": args.batch_size,
                "image_size": args.image_size,
                "workers": args.workers,
                "measured_R": ratio,
                "step_ms": 1000 * step_s,
                "upstream_ms_per_batch": 1000 * upstream_s,
                "mode": case["mode"],
                "factor": case["factor"],
                "steps": args.steps,
                "rounds": args.rounds,
                **{key: case[key] for key in SPEEDUP_COLUMNS},
                "in_memory_steps_per_s": 1 / step_s,
                "machine": machine_note(),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    """Command line: generate the JPEG files in a temporary folder, measure (`run`), remove
    them, write the CSV and print the table.

    Args:
        argv: Command-line arguments (``--help`` lists them). Default None: ``sys.argv[1:]``.

    Returns:
        The rows written (`run`).
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="CSV file to write")
    parser.add_argument("--device", default="cuda", help="cuda, cpu or auto (cuda)")
    parser.add_argument("--arch", default="resnet50", help="torchvision model (resnet50)")
    parser.add_argument("--batch-size", type=int, default=128, help="images per batch (128)")
    parser.add_argument("--image-size", type=int, default=224, help="crop side (224)")
    parser.add_argument("--workers", type=int, default=4, help="DataLoader workers (4)")
    parser.add_argument("--images", type=int, default=1024, help="JPEG files generated (1024)")
    parser.add_argument(
        "--factors", type=int, nargs="+", default=[1, 2, 4], help="batch echo factors (1 2 4)"
    )
    parser.add_argument("--max-factor", type=int, default=4, help="EchoOnStall cap (4)")
    parser.add_argument("--steps", type=int, default=24, help="timed steps per case (24)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds per case; median (2)")
    parser.add_argument("--threads", type=int, default=4, help="torch threads (4)")
    args = parser.parse_args(argv)
    if 1 not in args.factors:
        parser.error("--factors must include 1, the baseline")
    args.factors = sorted(set(args.factors))
    with tempfile.TemporaryDirectory(prefix="gpu-echo-") as root:
        write_jpeg_folder(root, args.images)
        rows = run(args, root)
    write_csv(rows, args.out)
    print()
    print_table(
        rows,
        ["measured_R", "mode", "factor", "steps_per_s", "speedup_vs_e1", "ideal_speedup"],
    )
    print(f"wrote {args.out}")
    return rows


if __name__ == "__main__":
    main()
