"""Command line: serve a loader's batches to consumers.

    python -m sharing serve --loader my_project.data:make_loader --epochs 10

``--loader`` names a function (``module:function``) that returns the loader to serve (any
re-iterable of batches, e.g. a DataLoader); ``--loader-kwargs`` passes it JSON keyword
arguments. Every other option is a keyword of `sharing.Producer`, with its default and its
description (``--epochs 0``: until killed). The endpoint is printed on stdout so consumers can
be pointed at it.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import inspect
import json
import logging
import re
import sys
import types
import typing
import warnings
from collections.abc import Callable
from typing import Any

from sharing.args import RENAMED
from sharing.producer import Producer

__all__ = ["load_factory", "main", "parse_args"]

# The command line's spelling of None, for a keyword whose default is not None.
_NONE_SPELLED = {"epochs": 0}


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


def _described(cls: type) -> dict[str, str]:
    """Each argument's description in ``cls``'s docstring (its ``Args:``), as one line."""
    args = (inspect.getdoc(cls) or "").partition("\nArgs:\n")[2].partition("\n\n")[0]
    found = re.findall(r"^    (\w+): (.*(?:\n {8}.*)*)", args, flags=re.MULTILINE)
    return {name: " ".join(text.replace("`", "").split()) for name, text in found}


def _scalar(hint: Any) -> type:
    """The int, float or str an annotation such as ``int | None`` takes from the command line."""
    kinds = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    return next(kind for kind in kinds if kind in (int, float, str))


def _parse(name: str, kind: type) -> Callable[[str], Any]:
    """An argparse ``type`` for keyword ``name``: ``kind(text)``, or None as `_NONE_SPELLED`."""

    def parse(text: str) -> Any:
        value = kind(text)
        return None if name in _NONE_SPELLED and value == _NONE_SPELLED[name] else value

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


class _Renamed(argparse.Action):
    """A former option name: stores its value under the new name, with a DeprecationWarning."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        new = "--" + self.dest.replace("_", "-")
        message = f"{option} is now {new} (the former name will go)"
        # attributed to this module, which is __main__ under `python -m`: shown by default
        warnings.warn(message, DeprecationWarning, stacklevel=1)
        setattr(namespace, self.dest, values)


def _keywords() -> dict[str, inspect.Parameter]:
    """`Producer`'s keyword-only parameters (all but ``loader``), by name."""
    parameters = inspect.signature(Producer).parameters.values()
    return {p.name: p for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY}


def _add_producer_options(serve: argparse.ArgumentParser) -> None:
    """One option per keyword of `Producer`: its type, default and description from there."""
    hints = typing.get_type_hints(Producer.__init__)
    described = _described(Producer)
    for name, parameter in _keywords().items():
        help = described[name].replace("%", "%%")
        if name in _NONE_SPELLED:
            help += f" On the command line, {_NONE_SPELLED[name]} is None."
        kind = _parse(name, _scalar(hints[name]))
        option = "--" + name.replace("_", "-")
        serve.add_argument(option, type=kind, default=parameter.default, help=help)
    for former, name in RENAMED.items():
        kind = _parse(name, _scalar(hints[name]))
        serve.add_argument(
            "--" + former.replace("_", "-"), dest=name, type=kind, action=_Renamed,
            default=argparse.SUPPRESS, help=argparse.SUPPRESS,
        )  # fmt: skip


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Parse ``python -m sharing`` arguments (``sys.argv[1:]`` when ``argv`` is None).

    Args:
        argv (list[str] | None): The arguments. Default: the command line's.

    Returns:
        argparse.Namespace: ``command``, ``loader``, ``loader_kwargs``, ``log_level`` and one
        attribute per keyword of `Producer`.
    """
    parser = argparse.ArgumentParser(prog="python -m sharing", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run a producer until its epochs are served")
    serve.add_argument("--loader", required=True, help="module:function returning the loader")
    serve.add_argument(
        "--loader-kwargs", default="{}", help="JSON object of keyword arguments for --loader"
    )
    serve.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING"])
    _add_producer_options(serve)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """``python -m sharing serve ...``: serve a loader until its epochs are served (or killed).

    Args:
        argv (list[str] | None): The arguments (`parse_args`). Default: the command line's.

    Returns:
        int: The exit status: 0, or 2 for a bad argument (a one-line error on stderr).
    """
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(name)s %(message)s")
    try:
        kwargs = json.loads(args.loader_kwargs)
        if not isinstance(kwargs, dict):
            raise ValueError("--loader-kwargs must be a JSON object")
        loader = load_factory(args.loader)(**kwargs)
        producer = Producer(loader, **{name: getattr(args, name) for name in _keywords()})
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
