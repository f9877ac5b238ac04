"""The parts a run's field table is built of: the fields' constants, their declaration
(`option`, with what the command line, the record path and the record need), value checks,
and how a value is written in a path, on a command line and in a record."""

from __future__ import annotations

import argparse
import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, field
from typing import Any, NamedTuple

__all__ = [
    "CONSUMER_ECHO_POINTS",
    "DEVICES",
    "LATENCY_PER",
    "REVISION",
    "ROLES",
    "SCALES",
    "Defaults",
    "FieldError",
    "check_value",
    "flag",
    "get_path",
    "identity_hash",
    "number_text",
    "option",
    "parse_hparam",
    "parse_number",
    "path_part",
    "put_path",
    "short_hash",
    "value_text",
]

SCALES: tuple[str, ...] = ("cpu", "paper")
"""``cpu``: small models and offline data, minutes on 2 cores; ``paper``: the paper's setup."""

LATENCY_PER: tuple[str, ...] = ("example", "batch")
"""Storage latency is paid per example read, or once per ``batch_size`` examples read."""

DEVICES: tuple[str, ...] = ("auto", "cpu", "cuda")
"""``auto`` trains on CUDA when a device is present, else on the CPU."""

ROLES: tuple[str, ...] = ("baseline", "echo", "budget", "hparams", "search", "seed")
"""What an identity field is to the analysis: shared by a configuration and its no-echo
baseline; the echo settings; the budget (evaluation interval and cap); the hyper-parameters;
the search trial (repetition and trial of a tuned search, `experiments.search`); the seed. A
configuration is every field but the search trial and the seed."""

REVISION = "workload_revision"
"""The record field naming the workload's code revision (absent: revision 1)."""

CONSUMER_ECHO_POINTS: tuple[str, ...] = ("none", "after_batch")
"""A consumer of a shared loader receives augmented batches: only batch echoing is left."""


class FieldError(ValueError):
    """A bad value of one field (or a bad combination, named by its first field).

    Attributes:
        field: The field's name (``flag`` gives its command-line option).
    """

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field

    @property
    def flag(self) -> str:
        """The field's ``python -m experiments.run`` option."""
        if self.field == "hparams":
            return "--hparam"
        return flag(f"no_{self.field}" if self.field == "stop_at_target" else self.field)


class Defaults(NamedTuple):
    """What a workload declares for a scale, which a `RunSpec` field left at None takes.

    Attributes:
        hparams: The default hyper-parameters (including ``batch_size`` and ``lr``).
        max_fresh: The fresh-example budget.
        eval_every_fresh: The evaluation interval in fresh examples.
        reference_fresh: The unit of ``budget_cap`` and ``resolution`` (about the baseline's
            fresh examples to target; None: not measured at this scale).
        search_space: The workload's `experiments.search.SearchSpace` (None: none declared).
        revision: The workload's code revision (`experiments.workload.Workload.revision`):
            records of another revision are stale.
    """

    hparams: Mapping[str, Any]
    max_fresh: int
    eval_every_fresh: int
    reference_fresh: int | None = None
    search_space: Any = None
    revision: int = 1


def parse_number(kind: type, low: float, *, strict: bool = False) -> Callable[[str], Any]:
    """An argparse ``type``: ``kind(text)``, finite and ``>= low`` (``> low`` when strict)."""
    relation = ">" if strict else ">="

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except (TypeError, ValueError):
            value = None
        ok = value is not None and math.isfinite(value)
        if not ok or value < low or (strict and value == low):
            noun = "an integer" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"must be {noun} {relation} {low:g}, got {text!r}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


def parse_hparam(text: str) -> tuple[str, Any]:
    """``KEY=VALUE``: the value as JSON (what `RunSpec.args` writes: ``1e-05`` is a number),
    else as YAML (``lr=0.1``, ``model=small``)."""
    import yaml

    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"must be KEY=VALUE, got {text!r}")
    try:
        return key, json.loads(value)
    except ValueError:
        return key, yaml.safe_load(value)


def number_text(value: float) -> str:
    """``2.0`` -> ``2``, ``1.5`` -> ``1.5``; exact (repr) where ``:g`` would round."""
    short = f"{value:g}"
    return short if float(short) == value else repr(value)


def short_hash(value: Any) -> str:
    return identity_hash(value)[:8]


def option(
    help: str,
    *,
    parse: Callable[[str], Any] | None = None,
    choices: Sequence[str] | None = None,
    record: tuple[str, ...] | None = None,
    in_path: Callable[[Any], str | None] | None = None,
    omit: Any = MISSING,
    role: str | None = None,
    default: Any = MISSING,
    **kwargs: Any,
) -> Any:
    """A `RunSpec`/`RunOptions` field with what its CLI option, path part and record need.

    Args:
        help: The option's help text.
        parse: Converts the option's text (argparse ``type``).
        choices: The valid values.
        record: Where the field's resolved value sits in a run record (None: not recorded).
        in_path: ``in_path(spec, name)`` gives the field's part of the run id (`_part`);
            None: the field has no part.
        omit: A resolved value the record leaves out (the record field is then absent).
        role: What the field is to the analysis, one of `ROLES` (None: not an identity field).
        default: The field's default.
    """
    metadata = {"help": help, "parse": parse, "choices": choices, "record": record}
    metadata.update(in_path=in_path, omit=omit, role=role)
    return field(default=default, metadata=metadata, **kwargs)


def path_part(
    prefix: str,
    *,
    when: Callable[[Any], bool] = lambda value: True,
    show: Callable[[Any, Any], str] | None = None,
) -> Callable[[Any, str], str | None]:
    """A field's part of the run id: ``prefix`` + its value shown, or None (no part) when
    ``when(value)`` is false; ``show(value, spec)`` renders it (default: the value)."""

    def part(spec: Any, name: str) -> str | None:
        value = getattr(spec, name)
        if not when(value):
            return None
        return prefix + (value_text(value) if show is None else show(value, spec))

    return part


def value_text(value: Any) -> str:
    return number_text(value) if isinstance(value, float) else str(value)


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def get_path(record: Mapping[str, Any], path: tuple[str, ...], omit: Any) -> Any:
    value: Any = record
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            return None if omit is MISSING else omit
        value = value[key]
    return value


def put_path(target: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        target = target.setdefault(key, {})
    target[path[-1]] = value


def identity_hash(identity: Any) -> str:
    """A short, stable hash of a run's identity (canonical JSON, SHA-256, 16 hex digits).

    Args:
        identity: A JSON-able value, e.g. `RunSpec.resolve`'s result.
    """
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def check_value(name: str, value: Any, kind: type, low: float | None = None) -> None:
    numeric = kind is float and isinstance(value, int) and not isinstance(value, bool)
    if not (isinstance(value, kind) or numeric) or isinstance(value, bool) != (kind is bool):
        raise FieldError(name, f"{name} must be a {kind.__name__}, got {value!r}")
    if low is not None and not (math.isfinite(value) and value >= low):
        raise FieldError(name, f"{name} must be >= {low:g}, got {value!r}")
