"""A study: the training runs a workflow config asks for, one `PlannedRun` per run.

The workflow's config (``config/config.yaml``) is checked by `check_config` against
``workflow/schemas/config.schema.yaml``, which also fills in the schema's defaults, as
Snakemake's ``validate`` does, so no code here repeats them. It names studies, each a sweep of
workloads x echo points x echo factors x shuffle buffers x batch sizes x seeds under one
upstream setting. `plan` expands them into runs, adds each sweep's baselines (no echo stage,
e=1), and gives every run the path its `run_contract.identity.RunSpec` derives, so a run shared
by two studies (the e=1 baseline, say) is trained once and a record that exists is never
recomputed.

A study with a ``search`` tunes each condition as the data-echoing paper did: instead of one
run per seed, ``repetitions`` independent quasi-random searches of ``trials`` runs each over
the workload's declared search space (`experiments.search`), each trial capped at
``budget_cap`` times the workload's ``reference_fresh``; with ``censor`` (the default) a
search's trials train in order, each censored against the best of the earlier ones
(`run_contract.censoring`: every search's best is unchanged). A ``per_workload`` entry's ``search``
replaces some of those keys for one workload (the paper searched some workloads with fewer
trials). A study's ``resolution``, searched or seeded, locates every run's crossing to
``reference_fresh / resolution``.

This module imports nothing heavy (no torch): the Snakefile calls it when it is parsed.
"""

from __future__ import annotations

import copy
import json
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from experiments.registry import declared_names
from run_contract.censoring import censoring_mismatch
from run_contract.identity import RunOptions, RunSpec

__all__ = [
    "Plan",
    "PlannedRun",
    "check_config",
    "load_config",
    "main",
    "plan",
    "record_problems",
]

SCHEMA = Path(__file__).resolve().parents[1] / "workflow" / "schemas" / "config.schema.yaml"

SEED_STRIDE = 1000
"""Trial ``t`` of search repetition ``r`` is seeded ``SEED_STRIDE * r + t``: the run of a
trial does not depend on how many trials its search has (the schema allows at most this
many), so growing a search trains only its new trials."""


@dataclass(frozen=True)
class PlannedRun:
    """One run of a study: what it is (`RunSpec`) and how it executes (`RunOptions`).

    Attributes:
        spec: The run's identity.
        options: Device, threads and data folder (from the config's ``train`` section and
            workload entry).
    """

    spec: RunSpec
    options: RunOptions

    def args(self) -> list[str]:
        """The ``python -m experiments.run`` arguments (without ``--out``)."""
        return [*self.spec.args(), *self.options.args()]

    def waits_for(self) -> list[str]:
        """The records this run reads before it starts: its search's earlier trials' when it
        is censored (`RunOptions.censor`), in trial order; else none."""
        if self.options.censor is None:
            return []
        return [earlier.path(self.options.censor) for earlier in self.spec.earlier_trials()]


@dataclass(frozen=True)
class Plan:
    """Every run of a config and the studies they belong to.

    Attributes:
        runs: Record path -> its `PlannedRun`, each run once.
        studies: Study name -> the record paths it reads (baselines included).
    """

    runs: dict[str, PlannedRun]
    studies: dict[str, list[str]]

    def landed(self, keep: Callable[[str], bool] = os.path.exists) -> dict[str, list[str]]:
        """Study name -> its record paths that `keep` accepts (default: those written), in
        plan order; a study with none is left out."""
        kept = {name: [p for p in paths if keep(p)] for name, paths in self.studies.items()}
        return {name: paths for name, paths in kept.items() if paths}


def _key(path: Any) -> str:
    key = ""
    for part in path:
        key += f"[{part}]" if isinstance(part, int) else f".{part}" if key else str(part)
    return key or "(top level)"


def _filling_defaults(cls: Any) -> Any:
    """``cls`` (a jsonschema validator class) that also sets each property's ``default``."""
    import jsonschema

    check_properties = cls.VALIDATORS["properties"]

    def properties(validator: Any, props: Mapping[str, Any], instance: Any, schema: Any):
        if isinstance(instance, dict):
            for name, sub in props.items():
                if isinstance(sub, Mapping) and "default" in sub:
                    instance.setdefault(name, copy.deepcopy(sub["default"]))
        yield from check_properties(validator, props, instance, schema)

    return jsonschema.validators.extend(cls, {"properties": properties})


def check_config(config: dict[str, Any], schema_path: str | Path) -> dict[str, Any]:
    """Validate a workflow config against its JSON Schema and fill in the schema's defaults.

    Args:
        config: The loaded config; defaults are filled in place (Snakemake's ``config``).
        schema_path: ``workflow/schemas/config.schema.yaml``.

    Returns:
        ``config``, completed.

    Raises:
        ValueError: ``config: KEY: what is wrong`` for the most relevant error (jsonschema's
            best match), e.g. ``config: studies.insertion.echo_factors[0]: 0.5 is less than
            the minimum of 1``; or a workload name that no module of
            ``experiments/workloads/`` registers; or a per_workload ``search`` in a study
            without one; or ``echo_factors`` by point that leaves out a point of
            ``echo_points``.
    """
    import jsonschema
    import yaml

    schema = yaml.safe_load(Path(schema_path).read_text())
    if isinstance(config.get("workloads"), dict):  # YAML's ``name:`` alone: no options of its own
        for name, entry in config["workloads"].items():
            config["workloads"][name] = {} if entry is None else entry
    validator = _filling_defaults(jsonschema.validators.validator_for(schema))(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(config))
    if error is not None:
        raise ValueError(f"config: {_key(error.absolute_path)}: {error.message}")
    known = declared_names()
    named = [("workloads", name) for name in config["workloads"]]
    for study, entry in config["studies"].items():
        named += [(f"studies.{study}.workloads", name) for name in entry["workloads"]]
        named += [(f"studies.{study}.per_workload", name) for name in entry["per_workload"]]
    for key, name in named:
        if name not in known:
            raise ValueError(
                f"config: {key}: {name!r} is not a registered workload; valid: "
                f"{', '.join(known)} (one module each in experiments/workloads/)"
            )
    for study, entry in config["studies"].items():
        for key, sweep in [("", entry), *((f".per_workload.{n}", o) for n, o in
                                         entry["per_workload"].items())]:  # fmt: skip
            merged = {**entry, **sweep}  # a per_workload entry's keys replace the study's
            factors, points = merged["echo_factors"], merged["echo_points"]
            unnamed = [p for p in points if isinstance(factors, Mapping) and p not in factors]
            if unnamed:
                raise ValueError(
                    f"config: studies.{study}{key}.echo_factors: names no factors for echo "
                    f"point {unnamed[0]!r}; name every point of echo_points ({', '.join(points)})"
                )
        for name, override in entry["per_workload"].items():
            if "search" in override and (entry["search"] is None or override["search"] is None):
                raise ValueError(
                    f"config: studies.{study}.per_workload.{name}.search: replaces keys of the "
                    f"study's search (a mapping, e.g. {{trials: 50}}), so studies.{study} "
                    "needs a search"
                )
    return config


def _buffers(study: Mapping[str, Any], point: str) -> list[int]:
    """The study's shuffle buffers for ``point`` (a list, or a mapping of lists by point)."""
    buffers = study["shuffle_buffers"]
    return buffers[point] if isinstance(buffers, Mapping) else buffers


def _factors(study: Mapping[str, Any], point: str) -> list[float]:
    """The study's echo factors for ``point`` (a list, or a mapping of lists by point)."""
    factors = study["echo_factors"]
    return factors[point] if isinstance(factors, Mapping) else factors


def _variants(entry: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """The echo settings of a study's sweep, the baseline (no echo stage) first."""
    yield {"echo_point": "none", "echo_factor": 1.0, "shuffle_buffer": 0}
    for point in entry["echo_points"]:
        for factor in _factors(entry, point):
            for buffer in _buffers(entry, point):
                yield {"echo_point": point, "echo_factor": factor, "shuffle_buffer": buffer}


def _study_runs(study: Mapping[str, Any], config: Mapping[str, Any]) -> Iterator[PlannedRun]:
    train, upstream, overrides = config["train"], study["upstream"], study["per_workload"]
    # A study's keys replace the config-wide ones, and a per_workload entry's the study's.
    inherited = {"num_workers": train["num_workers"], "seeds": config["seeds"]}
    for workload in study["workloads"]:
        entry = {**inherited, **study}
        if workload in overrides:
            entry.update(overrides[workload])
        search = entry["search"] and {**study["search"], **entry["search"]}
        options = {**train, **config["workloads"][workload]}
        base = RunSpec(
            workload=workload,
            scale=config["scale"],
            upstream_latency_ms=upstream["latency_ms"],
            upstream_latency_per=upstream["latency_per"],
            upstream_cpu_ms=upstream["cpu_ms"],
            num_workers=entry["num_workers"],
            stop_at_target=entry["stop_at_target"],
            max_fresh=entry["max_fresh"],
            eval_every_fresh=options["eval_every_fresh"],
            resolution=entry["resolution"],
            hparams=options["hparams"],
        )
        execution = RunOptions(
            device=options["device"], threads=options["threads"], data_dir=options["data_dir"]
        )
        censored = replace(execution, censor=config["out_dir"])
        for batch_size in entry["batch_sizes"]:
            for variant in _variants(entry):
                for trial in _trials(search, entry["seeds"]):
                    spec = replace(base, batch_size=batch_size, **variant, **trial)
                    later = search and search["censor"] and trial["trial"] > 0
                    yield PlannedRun(spec, censored if later else execution)


def _trials(search: Mapping[str, Any] | None, seeds: int) -> Iterator[dict[str, Any]]:
    """The runs of one condition: one per seed, or the trials of its repeated searches."""
    if search is None:
        yield from ({"seed": seed} for seed in range(seeds))
        return
    count, budget_cap = search["trials"], search["budget_cap"]
    for repetition in range(search["repetitions"]):
        for trial in range(count):
            seed = repetition * SEED_STRIDE + trial
            yield {"repetition": repetition, "trial": trial, "seed": seed, "budget_cap": budget_cap}


def plan(config: Mapping[str, Any]) -> Plan:
    """Expand a workflow config's ``studies`` into runs.

    Args:
        config: The config, checked here (`check_config`) with the schema's defaults filled
            in, on a copy: ``config`` is left as it is.

    Returns:
        The `Plan`. Every study includes, per workload and batch size, its e=1 baseline.

    Raises:
        ValueError: As `check_config`; or a study names a workload missing from ``workloads``
            (the message names the key and the valid workloads), or a run's settings are
            invalid (the field named).
    """
    config = check_config(copy.deepcopy(dict(config)), SCHEMA)
    out_dir, known = config["out_dir"], config["workloads"]
    runs: dict[str, PlannedRun] = {}
    studies: dict[str, list[str]] = {}
    for name, study in config["studies"].items():
        unknown = [w for w in study["workloads"] if w not in known]
        if unknown:
            raise ValueError(
                f"config: studies.{name}.workloads: unknown {', '.join(unknown)}; valid: "
                f"{', '.join(sorted(known))} (the keys of `workloads`)"
            )
        paths = studies.setdefault(name, [])
        for run in _study_runs(study, config):
            path = run.spec.path(out_dir)
            runs.setdefault(path, run)
            if path not in paths:
                paths.append(path)
    return Plan(runs=runs, studies=studies)


def _merge(into: dict[str, Any], other: Mapping[str, Any]) -> dict[str, Any]:
    """Snakemake's merge of config files: mappings key by key, anything else replaced."""
    for key, value in other.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = copy.deepcopy(value)
    return into


def load_config(*paths: str | Path) -> dict[str, Any]:
    """Read config files (merged as ``snakemake --configfile A B`` merges them) and check them.

    Raises:
        ValueError: As `check_config`.
    """
    import yaml

    config: dict[str, Any] = {}
    for path in paths:
        _merge(config, yaml.safe_load(Path(path).read_text()) or {})
    return check_config(config, SCHEMA)


def record_problems(path: str, studies: Plan) -> list[str]:
    """What makes the written record at ``path`` stale: the fields where it is not the run
    its path plans (`RunSpec.mismatches`), and a censoring its search's earlier trials no
    longer support (`run_contract.censoring.censoring_mismatch`)."""
    from experiments import registry  # imports the workloads (torch)

    run = studies.runs[path]
    record = json.loads(Path(path).read_text())
    found = run.spec.mismatches(record, registry.defaults(run.spec.workload, run.spec.scale))
    if "censored" in record:
        earlier = [p for p in _earlier_paths(run, path) if Path(p).is_file()]
        line = censoring_mismatch(record, [json.loads(Path(p).read_text()) for p in earlier])
        found += [] if line is None else [line]
    return found


def _earlier_paths(run: PlannedRun, path: str) -> list[str]:
    """The record paths of a trial's search's earlier trials, beside ``path``'s."""
    out_dir = path[: path.rindex("/records/")]
    return [earlier.path(out_dir) for earlier in run.spec.earlier_trials()]


def _stale(paths: list[str], studies: Plan) -> list[str]:
    """``PATH: FIELD: ...`` for each written record that is stale (`record_problems`)."""
    return [f"{path}: {line}" for path in paths for line in record_problems(path, studies)]


def numerics_report(paths: list[str], studies: Plan) -> list[str]:
    """What the written records' numerics are (`run_contract.numerics.record_numerics`): one
    line counting each kind, a line per study that pools more than one (analysis decides
    nothing from such a study), and a line when records were not computed in the mode this
    process runs in."""
    from run_contract import numerics

    kinds = {path: numerics.record_numerics(json.loads(Path(path).read_text())) for path in paths}
    counts = Counter(kinds.values())
    lines = ["numerics: " + ", ".join(f"{n} {kind}" for kind, n in counts.most_common())]
    for name, members in studies.studies.items():
        mixed = Counter(kinds[p] for p in members if p in kinds)
        if len(mixed) > 1:
            lines.append(f"study {name} pools records of {len(mixed)} numerics: retrain it in one")
    other = sum(n for kind, n in counts.items() if not kind.startswith(numerics.mode() + " "))
    if other:
        lines.append(
            f"{other} records were not computed in this process's mode ({numerics.mode()}): "
            "unpinned ones agree with a retrain on their own CPU type only (check a sample "
            "with python -m analysis verify)"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    """``python -m experiments.study paths --configfile F [--study S] [--workload W]
    [--missing | --existing | --stale]``: the record paths of a study, one per line (to train
    a part first: ``snakemake --cores 2 --configfile F $(python -m experiments.study paths
    ...)``; to retrain the stale records: ``snakemake --force $(... --stale)``);
    ``studies`` instead prints them as JSON, study -> paths (``python -m analysis aggregate
    --study-file``: tables from the records landed so far, with ``--existing``); ``check``
    checks the written records against the runs the config asks for (exit 1 naming each
    stale record and field, as the workflow's ``aggregate`` rule does) and counts their
    numerics (`numerics_report`)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m experiments.study", description=main.__doc__)
    parser.add_argument("command", choices=["paths", "studies", "check"])
    parser.add_argument("--configfile", nargs="+", default=["config/config.yaml"])
    parser.add_argument("--study", action="append", help="only these studies (repeatable)")
    parser.add_argument("--workload", action="append", help="only these workloads (repeatable)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--missing", action="store_true", help="only records not yet written")
    which.add_argument("--existing", action="store_true", help="only records written")
    which.add_argument(
        "--stale",
        action="store_true",
        help="only records written that are not the run the config asks for (as check finds "
        "them): to retrain, pass them to snakemake with --force",
    )
    args = parser.parse_args(argv)
    try:
        studies = plan(load_config(*args.configfile))
    except ValueError as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    for name in args.study or []:
        if name not in studies.studies:
            parser.exit(
                2, f"{parser.prog}: error: --study {name}: valid: {', '.join(studies.studies)}\n"
            )
    chosen = args.study or list(studies.studies)
    paths = dict.fromkeys(p for name in chosen for p in studies.studies[name])
    planned = sorted({studies.runs[path].spec.workload for path in paths})
    for name in args.workload or []:  # a typo must not print nothing (snakemake: everything)
        if name not in planned:
            parser.exit(
                2, f"{parser.prog}: error: --workload {name}: valid: {', '.join(planned)}\n"
            )

    def wanted(path: str) -> bool:
        if args.workload and studies.runs[path].spec.workload not in args.workload:
            return False
        if args.stale:
            return Path(path).exists() and bool(_stale([path], studies))
        return not (
            (args.missing and Path(path).exists()) or (args.existing and not Path(path).exists())
        )

    if args.command == "check":
        written = [p for p in paths if Path(p).exists() and wanted(p)]
        stale = _stale(written, studies)
        print("\n".join(stale) if stale else "every record written is the run the config asks for")
        if written:
            print("\n".join(numerics_report(written, studies)))
        return 1 if stale else 0
    if args.command == "studies":
        kept = studies.landed(wanted)
        print(json.dumps({name: kept[name] for name in chosen if name in kept}, indent=1))
        return 0
    try:
        for path in filter(wanted, paths):
            print(path)
        sys.stdout.flush()
    except BrokenPipeError:  # `paths | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a shell tool stopped by the pipe ends
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
