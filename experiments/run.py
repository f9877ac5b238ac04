"""``python -m experiments.run``: train one configuration and write its JSON run record.

Example::

    python -m experiments.run --workload cifar10_resnet --echo-point before_augment \\
        --echo-factor 2 --seed 0 --threads 1 --out results/run.json
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import yaml

from echo import ECHO_POINTS
from experiments import registry
from experiments.data import MissingDataError
from experiments.devices import DEVICES
from experiments.harness import Run, RunConfig
from experiments.record import write_record
from experiments.upstream import LATENCY_PER, UpstreamCost
from experiments.workload import SCALES

__all__ = ["main", "parser"]


class _OneLineParser(argparse.ArgumentParser):
    """Errors are one line: ``<prog>: error: argument --x: <what is wrong and what is valid>``."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _number(kind: Callable[[str], Any], low: float, *, strict: bool = False) -> Callable:
    relation = ">" if strict else ">="

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            value = None
        ok = value is not None and math.isfinite(value)
        if not ok or value < low or (strict and value == low):
            noun = "an integer" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"must be {noun} {relation} {low:g}, got {text!r}")
        return value

    return parse


def _hparam(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"must be KEY=VALUE, got {text!r}")
    return key, yaml.safe_load(value)


def parser() -> argparse.ArgumentParser:
    """The command-line parser (the registry is discovered to list the workloads)."""
    p = _OneLineParser(
        prog="python -m experiments.run",
        description="Train one workload configuration until its declared target or budget and "
        "write one JSON run record (fresh examples, steps and wall time to target).",
    )
    add = p.add_argument
    add("--workload", required=True, choices=registry.names(), help="registered workload")
    add("--scale", choices=SCALES, default="cpu", help="cpu (default) or paper")
    add("--data-dir", help="data folder (required at paper scale; a cache at cpu scale)")
    add(
        "--echo-point",
        choices=("none", *ECHO_POINTS),
        default="none",
        help="echo insertion point (default none: no echo stage)",
    )
    add("--echo-factor", type=_number(float, 1), default=1.0, help="echo factor >= 1 (default 1)")
    add(
        "--shuffle-buffer",
        type=_number(int, 0),
        default=0,
        help="shuffle buffer after the echo stage, in items at that point (default 0)",
    )
    add("--seed", type=_number(int, 0), default=0, help="seed (default 0)")
    add("--batch-size", type=_number(int, 1), help="examples per batch (default: workload's)")
    add("--lr", type=_number(float, 0, strict=True), help="learning rate (default: workload's)")
    add(
        "--hparam",
        type=_hparam,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override another hyper-parameter of the workload; repeatable",
    )
    add(
        "--max-fresh",
        type=_number(int, 1),
        help="stop after this many fresh examples (default: workload's budget)",
    )
    add(
        "--eval-every-fresh",
        type=_number(int, 1),
        help="evaluate every this many fresh examples (default: workload's)",
    )
    add("--device", choices=DEVICES, default="auto", help="auto (CUDA when present), cpu, cuda")
    add("--threads", type=_number(int, 1), default=1, help="torch threads (default 1)")
    add("--num-workers", type=_number(int, 0), default=0, help="DataLoader workers (default 0)")
    add(
        "--upstream-latency-ms",
        type=_number(float, 0),
        default=0.0,
        help="simulated storage latency in ms (default 0)",
    )
    add(
        "--upstream-latency-per",
        choices=LATENCY_PER,
        default="example",
        help="latency paid per example read, or once per batch_size reads (default example)",
    )
    add(
        "--upstream-cpu-ms",
        type=_number(float, 0),
        default=0.0,
        help="busy CPU ms per example in augmentation, the CPU-cost knob (default 0)",
    )
    add(
        "--consume",
        metavar="ENDPOINT",
        help="train on the batches a sharing producer serves at ENDPOINT (unix:@NAME or "
        "unix:/PATH) instead of an own pipeline; echo point none or after_batch",
    )
    add(
        "--no-stop-at-target",
        dest="stop_at_target",
        action="store_false",
        help="train on to the fresh-example budget after reaching the target (default: stop "
        "at the first evaluation that reaches it)",
    )
    add("--out", required=True, help="path of the JSON run record (written atomically)")
    return p


def config_from_args(args: argparse.Namespace, p: argparse.ArgumentParser) -> RunConfig:
    """The `RunConfig` for parsed arguments; cross-argument errors exit via ``p.error``."""
    if args.echo_point == "none" and (args.echo_factor != 1 or args.shuffle_buffer):
        p.error(
            f"argument --echo-point: none cannot echo (--echo-factor {args.echo_factor:g}, "
            f"--shuffle-buffer {args.shuffle_buffer}); choose from {', '.join(ECHO_POINTS)}"
        )
    if args.consume and args.echo_point not in ("none", "after_batch"):
        p.error(
            f"argument --echo-point: {args.echo_point} cannot be used with --consume (the "
            "producer augments and collates); choose from none, after_batch"
        )
    if args.scale == "paper" and not args.data_dir:
        p.error("argument --data-dir: required with --scale paper (the dataset's folder)")
    if args.scale not in registry.get(args.workload).targets:
        valid = ", ".join(registry.get(args.workload).targets)
        p.error(f"argument --scale: {args.workload} has no {args.scale!r} scale; valid: {valid}")
    hparams = dict(args.hparam)
    for key, value in (("batch_size", args.batch_size), ("lr", args.lr)):
        if value is not None:
            hparams[key] = value
    return RunConfig(
        workload=args.workload,
        scale=args.scale,
        echo_point=args.echo_point,
        echo_factor=args.echo_factor,
        shuffle_buffer=args.shuffle_buffer,
        seed=args.seed,
        hparams=hparams,
        max_fresh=args.max_fresh,
        eval_every_fresh=args.eval_every_fresh,
        device=args.device,
        threads=args.threads,
        num_workers=args.num_workers,
        upstream=UpstreamCost(
            args.upstream_latency_ms, args.upstream_latency_per, args.upstream_cpu_ms
        ),
        data_dir=args.data_dir,
        consume=args.consume,
        stop_at_target=args.stop_at_target,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0: record written)."""
    p = parser()
    args = p.parse_args(argv)
    config = config_from_args(args, p)
    try:
        prepared = Run(config)
    except MissingDataError as error:
        p.exit(1, f"{p.prog}: error: {error}\n")
    except (ValueError, RuntimeError) as error:
        p.error(str(error).splitlines()[0])
    record = prepared.execute()
    write_record(record, args.out)
    status = "reached" if record["reached"] else "did not reach"
    print(
        f"{record['workload']}: {status} {record['target']['metric']} "
        f"{record['target']['value']} after {record['final']['fresh_examples']} fresh examples, "
        f"{record['final']['steps']} steps; record: {args.out}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
