"""Command line: measure a training job's input pipeline and advise an echo setting.

    python -m echo advise --loader my_project.data:make_loader --step my_project.train:make_step \\
        --workload imagenet_resnet

Each of ``--loader``, ``--step``, ``--read`` and ``--augment`` names a function
(``module:function``) called once without arguments that returns the loader (any iterable of
batches), the train step (``step(batch)``), the read stage (an iterable of raw examples) and
the augment stage (``augment(example, rng)`` or ``augment(example)``). The measurement runs
the step, so it trains: point it at a model you can spare. See `echo.advisor.advise`.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from typing import Any

from echo.advisor import advise, workloads

__all__ = ["load_function", "main"]


def load_function(spec: str, option: str) -> Callable[..., Any]:
    """The function named by ``module:function``.

    Args:
        spec: ``package.module:function``.
        option: The option that gave it, for the error message.

    Raises:
        ValueError: ``spec`` is malformed, or names no importable function.
    """
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"{option} must look like 'package.module:function', got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(f"{option}: cannot import {module_name!r}: {error}") from None
    function = getattr(module, attribute, None)
    if not callable(function):
        raise ValueError(f"{option}: {module_name!r} has no function {attribute!r}")
    return function


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m echo", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser(
        "advise", help="measure the loader, the step and R, and advise an echo setting"
    )
    command.add_argument("--loader", required=True, help="module:function returning the loader")
    command.add_argument("--step", required=True, help="module:function returning step(batch)")
    command.add_argument(
        "--workload",
        choices=list(workloads()),
        help="the study's workload nearest yours; default: the best setting for each",
    )
    command.add_argument(
        "--read", help="module:function returning the raw examples (with --augment)"
    )
    command.add_argument("--augment", help="module:function returning augment (with --read)")
    command.add_argument("--windows", type=int, default=5, help="windows timed (5)")
    command.add_argument("--batches", type=int, default=10, help="batches per window (10)")
    command.add_argument("--warmup", type=int, default=2, help="batches before timing (2)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """``python -m echo advise ...``: print what was measured and the advice.

    Args:
        argv: The arguments. Default None: the command line's.

    Returns:
        The exit status: 0, or 2 for a bad argument (a one-line error on stderr).
    """
    args = _parser().parse_args(argv)
    try:
        made = {
            name: load_function(getattr(args, name), f"--{name}")()
            for name in ("loader", "step", "read", "augment")
            if getattr(args, name) is not None
        }
        advice = advise(
            made.pop("loader"), made.pop("step"), workload=args.workload, windows=args.windows,
            batches=args.batches, warmup=args.warmup, **made,
        )  # fmt: skip
    except ValueError as error:
        print(f"python -m echo {args.command}: error: {error}", file=sys.stderr)
        return 2
    print(advice)
    return 0


if __name__ == "__main__":
    sys.exit(main())
