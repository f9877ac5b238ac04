"""Command line: serve a loader's batches to consumers.

    python -m sharing serve --loader my_project.data:make_loader --epochs 10

``--loader`` names a function (``module:function``) that returns the loader to serve (any
re-iterable of batches, e.g. a DataLoader); ``--loader-kwargs`` passes it JSON keyword
arguments. The endpoint is printed on stdout so consumers can be pointed at it.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import logging
import sys
from collections.abc import Callable
from typing import Any

from sharing.producer import Producer


def load_factory(spec: str) -> Callable[..., Any]:
    """The function named by ``module:function``.

    Raises:
        ValueError: ``spec`` is malformed, or names no importable function.
    """
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"--loader must look like 'package.module:function', got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(f"--loader: cannot import {module_name!r}: {error}") from None
    factory = getattr(module, attribute, None)
    if not callable(factory):
        raise ValueError(f"--loader: {module_name!r} has no function {attribute!r}")
    return factory


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m sharing", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run a producer until its epochs are served")
    serve.add_argument("--loader", required=True, help="module:function returning the loader")
    serve.add_argument(
        "--loader-kwargs", default="{}", help="JSON object of keyword arguments for --loader"
    )
    serve.add_argument("--endpoint", help="unix:@NAME or unix:/PATH (default: a fresh name)")
    serve.add_argument("--epochs", type=int, default=1, help="epochs to serve; 0: until killed")
    serve.add_argument("--max-lag", type=int, default=4, help="batches ahead of the slowest (4)")
    serve.add_argument("--replay-batches", type=int, help="leading batches kept for late joiners")
    serve.add_argument("--wait-for", type=int, default=1, help="consumers to wait for (1)")
    serve.add_argument("--log-every", type=float, default=30.0, help="seconds between metrics")
    serve.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING"])
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(name)s %(message)s")
    try:
        kwargs = json.loads(args.loader_kwargs)
        if not isinstance(kwargs, dict):
            raise ValueError("--loader-kwargs must be a JSON object")
        loader = load_factory(args.loader)(**kwargs)
        producer = Producer(
            loader,
            endpoint=args.endpoint,
            epochs=args.epochs or None,
            max_lag=args.max_lag,
            replay_batches=args.replay_batches,
            wait_for=args.wait_for,
            log_every_s=args.log_every,
        )
    except (ValueError, json.JSONDecodeError) as error:
        print(f"python -m sharing: error: {error}", file=sys.stderr)
        return 2
    with producer:
        print(producer.endpoint, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            producer.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
