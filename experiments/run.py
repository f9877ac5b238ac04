"""``python -m experiments.run``: train one configuration and write its JSON run record.

Example::

    python -m experiments.run --workload cifar10_resnet --echo-point before_augment \\
        --echo-factor 2 --seed 0 --threads 1 --out results/run.json
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import NoReturn

from experiments import registry
from experiments.data import MissingDataError
from experiments.harness import Run, RunConfig
from run_contract.censoring import search_incumbent
from run_contract.identity import FieldError, RunOptions, RunSpec, parse_number
from run_contract.record import write_record

__all__ = ["config_from_args", "main", "parser"]


class _OneLineParser(argparse.ArgumentParser):
    """Errors are one line: ``<prog>: error: argument --x: <what is wrong and what is valid>``."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def parser() -> argparse.ArgumentParser:
    """The command-line parser: one option per field of `RunSpec` (the run's identity) and of
    `RunOptions` (how it executes), plus ``--lr`` and ``--out``."""
    broken = "".join(f"\n  (broken: {line})" for line in registry.broken().values())
    p = _OneLineParser(
        prog="python -m experiments.run",
        description="Train one workload configuration until its declared target or budget and "
        "write one JSON run record (fresh examples, steps and wall time to target).",
        epilog=f"workloads: {', '.join(registry.names())}{broken}",
    )
    RunSpec.add_arguments(p)
    RunOptions.add_arguments(p)
    p.add_argument(
        "--lr",
        type=parse_number(float, 0, strict=True),
        help="learning rate: the same as --hparam lr=VALUE",
    )
    p.add_argument("--out", required=True, help="path of the JSON run record (written atomically)")
    return p


def config_from_args(args: argparse.Namespace, p: argparse.ArgumentParser) -> RunConfig:
    """The `RunConfig` for parsed arguments; bad values and combinations exit via ``p.error``."""
    try:
        spec = RunSpec.from_args(args)
        if args.lr is not None:
            spec = replace(spec, hparams={**dict(spec.hparams), "lr": args.lr})
        options = RunOptions.from_args(args)
        registry.get(spec.workload)
    except FieldError as error:
        p.error(f"argument {error.flag}: {error}")
    except ValueError as error:
        p.error(f"argument --workload: {error}")
    try:
        spec.resolve(registry.defaults(spec.workload, spec.scale))
    except FieldError as error:
        p.error(f"argument {error.flag}: {error}")
    except ValueError as error:
        p.error(f"argument --scale: {error}")
    if spec.scale == "paper" and not options.data_dir:
        p.error("argument --data-dir: required with --scale paper (the dataset's folder)")
    if options.censor is None:
        return RunConfig(spec, options)
    try:
        return RunConfig(spec, options, search_incumbent(spec, options.censor))
    except FileNotFoundError as error:
        p.error(f"argument --censor: {error}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0: record written)."""
    p = parser()
    args = p.parse_args(argv)
    config = config_from_args(args, p)
    try:
        prepared = Run(config)
    except MissingDataError as error:
        p.exit(1, f"{p.prog}: error: {error}\n")
    except (ValueError, RuntimeError, TypeError) as error:
        p.error(str(error).splitlines()[0])
    record = prepared.execute()
    write_record(record, args.out)
    status = "reached" if record["reached"] else "did not reach"
    if "censored" in record:
        incumbent = record["censored"]["incumbent"]
        status = f"censored (its search's incumbent: {incumbent}), did not reach"
    print(
        f"{record['workload']}: {status} {record['target']['metric']} "
        f"{record['target']['value']} after {record['final']['fresh_examples']} fresh examples, "
        f"{record['final']['steps']} steps; record: {args.out}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
