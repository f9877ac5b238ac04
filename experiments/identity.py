"""A run's identity, declared once: `RunSpec` holds every field that defines a training run.

Everything else is derived from its fields, never listed again by hand:

* the ``python -m experiments.run`` options (`RunSpec.add_arguments`, `RunSpec.from_args`,
  `RunSpec.args`);
* the record path (`RunSpec.run_id`, `RunSpec.path`): readable, with a short hash for the
  fields that do not fit in a file name (hyper-parameter overrides, a consume endpoint);
* the identity a run record carries (`RunSpec.resolve`: the workload's defaults filled in),
  its ``config_hash`` (`identity_hash`) and the check that a record is the run a config asks
  for (`RunSpec.mismatches`, naming the field).

How a run is executed (device, threads, data folder) is not part of its identity:
`RunOptions`. This module imports nothing heavy (no torch): the Snakefile uses it when parsed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, NamedTuple

from echo.points import ECHO_POINTS

__all__ = [
    "DEVICES",
    "LATENCY_PER",
    "ROLES",
    "SCALES",
    "Defaults",
    "FieldError",
    "RunOptions",
    "RunSpec",
    "identity_columns",
    "identity_hash",
    "parse_number",
    "run_columns",
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
        return _flag(f"no_{self.field}" if self.field == "stop_at_target" else self.field)


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


def _hparam(text: str) -> tuple[str, Any]:
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


def _num(value: float) -> str:
    """``2.0`` -> ``2``, ``1.5`` -> ``1.5``; exact (repr) where ``:g`` would round."""
    short = f"{value:g}"
    return short if float(short) == value else repr(value)


def _short_hash(value: Any) -> str:
    return identity_hash(value)[:8]


def _opt(
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


def _part(
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
        return prefix + (_text(value) if show is None else show(value, spec))

    return part


def _text(value: Any) -> str:
    return _num(value) if isinstance(value, float) else str(value)


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _get(record: Mapping[str, Any], path: tuple[str, ...], omit: Any) -> Any:
    value: Any = record
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            return None if omit is MISSING else omit
        value = value[key]
    return value


def _put(target: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
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


class _Options:
    """CLI derivation shared by `RunSpec` and `RunOptions` (each field is one option)."""

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """Add one option per field to ``parser`` (help, type, choices and default from it)."""
        for f in fields(cls):
            meta, default = f.metadata, f.default
            described = (
                meta["help"] if default is None else f"{meta['help']} (default {_text(default)})"
            )
            if isinstance(default, bool):
                parser.add_argument(
                    _flag(f"no_{f.name}"), dest=f.name, action="store_false", help=meta["help"]
                )
            elif f.name == "hparams":
                parser.add_argument(
                    "--hparam", dest="hparams", type=_hparam, action="append", default=[],
                    metavar="KEY=VALUE", help=meta["help"],
                )  # fmt: skip
            elif default is MISSING:
                parser.add_argument(
                    _flag(f.name), required=True, choices=meta["choices"], help=meta["help"]
                )
            else:
                parser.add_argument(
                    _flag(f.name), type=meta["parse"], choices=meta["choices"],
                    default=default, help=described,
                )  # fmt: skip

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Any:
        """The instance for parsed arguments (``ValueError`` for a bad combination)."""
        return cls(**{f.name: getattr(args, f.name) for f in fields(cls)})

    def args(self) -> list[str]:
        """The ``python -m experiments.run`` options giving this instance (defaults left out)."""
        out: list[str] = []
        for f in fields(self):
            value = getattr(self, f.name)
            if value == f.default:
                continue
            if isinstance(f.default, bool):
                out.append(_flag(f"no_{f.name}"))
            elif f.name == "hparams":
                out += [a for k, v in value for a in ("--hparam", f"{k}={json.dumps(v)}")]
            else:
                text = _num(value) if isinstance(value, float) else str(value)
                out += [_flag(f.name), text]
        return out


def _check(name: str, value: Any, kind: type, low: float | None = None) -> None:
    numeric = kind is float and isinstance(value, int) and not isinstance(value, bool)
    if not (isinstance(value, kind) or numeric) or isinstance(value, bool) != (kind is bool):
        raise FieldError(name, f"{name} must be a {kind.__name__}, got {value!r}")
    if low is not None and not (math.isfinite(value) and value >= low):
        raise FieldError(name, f"{name} must be >= {low:g}, got {value!r}")


@dataclass(frozen=True, kw_only=True)
class RunSpec(_Options):
    """Every field that defines one training run; `None` takes the workload's default.

    Args:
        workload: Registered workload name.
        scale: ``"cpu"`` or ``"paper"``. Default ``"cpu"``.
        echo_point: ``"none"`` (no echo stage) or an `echo.EchoPoint` value. Default ``"none"``.
        echo_factor: Echo factor >= 1. Default 1.0.
        shuffle_buffer: Shuffle buffer after the echo stage, in items at that point. Default 0.
        batch_size: Examples per batch. Default None: the workload's.
        upstream_latency_ms: Simulated storage latency in ms. Default 0.
        upstream_latency_per: ``"example"`` or ``"batch"``. Default ``"example"``.
        upstream_cpu_ms: Busy CPU ms per example in augmentation. Default 0.
        num_workers: DataLoader worker processes. Default 0.
        max_fresh: Fresh-example budget. Default None: the workload's.
        eval_every_fresh: Evaluation interval in fresh examples. Default None: the workload's.
        budget_cap: The fresh-example budget in units of the workload's ``reference_fresh``
            (a tuned search's cap: hopeless trials stop); excludes ``max_fresh``. Default None.
        resolution: Locate the target crossing to ``reference_fresh / resolution`` fresh
            examples: the model is kept every that many fresh examples between evaluations,
            and the kept models between the last evaluation short of the target and the first
            past it are evaluated (bisection) to find the first that reaches it (the record's
            ``refined``). Default None: the evaluation grid only.
        hparams: Overrides of the workload's other hyper-parameters, as ``{name: value}`` or
            ``(name, value)`` pairs (kept sorted). Default: none.
        consume: Train on the batches a `sharing.Producer` serves at this endpoint instead of
            an own pipeline (echo point ``none`` or ``after_batch``). Default None.
        stop_at_target: Stop at the first evaluation that reaches the target; False trains on
            to the budget. Default True.
        repetition: Which independent search a tuned trial belongs to (its Sobol scramble);
            with ``trial``. Default None: not a search trial.
        trial: The trial's index in its search: its hyper-parameters are point ``trial`` of
            the workload's search space (`experiments.search.SearchSpace.point`), taking
            precedence over the defaults (an override of the same name is refused). Default
            None.
        seed: Seeds data order, augmentation, echo draws and model initialisation. Default 0.

    Raises:
        ValueError: A bad value or combination; the message names the field and what is valid.
    """

    workload: str = _opt("registered workload", record=("workload",), role="baseline")
    scale: str = _opt(
        "workload scale",
        choices=SCALES,
        record=("scale",),
        in_path=_part(""),
        role="baseline",
        default="cpu",
    )
    echo_point: str = _opt(
        "echo insertion point (none: no echo stage)",
        choices=("none", *ECHO_POINTS),
        record=("echo_point",),
        in_path=_part(""),
        role="echo",
        default="none",
    )
    echo_factor: float = _opt(
        "echo factor >= 1",
        parse=parse_number(float, 1),
        record=("echo_factor",),
        in_path=_part("e"),
        role="echo",
        default=1.0,
    )
    shuffle_buffer: int = _opt(
        "shuffle buffer after the echo stage, in items at that point",
        parse=parse_number(int, 0),
        record=("shuffle_buffer",),
        in_path=_part("sb"),
        role="echo",
        default=0,
    )
    batch_size: int | None = _opt(
        "examples per batch (default: the workload's)",
        parse=parse_number(int, 1),
        record=("batch_size",),
        in_path=_part("bs", show=lambda v, s: "default" if v is None else str(v)),
        role="baseline",
        default=None,
    )
    upstream_latency_ms: float = _opt(
        "simulated storage latency in ms",
        parse=parse_number(float, 0),
        record=("upstream", "latency_ms"),
        in_path=_part("lat", when=bool, show=lambda v, s: f"{_num(v)}per{s.upstream_latency_per}"),
        role="baseline",
        default=0.0,
    )
    upstream_latency_per: str = _opt(
        "latency paid per example read, or once per batch_size reads",
        choices=LATENCY_PER,
        record=("upstream", "latency_per"),
        role="baseline",
        default="example",
    )
    upstream_cpu_ms: float = _opt(
        "busy CPU ms per example in augmentation (the CPU-cost knob)",
        parse=parse_number(float, 0),
        record=("upstream", "cpu_ms"),
        in_path=_part("cpu", when=bool),
        role="baseline",
        default=0.0,
    )
    num_workers: int = _opt(
        "DataLoader worker processes",
        parse=parse_number(int, 0),
        record=("num_workers",),
        in_path=_part("w", when=bool),
        role="baseline",
        default=0,
    )
    max_fresh: int | None = _opt(
        "stop after this many fresh examples (default: the workload's budget)",
        parse=parse_number(int, 1),
        record=("budget", "max_fresh"),
        in_path=_part("budget", when=bool),
        role="budget",
        default=None,
    )
    eval_every_fresh: int | None = _opt(
        "evaluate every this many fresh examples (default: the workload's)",
        parse=parse_number(int, 1),
        record=("budget", "eval_every_fresh"),
        in_path=_part("ev", when=bool),
        role="budget",
        default=None,
    )
    budget_cap: float | None = _opt(
        "fresh-example budget in units of the workload's reference_fresh (excludes --max-fresh)",
        parse=parse_number(float, 0, strict=True),
        record=("budget", "cap"),
        in_path=_part("cap", when=lambda v: v is not None),
        omit=None,
        role="budget",
        default=None,
    )
    resolution: int | None = _opt(
        "locate the target crossing to reference_fresh / RESOLUTION fresh examples",
        parse=parse_number(int, 1),
        record=("budget", "resolution"),
        in_path=_part("res", when=lambda v: v is not None),
        omit=None,
        role="budget",
        default=None,
    )
    hparams: tuple[tuple[str, Any], ...] = _opt(
        "override another hyper-parameter of the workload; repeatable",
        record=("hparams",),
        in_path=_part("hp", when=bool, show=lambda v, s: _short_hash(v)),
        role="hparams",
        default=(),
    )
    stop_at_target: bool = _opt(
        "train on to the fresh-example budget after reaching the target (default: stop at "
        "the first evaluation that reaches it)",
        record=("stop_at_target",),
        in_path=_part("full", when=lambda v: not v, show=lambda v, s: ""),
        omit=True,
        role="baseline",
        default=True,
    )
    consume: str | None = _opt(
        "train on the batches a sharing producer serves at ENDPOINT (unix:@NAME or "
        "unix:/PATH) instead of an own pipeline; echo point none or after_batch",
        record=("consume",),
        in_path=_part("consume", when=bool, show=lambda v, s: _short_hash(v)),
        omit=None,
        role="baseline",
        default=None,
    )
    repetition: int | None = _opt(
        "the search (Sobol scramble) a tuned trial belongs to; with --trial",
        parse=parse_number(int, 0),
        record=("search", "repetition"),
        in_path=_part("r", when=lambda v: v is not None),
        omit=None,
        role="search",
        default=None,
    )
    trial: int | None = _opt(
        "the trial's index in its search (its hyper-parameters: that point of the workload's "
        "search space); with --repetition",
        parse=parse_number(int, 0),
        record=("search", "trial"),
        in_path=_part("t", when=lambda v: v is not None),
        omit=None,
        role="search",
        default=None,
    )
    seed: int = _opt(
        "seed",
        parse=parse_number(int, 0),
        record=("seed",),
        in_path=_part("seed"),
        role="seed",
        default=0,
    )

    def __post_init__(self) -> None:
        pairs = self.hparams.items() if isinstance(self.hparams, Mapping) else self.hparams
        object.__setattr__(self, "hparams", tuple(sorted((str(k), v) for k, v in pairs)))
        for name in _FLOAT_FIELDS:
            value = getattr(self, name)
            if isinstance(value, int) and not isinstance(value, bool):
                object.__setattr__(self, name, float(value))  # None stays None
        if "batch_size" in dict(self.hparams):
            raise FieldError(
                "hparams", "hparams: batch_size is a field of its own; use batch_size="
            )
        for f in fields(self):
            choices = f.metadata["choices"]
            if choices is not None and getattr(self, f.name) not in choices:
                valid = ", ".join(choices)
                value = getattr(self, f.name)
                raise FieldError(f.name, f"{f.name}={value!r} is not valid; use {valid}")
        _check("echo_factor", self.echo_factor, float, 1)
        for name in ("upstream_latency_ms", "upstream_cpu_ms"):
            _check(name, getattr(self, name), float, 0)
        for name, low in (("shuffle_buffer", 0), ("seed", 0), ("num_workers", 0)):
            _check(name, getattr(self, name), int, low)
        for name in ("batch_size", "max_fresh", "eval_every_fresh", "resolution"):
            if getattr(self, name) is not None:
                _check(name, getattr(self, name), int, 1)
        for name in ("repetition", "trial"):
            if getattr(self, name) is not None:
                _check(name, getattr(self, name), int, 0)
        if (self.repetition is None) != (self.trial is None):
            raise FieldError("trial", "trial and repetition go together: give both or neither")
        if self.budget_cap is not None:
            _check("budget_cap", self.budget_cap, float, 0)
            if self.budget_cap <= 0 or self.max_fresh is not None:
                raise FieldError(
                    "budget_cap",
                    f"budget_cap={self.budget_cap!r} must be > 0 and excludes max_fresh "
                    f"(given {self.max_fresh!r}): one budget per run",
                )
        _check("stop_at_target", self.stop_at_target, bool)
        if self.echo_point == "none" and (self.echo_factor != 1 or self.shuffle_buffer):
            raise FieldError(
                "echo_point",
                f"echo_point=none cannot echo (echo_factor={self.echo_factor:g}, "
                f"shuffle_buffer={self.shuffle_buffer}); choose one of {', '.join(ECHO_POINTS)}",
            )
        if self.consume is not None and self.echo_point not in CONSUMER_ECHO_POINTS:
            raise FieldError(
                "echo_point",
                f"echo_point={self.echo_point} cannot be used with consume (the producer "
                f"augments and collates); choose one of {', '.join(CONSUMER_ECHO_POINTS)}",
            )

    @property
    def run_id(self) -> str:
        """A file-name-safe id: each field's part (``e2``, ``sb1024``, ``seed0`` ...) in order."""
        parts = (f.metadata["in_path"](self, f.name) for f in fields(self) if f.metadata["in_path"])
        return "-".join(part for part in parts if part is not None)

    def path(self, out_dir: str) -> str:
        """Where the run's record lives: ``{out_dir}/records/{workload}/{run_id}.json``."""
        return f"{out_dir.rstrip('/')}/records/{self.workload}/{self.run_id}.json"

    def resolve(self, defaults: Defaults) -> dict[str, Any]:
        """The identity a run record carries: every field, the workload's defaults filled in.

        Args:
            defaults: The workload's declarations at this run's scale.

        Returns:
            A nested dict laid out as in a run record (``budget``, ``upstream`` ...); its
            `identity_hash` is the record's ``config_hash``.

        Raises:
            ValueError: An override names no hyper-parameter of the workload, or its type
                differs from the default's (an int is accepted for a float).
        """
        overrides = self._checked_overrides(defaults.hparams)
        hparams = {**defaults.hparams, **self._trial_point(defaults, overrides), **overrides}
        if self.batch_size is not None:
            hparams["batch_size"] = self.batch_size
        max_fresh = self.max_fresh or defaults.max_fresh
        if self.budget_cap is not None:
            max_fresh = round(self.budget_cap * self._reference(defaults, "budget_cap"))
        if self.resolution is not None:
            self._reference(defaults, "resolution")
        resolved = {
            "batch_size": hparams["batch_size"],
            "hparams": hparams,
            "max_fresh": max_fresh,
            "eval_every_fresh": self.eval_every_fresh or defaults.eval_every_fresh,
        }
        identity: dict[str, Any] = {}
        for f in fields(self):
            value = resolved.get(f.name, getattr(self, f.name))
            if value != f.metadata["omit"]:
                _put(identity, f.metadata["record"], value)
        if defaults.revision != 1:  # revision 1 is left out: records from before it existed
            identity[REVISION] = defaults.revision
        return identity

    def _reference(self, defaults: Defaults, name: str) -> int:
        if defaults.reference_fresh is None:
            raise FieldError(
                name,
                f"{name} is in units of the workload's reference_fresh, which {self.workload!r} "
                f"does not declare at scale {self.scale!r} (Budget.reference_fresh)",
            )
        return defaults.reference_fresh

    def refine_every_fresh(self, defaults: Defaults) -> int | None:
        """The fresh-example spacing of the kept models (`resolution`); None without one."""
        if self.resolution is None:
            return None
        return max(1, self._reference(defaults, "resolution") // self.resolution)

    def _trial_point(self, defaults: Defaults, overrides: Mapping[str, Any]) -> dict[str, Any]:
        if self.trial is None:
            return {}
        if defaults.search_space is None:
            raise FieldError(
                "trial", f"{self.workload!r} declares no search space at scale {self.scale!r}"
            )
        point = defaults.search_space.point(self.repetition, self.trial)
        both = sorted(set(point) & set(overrides))
        if both:
            raise FieldError(
                "hparams",
                f"hparam {both[0]!r} is searched by trial={self.trial}; do not override it",
            )
        return point

    def _checked_overrides(self, defaults: Mapping[str, Any]) -> dict[str, Any]:
        overrides = dict(self.hparams)
        unknown = sorted(set(overrides) - set(defaults))
        if unknown:
            raise FieldError(
                "hparams",
                f"hparam {unknown[0]!r} is not a hyper-parameter of {self.workload!r}; "
                f"valid: {', '.join(sorted(defaults))}",
            )
        for key, value in overrides.items():
            kind = type(defaults[key])
            ok = isinstance(value, kind) or (kind is float and isinstance(value, int))
            if not ok or isinstance(value, bool) != isinstance(defaults[key], bool):
                raise FieldError(
                    "hparams",
                    f"hparam {key}={value!r} must be of type {kind.__name__} like its default "
                    f"{defaults[key]!r}",
                )
        return overrides

    @classmethod
    def recorded(cls, record: Mapping[str, Any]) -> dict[str, Any]:
        """The identity a run record carries, read by the same field table as `resolve`."""
        identity: dict[str, Any] = {}
        for f in fields(cls):
            value = _get(record, f.metadata["record"], f.metadata["omit"])
            if value != f.metadata["omit"]:
                _put(identity, f.metadata["record"], value)
        if REVISION in record:
            identity[REVISION] = record[REVISION]
        return identity

    def mismatches(self, record: Mapping[str, Any], defaults: Defaults) -> list[str]:
        """Fields where ``record`` is not the run this spec asks for (empty: it is).

        Args:
            record: A run record.
            defaults: The workload's current declarations at this run's scale, so a record
                trained with a default that has changed since is refused too.

        Returns:
            ``"FIELD: record has X, config asks for Y"`` strings (``hparams.lr: ...`` per
            hyper-parameter), and a ``config_hash`` line when the record's identity does not
            hash to the hash it carries (a record edited by hand).
        """
        wanted, found = self.resolve(defaults), []
        for f in fields(self):
            path, omit = f.metadata["record"], f.metadata["omit"]
            asked, got = _get(wanted, path, omit), _get(record, path, omit)
            if f.name == "hparams" and isinstance(got, Mapping):
                for key in sorted(set(asked) | set(got)):
                    if asked.get(key) != got.get(key):
                        found.append(
                            f"hparams.{key}: record has {got.get(key)!r}, "
                            f"config asks for {asked.get(key)!r}"
                        )
            elif asked != got:
                found.append(f"{f.name}: record has {got!r}, config asks for {asked!r}")
        if record.get(REVISION, 1) != defaults.revision:
            found.append(
                f"{REVISION}: record has {record.get(REVISION, 1)}, {self.workload!r} is at "
                f"revision {defaults.revision} (its code changed what a run trains since)"
            )
        carried, computed = record.get("config_hash"), identity_hash(self.recorded(record))
        if not found and carried != computed:
            found.append(f"config_hash: record has {carried!r}, its fields hash to {computed!r}")
        return found


_FLOAT_FIELDS = tuple(f.name for f in fields(RunSpec) if f.type in ("float", "float | None"))
"""The fields kept as floats (an int given is converted), so records and hashes see ``2.0``."""


@dataclass(frozen=True, kw_only=True)
class RunOptions(_Options):
    """How a run is executed; not part of its identity (the same run on another device).

    Args:
        device: ``"auto"`` (CUDA when present), ``"cpu"`` or ``"cuda"``. Default ``"auto"``.
        threads: torch intra-op threads. Default 1.
        data_dir: The workload's data folder (required at paper scale; a cache at cpu scale).
            Default None.
    """

    device: str = _opt("where to train", choices=DEVICES, default="auto")
    threads: int = _opt("torch threads", parse=parse_number(int, 1), default=1)
    data_dir: str | None = _opt("the workload's data folder", parse=str, default=None)


def identity_columns(role: str) -> list[str]:
    """The run-table columns of the identity fields with ``role`` (one of `ROLES`), in order.

    ``hparams`` is two columns: ``lr`` and ``hparams`` (all of them, as canonical JSON).
    """
    if role not in ROLES:
        raise ValueError(f"role={role!r} is not valid; use one of {', '.join(ROLES)}")
    names = [f.name for f in fields(RunSpec) if f.metadata["role"] == role]
    return [c for n in names for c in (("lr", "hparams") if n == "hparams" else (n,))]


def run_columns(record: Mapping[str, Any]) -> dict[str, Any]:
    """A run record's identity as flat run-table columns (`identity_columns` of every role).

    Args:
        record: A run record (or `RunSpec.resolve`'s result).

    Returns:
        Field name -> value; an absent ``consume`` is ``""``; ``hparams`` gives ``lr`` and
        ``hparams`` (canonical JSON of all the run's hyper-parameters).
    """
    columns: dict[str, Any] = {}
    for f in fields(RunSpec):
        value = _get(record, f.metadata["record"], f.metadata["omit"])
        if f.name == "hparams":
            columns["lr"] = value["lr"]
            value = json.dumps(value, sort_keys=True, separators=(",", ":"))
        elif f.name == "consume":
            value = value or ""
        elif f.name in _FLOAT_FIELDS and value is not None:
            value = float(value)
        columns[f.name] = value
    return columns
