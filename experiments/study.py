"""A study: the training runs a workflow config asks for, one `RunSpec` per run.

The workflow's config (``config/config.yaml``, validated against
``workflow/schemas/config.schema.yaml``) names studies, each a sweep of workloads x echo points
x echo factors x shuffle buffers x batch sizes x seeds under one upstream setting. `plan`
expands them into runs, adds each sweep's baselines (no echo stage, e=1), and gives every run
a path that encodes its whole configuration, so a run shared by two studies (the e=1 baseline,
say) is trained once and a record that exists is never recomputed.

This module imports nothing heavy (no torch): the Snakefile calls it when it is parsed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any

__all__ = ["Plan", "RunSpec", "check_config", "mismatches", "plan"]

# Record fields a RunSpec pins, with how to read each from a run record (a spec's None pins
# nothing: the workload's default).
_RECORD_FIELDS = {
    "workload": lambda r: r["workload"],
    "scale": lambda r: r["scale"],
    "echo_point": lambda r: r["echo_point"],
    "echo_factor": lambda r: float(r["echo_factor"]),
    "shuffle_buffer": lambda r: r["shuffle_buffer"],
    "seed": lambda r: r["seed"],
    "upstream_latency_ms": lambda r: float(r["upstream"]["latency_ms"]),
    "upstream_latency_per": lambda r: r["upstream"]["latency_per"],
    "upstream_cpu_ms": lambda r: float(r["upstream"]["cpu_ms"]),
    "num_workers": lambda r: r["num_workers"],
    "stop_at_target": lambda r: r.get("stop_at_target", True),
    "batch_size": lambda r: r["batch_size"],
    "max_fresh": lambda r: r["budget"]["max_fresh"],
}


@dataclass(frozen=True)
class RunSpec:
    """One training run of a study.

    Args:
        workload: Registered workload name.
        scale: ``"cpu"`` or ``"paper"``.
        echo_point: ``"none"`` or an echo point.
        echo_factor: Echo factor (1.0 for baselines).
        shuffle_buffer: Shuffle buffer after the echo stage (0 for baselines).
        batch_size: Examples per batch; None: the workload's default.
        seed: Seed.
        upstream_latency_ms: Simulated storage latency. Default 0.
        upstream_latency_per: ``"example"`` or ``"batch"``. Default ``"example"``.
        upstream_cpu_ms: Busy CPU per example in augmentation. Default 0.
        num_workers: DataLoader workers. Default 0.
        stop_at_target: Stop at the target (False: train on to the budget). Default True.
        max_fresh: Fresh-example budget; None: the workload's. Default None.
        options: Further ``python -m experiments.run`` options from the config's workload
            entry and ``train`` section (not part of the run's identity). Default: none.
    """

    workload: str
    scale: str
    echo_point: str
    echo_factor: float
    shuffle_buffer: int
    batch_size: int | None
    seed: int
    upstream_latency_ms: float = 0.0
    upstream_latency_per: str = "example"
    upstream_cpu_ms: float = 0.0
    num_workers: int = 0
    stop_at_target: bool = True
    max_fresh: int | None = None
    options: tuple[tuple[str, Any], ...] = field(default=(), compare=False)

    @property
    def run_id(self) -> str:
        """A file-name-safe id that encodes every field of the run's identity."""
        parts = [
            self.scale,
            self.echo_point,
            f"e{self.echo_factor:g}",
            f"sb{self.shuffle_buffer}",
            f"bs{self.batch_size or 'default'}",
        ]
        if self.upstream_latency_ms:
            parts.append(f"lat{self.upstream_latency_ms:g}per{self.upstream_latency_per}")
        if self.upstream_cpu_ms:
            parts.append(f"cpu{self.upstream_cpu_ms:g}")
        if self.num_workers:
            parts.append(f"w{self.num_workers}")
        if self.max_fresh:
            parts.append(f"budget{self.max_fresh}")
        if not self.stop_at_target:
            parts.append("full")
        parts.append(f"seed{self.seed}")
        return "-".join(parts)

    def path(self, out_dir: str) -> str:
        """Where the run's record lives: ``{out_dir}/records/{workload}/{run_id}.json``."""
        return str(PurePosixPath(out_dir, "records", self.workload, f"{self.run_id}.json"))

    def args(self) -> list[str]:
        """The ``python -m experiments.run`` arguments (without ``--out``)."""
        args = ["--workload", self.workload, "--scale", self.scale, "--seed", str(self.seed)]
        if self.echo_point != "none":
            args += ["--echo-point", self.echo_point, "--echo-factor", f"{self.echo_factor:g}"]
            args += ["--shuffle-buffer", str(self.shuffle_buffer)]
        if self.batch_size:
            args += ["--batch-size", str(self.batch_size)]
        if self.upstream_latency_ms:
            args += ["--upstream-latency-ms", f"{self.upstream_latency_ms:g}"]
            args += ["--upstream-latency-per", self.upstream_latency_per]
        if self.upstream_cpu_ms:
            args += ["--upstream-cpu-ms", f"{self.upstream_cpu_ms:g}"]
        if self.num_workers:
            args += ["--num-workers", str(self.num_workers)]
        if self.max_fresh:
            args += ["--max-fresh", str(self.max_fresh)]
        if not self.stop_at_target:
            args.append("--no-stop-at-target")
        for key, value in self.options:
            if key == "hparams":
                args += [a for k, v in sorted(value.items()) for a in ("--hparam", f"{k}={v}")]
            else:
                args += [f"--{key.replace('_', '-')}", str(value)]
        return args


@dataclass(frozen=True)
class Plan:
    """Every run of a config and the studies they belong to.

    Attributes:
        runs: Record path -> its `RunSpec`, each run once.
        studies: Study name -> the record paths it reads (baselines included).
    """

    runs: dict[str, RunSpec]
    studies: dict[str, list[str]]


def _key(path: Any) -> str:
    key = ""
    for part in path:
        key += f"[{part}]" if isinstance(part, int) else f".{part}" if key else str(part)
    return key or "(top level)"


def check_config(config: Mapping[str, Any], schema_path: str | Path) -> None:
    """Validate a workflow config against its JSON Schema, with a message naming the key.

    Args:
        config: The loaded config.
        schema_path: ``workflow/schemas/config.schema.yaml``.

    Raises:
        ValueError: ``config: KEY: what is wrong`` for the most relevant error (jsonschema's
            best match), e.g. ``config: studies.insertion.echo_factors[0]: 0.5 is less than
            the minimum of 1``.
    """
    import jsonschema
    import yaml

    schema = yaml.safe_load(Path(schema_path).read_text())
    validator = jsonschema.validators.validator_for(schema)(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(dict(config)))
    if error is None:
        return
    raise ValueError(f"config: {_key(error.absolute_path)}: {error.message}")


def _buffers(study: Mapping[str, Any], point: str) -> list[int]:
    """The study's shuffle buffers for ``point`` (a list, or a mapping of lists by point)."""
    buffers = study.get("shuffle_buffers", [0])
    return buffers.get(point, [0]) if isinstance(buffers, Mapping) else buffers


def _study_runs(study: Mapping[str, Any], config: Mapping[str, Any]) -> list[RunSpec]:
    seeds = range(study.get("seeds", config.get("seeds", 3)))
    upstream = study.get("upstream", {})
    train = config.get("train", {})
    runs = []
    for workload in study["workloads"]:
        entry = {**study, **study.get("per_workload", {}).get(workload, {})}
        options = {**train, **(config.get("workloads", {}).get(workload) or {})}
        workers = options.pop("num_workers", 0)  # part of the run's identity, not an option
        base = RunSpec(
            workload=workload,
            scale=config.get("scale", "cpu"),
            echo_point="none",
            echo_factor=1.0,
            shuffle_buffer=0,
            batch_size=None,
            seed=0,
            upstream_latency_ms=float(upstream.get("latency_ms", 0)),
            upstream_latency_per=upstream.get("latency_per", "example"),
            upstream_cpu_ms=float(upstream.get("cpu_ms", 0)),
            num_workers=entry.get("num_workers", workers),
            stop_at_target=entry.get("stop_at_target", True),
            max_fresh=entry.get("max_fresh"),
            options=tuple(sorted(options.items())),
        )
        variants = [("none", 1.0, 0)]
        for point in entry["echo_points"]:
            for factor in entry["echo_factors"]:
                variants += [(point, float(factor), b) for b in _buffers(entry, point)]
        for batch_size in entry.get("batch_sizes", [None]):
            for point, factor, buffer in variants:
                for seed in seeds:
                    runs.append(
                        replace(
                            base,
                            echo_point=point,
                            echo_factor=factor,
                            shuffle_buffer=buffer,
                            batch_size=batch_size,
                            seed=seed,
                        )
                    )
    return runs


def plan(config: Mapping[str, Any]) -> Plan:
    """Expand a workflow config's ``studies`` into runs.

    Args:
        config: The validated workflow config (``out_dir``, ``scale``, ``seeds``, ``train``,
            ``workloads``, ``studies``).

    Returns:
        The `Plan`. Every study includes, per workload and batch size, its e=1 baseline.

    Raises:
        ValueError: A study names a workload missing from ``workloads`` (the message names the
            key and the valid workloads).
    """
    out_dir, known = config.get("out_dir", "results"), config.get("workloads", {})
    runs: dict[str, RunSpec] = {}
    studies: dict[str, list[str]] = {}
    for name, study in (config.get("studies") or {}).items():
        unknown = [w for w in study["workloads"] if w not in known]
        if unknown:
            raise ValueError(
                f"config: studies.{name}.workloads: unknown {', '.join(unknown)}; valid: "
                f"{', '.join(sorted(known))} (the keys of `workloads`)"
            )
        paths = []
        for spec in _study_runs(study, config):
            path = spec.path(out_dir)
            runs.setdefault(path, spec)
            if path not in paths:
                paths.append(path)
        studies[name] = paths
    return Plan(runs=runs, studies=studies)


def mismatches(spec: RunSpec, record: Mapping[str, Any]) -> list[str]:
    """Fields where ``record`` differs from what ``spec`` asked for (empty: it matches).

    Args:
        spec: The run that should have written the record.
        record: A run record.

    Returns:
        ``"field: record has X, config asks for Y"`` strings.
    """
    found = []
    for name, read in _RECORD_FIELDS.items():
        wanted, got = getattr(spec, name), read(record)
        if wanted is not None and wanted != got:
            found.append(f"{name}: record has {got!r}, config asks for {wanted!r}")
    return found
