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

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from echo.points import ECHO_POINTS
from run_contract.cli import CommandLine
from run_contract.fields import (
    CONSUMER_ECHO_POINTS,
    DEVICES,
    LATENCY_PER,
    REVISION,
    ROLES,
    SCALES,
    Defaults,
    FieldError,
    check_value,
    get_path,
    identity_hash,
    number_text,
    option,
    parse_number,
    path_part,
    put_path,
    short_hash,
)
from run_contract.record import floored

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


@dataclass(frozen=True, kw_only=True)
class RunSpec(CommandLine):
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

    workload: str = option("registered workload", record=("workload",), role="baseline")
    scale: str = option(
        "workload scale",
        choices=SCALES,
        record=("scale",),
        in_path=path_part(""),
        role="baseline",
        default="cpu",
    )
    echo_point: str = option(
        "echo insertion point (none: no echo stage)",
        choices=("none", *ECHO_POINTS),
        record=("echo_point",),
        in_path=path_part(""),
        role="echo",
        default="none",
    )
    echo_factor: float = option(
        "echo factor >= 1",
        parse=parse_number(float, 1),
        record=("echo_factor",),
        in_path=path_part("e"),
        role="echo",
        default=1.0,
    )
    shuffle_buffer: int = option(
        "shuffle buffer after the echo stage, in items at that point",
        parse=parse_number(int, 0),
        record=("shuffle_buffer",),
        in_path=path_part("sb"),
        role="echo",
        default=0,
    )
    batch_size: int | None = option(
        "examples per batch (default: the workload's)",
        parse=parse_number(int, 1),
        record=("batch_size",),
        in_path=path_part("bs", show=lambda v, s: "default" if v is None else str(v)),
        role="baseline",
        default=None,
    )
    upstream_latency_ms: float = option(
        "simulated storage latency in ms",
        parse=parse_number(float, 0),
        record=("upstream", "latency_ms"),
        in_path=path_part(
            "lat", when=bool, show=lambda v, s: f"{number_text(v)}per{s.upstream_latency_per}"
        ),
        role="baseline",
        default=0.0,
    )
    upstream_latency_per: str = option(
        "latency paid per example read, or once per batch_size reads",
        choices=LATENCY_PER,
        record=("upstream", "latency_per"),
        role="baseline",
        default="example",
    )
    upstream_cpu_ms: float = option(
        "busy CPU ms per example in augmentation (the CPU-cost knob)",
        parse=parse_number(float, 0),
        record=("upstream", "cpu_ms"),
        in_path=path_part("cpu", when=bool),
        role="baseline",
        default=0.0,
    )
    num_workers: int = option(
        "DataLoader worker processes",
        parse=parse_number(int, 0),
        record=("num_workers",),
        in_path=path_part("w", when=bool),
        role="baseline",
        default=0,
    )
    max_fresh: int | None = option(
        "stop after this many fresh examples (default: the workload's budget)",
        parse=parse_number(int, 1),
        record=("budget", "max_fresh"),
        in_path=path_part("budget", when=bool),
        role="budget",
        default=None,
    )
    eval_every_fresh: int | None = option(
        "evaluate every this many fresh examples (default: the workload's)",
        parse=parse_number(int, 1),
        record=("budget", "eval_every_fresh"),
        in_path=path_part("ev", when=bool),
        role="budget",
        default=None,
    )
    budget_cap: float | None = option(
        "fresh-example budget in units of the workload's reference_fresh (excludes --max-fresh)",
        parse=parse_number(float, 0, strict=True),
        record=("budget", "cap"),
        in_path=path_part("cap", when=lambda v: v is not None),
        omit=None,
        role="budget",
        default=None,
    )
    resolution: int | None = option(
        "locate the target crossing to reference_fresh / RESOLUTION fresh examples",
        parse=parse_number(int, 1),
        record=("budget", "resolution"),
        in_path=path_part("res", when=lambda v: v is not None),
        omit=None,
        role="budget",
        default=None,
    )
    hparams: tuple[tuple[str, Any], ...] = option(
        "override another hyper-parameter of the workload; repeatable",
        record=("hparams",),
        in_path=path_part("hp", when=bool, show=lambda v, s: short_hash(v)),
        role="hparams",
        default=(),
    )
    stop_at_target: bool = option(
        "train on to the fresh-example budget after reaching the target (default: stop at "
        "the first evaluation that reaches it)",
        record=("stop_at_target",),
        in_path=path_part("full", when=lambda v: not v, show=lambda v, s: ""),
        omit=True,
        role="baseline",
        default=True,
    )
    consume: str | None = option(
        "train on the batches a sharing producer serves at ENDPOINT (unix:@NAME or "
        "unix:/PATH) instead of an own pipeline; echo point none or after_batch",
        record=("consume",),
        in_path=path_part("consume", when=bool, show=lambda v, s: short_hash(v)),
        omit=None,
        role="baseline",
        default=None,
    )
    repetition: int | None = option(
        "the search (Sobol scramble) a tuned trial belongs to; with --trial",
        parse=parse_number(int, 0),
        record=("search", "repetition"),
        in_path=path_part("r", when=lambda v: v is not None),
        omit=None,
        role="search",
        default=None,
    )
    trial: int | None = option(
        "the trial's index in its search (its hyper-parameters: that point of the workload's "
        "search space); with --repetition",
        parse=parse_number(int, 0),
        record=("search", "trial"),
        in_path=path_part("t", when=lambda v: v is not None),
        omit=None,
        role="search",
        default=None,
    )
    seed: int = option(
        "seed",
        parse=parse_number(int, 0),
        record=("seed",),
        in_path=path_part("seed"),
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
        check_value("echo_factor", self.echo_factor, float, 1)
        for name in ("upstream_latency_ms", "upstream_cpu_ms"):
            check_value(name, getattr(self, name), float, 0)
        for name, low in (("shuffle_buffer", 0), ("seed", 0), ("num_workers", 0)):
            check_value(name, getattr(self, name), int, low)
        for name in ("batch_size", "max_fresh", "eval_every_fresh", "resolution"):
            if getattr(self, name) is not None:
                check_value(name, getattr(self, name), int, 1)
        for name in ("repetition", "trial"):
            if getattr(self, name) is not None:
                check_value(name, getattr(self, name), int, 0)
        if (self.repetition is None) != (self.trial is None):
            raise FieldError("trial", "trial and repetition go together: give both or neither")
        if self.budget_cap is not None:
            check_value("budget_cap", self.budget_cap, float, 0)
            if self.budget_cap <= 0 or self.max_fresh is not None:
                raise FieldError(
                    "budget_cap",
                    f"budget_cap={self.budget_cap!r} must be > 0 and excludes max_fresh "
                    f"(given {self.max_fresh!r}): one budget per run",
                )
        check_value("stop_at_target", self.stop_at_target, bool)
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

    def earlier_trials(self) -> list[RunSpec]:
        """The trials ``0 .. trial-1`` of this trial's search, in order (empty: not a search
        trial, or its first): the same run but for ``trial``, and ``seed`` shifted with it (a
        search's trials are seeded ``offset + trial``)."""
        if self.trial is None:
            return []
        offset = self.seed - self.trial
        return [replace(self, trial=t, seed=offset + t) for t in range(self.trial)]

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
        max_fresh = self.max_fresh or defaults.max_fresh
        if self.budget_cap is not None:
            max_fresh = round(self.budget_cap * self._reference(defaults, "budget_cap"))
        batch_size = self.batch_size or overrides.get("batch_size", defaults.hparams["batch_size"])
        # the optimizer steps in which the run would use up its fresh examples (echoed
        # batches count as steps): a searched schedule spans them
        budget_steps = max(1, math.ceil(self.echo_factor * max_fresh / batch_size))
        point = self._trial_point(defaults, overrides, budget_steps)
        hparams = {**defaults.hparams, **point, **overrides}
        if self.batch_size is not None:
            hparams["batch_size"] = self.batch_size
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
                put_path(identity, f.metadata["record"], value)
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

    def _trial_point(
        self, defaults: Defaults, overrides: Mapping[str, Any], budget_steps: int
    ) -> dict[str, Any]:
        if self.trial is None:
            return {}
        if defaults.search_space is None:
            raise FieldError(
                "trial", f"{self.workload!r} declares no search space at scale {self.scale!r}"
            )
        point = defaults.search_space.point(self.repetition, self.trial, budget_steps)
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
            value = get_path(record, f.metadata["record"], f.metadata["omit"])
            if value != f.metadata["omit"]:
                put_path(identity, f.metadata["record"], value)
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
            hyper-parameter), a ``refined`` line when its crossing is floored at its first
            evaluation (`run_contract.record.floored`: located by an older rule), and a
            ``config_hash`` line when the record's identity does not hash to the hash it
            carries (a record edited by hand).
        """
        wanted, found = self.resolve(defaults), []
        for f in fields(self):
            path, omit = f.metadata["record"], f.metadata["omit"]
            asked, got = get_path(wanted, path, omit), get_path(record, path, omit)
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
        first = floored(record)
        if first is not None:
            found.append(
                f"refined: the crossing sits at the first evaluation ({first} fresh examples), "
                "where a bisection ended without evaluating every kept model before it: "
                "retrain it to locate it below (refined.below_first)"
            )
        carried, computed = record.get("config_hash"), identity_hash(self.recorded(record))
        if not found and carried != computed:
            found.append(f"config_hash: record has {carried!r}, its fields hash to {computed!r}")
        return found


_FLOAT_FIELDS = tuple(f.name for f in fields(RunSpec) if f.type in ("float", "float | None"))
"""The fields kept as floats (an int given is converted), so records and hashes see ``2.0``."""


@dataclass(frozen=True, kw_only=True)
class RunOptions(CommandLine):
    """How a run is executed; not part of its identity (the same run on another device).

    Args:
        device: ``"auto"`` (CUDA when present), ``"cpu"`` or ``"cuda"``. Default ``"auto"``.
        threads: torch intra-op threads. Default 1.
        data_dir: The workload's data folder (required at paper scale; a cache at cpu scale).
            Default None.
        censor: A study's ``out_dir``: a search's trial is censored against the records there
            of its search's earlier trials (`RunSpec.earlier_trials`, `run_contract.censoring`),
            which must exist. Default None: trained to its target or budget.
    """

    device: str = option("where to train", choices=DEVICES, default="auto")
    threads: int = option("torch threads", parse=parse_number(int, 1), default=1)
    data_dir: str | None = option("the workload's data folder", parse=str, default=None)
    censor: str | None = option(
        "censor a search's trial against its search's earlier trials, whose records are under "
        "this out_dir",
        parse=str,
        default=None,
    )


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
        value = get_path(record, f.metadata["record"], f.metadata["omit"])
        if f.name == "hparams":
            columns["lr"] = value["lr"]
            value = json.dumps(value, sort_keys=True, separators=(",", ":"))
        elif f.name == "consume":
            value = value or ""
        elif f.name in _FLOAT_FIELDS and value is not None:
            value = float(value)
        columns[f.name] = value
    return columns
