"""Command line of the analysis package (``python -m analysis``).

    python -m analysis aggregate --study insertion=results/runs/a.json results/runs/b.json \\
        --study-file results/studies.json --runs-out results/runs.csv \\
        --curves-out results/eval_curves.csv
    python -m analysis figure fresh_by_echo_point --runs results/runs.csv \\
        --curves results/eval_curves.csv --reference paper_figures/reference/papers.csv \\
        --out paper_figures/fresh_by_echo_point.png
    python -m analysis summary --runs results/runs.csv --out results/summary.csv --markdown
    python -m analysis claims --runs results/protocol/runs.csv \
        --reference paper_figures/reference/papers.csv --out results/protocol/claims.csv
    python -m analysis claims --runs results/runs.csv \
        --sharing results/benchmarks/shared_loading.csv \
        --echo-speedup results/benchmarks/echo_speedup.csv --out results/claims.csv
    python -m analysis cost --runs results/protocol/runs.csv --configfile config/protocol.yaml
    python -m analysis resolution --runs results/protocol/runs.csv
    python -m analysis trials --runs results/protocol/runs.csv --configfile config/protocol.yaml
    python -m analysis peak --runs results/protocol/runs.csv --configfile config/protocol.yaml
    python -m analysis readme README.md
    python -m analysis advice --runs results/protocol/runs.csv --out echo/evidence.json
    python -m analysis compare results .test-slurm/results
    python -m analysis verify --cheapest 3 --out results/verify.csv
    python -m analysis verify --configfile config/protocol.yaml --random 5 --seed 1 \
        --out results/protocol/verify.csv

Exit status 3: ``verify`` found a record that does not retrain bit-identically.

Exit status 2: a wrong command line (unknown figure, an input the figure needs not given,
an input file missing); 1: an input that cannot be read (a record breaking the schema, a
table lacking columns).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from analysis import advice
from analysis._io import atomic_write, markdown_table, require_columns
from analysis.compare import compare_record_dirs
from analysis.records import aggregate, read_runs, write_tables
from analysis.reference import load_reference
from analysis.time_to_target import relative_to_baseline, summarize, unreached_baselines

__all__ = ["GENERATED", "main", "markdown_table", "parse_studies", "refresh_blocks", "table_option"]

_MARKDOWN_COLUMNS = [
    "study", "workload", "echo_point", "echo_factor", "shuffle_buffer", "batch_size",
    "n_reached", "n_runs", "fresh_rel_median", "steps_rel_median", "wall_rel_median",
    "fresh_examples_to_target_median", "R_median", "best_metric_median",
]  # fmt: skip


def parse_studies(
    study_args: Sequence[Sequence[str]], study_files: Sequence[str]
) -> dict[str, list[str]]:
    """Collect study name -> record paths from ``--study`` and ``--study-file`` options.

    Args:
        study_args: Each ``--study`` occurrence: ``["NAME=PATH", "PATH", ...]``.
        study_files: JSON files, each an object mapping study name -> list of paths.

    Returns:
        Study -> paths, in the order given, a study named several times getting all of its
        paths (each once).

    Raises:
        ValueError: A ``--study`` lacks ``NAME=``, or a study file is not such an object
            (the message names the option or file).
    """
    studies: dict[str, list[str]] = {}

    def add(name: str, paths: Sequence[str]) -> None:
        listed = studies.setdefault(name, [])
        listed.extend(path for path in paths if path not in listed)

    for tokens in study_args:
        name, _, first = tokens[0].partition("=")
        if not name or "=" not in tokens[0]:
            raise ValueError(f"--study must start with NAME=PATH, got {tokens[0]!r}")
        add(name, [first, *tokens[1:]] if first else list(tokens[1:]))
    for file in study_files:
        try:
            mapping = json.loads(Path(file).read_text())
        except json.JSONDecodeError as error:
            raise ValueError(f"--study-file {file} is not valid JSON: {error}") from None
        valid = isinstance(mapping, dict) and all(
            isinstance(paths, list) and all(isinstance(p, str) for p in paths)
            for paths in mapping.values()
        )
        if not valid:
            raise ValueError(
                f"--study-file {file} must hold a JSON object mapping study name -> list of "
                "record paths"
            )
        for name, paths in mapping.items():
            add(name, paths)
    return studies


def _parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    from analysis.figures import TABLES, names
    from analysis.verify import DEFAULT_CHEAPEST

    parser = argparse.ArgumentParser(
        prog="python -m analysis",
        description="Aggregate run records, draw the papers' figures, summarize time to target.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("aggregate", help="run records -> runs and eval-curves CSVs")
    build.add_argument(
        "--study",
        nargs="+",
        action="append",
        default=[],
        metavar="NAME=PATH [PATH ...]",
        help="a study and its record files (repeatable)",
    )
    build.add_argument(
        "--study-file",
        action="append",
        default=[],
        metavar="FILE.json",
        help="JSON object: study name -> list of record paths (repeatable)",
    )
    build.add_argument("--runs-out", required=True, help="runs table to write (CSV)")
    build.add_argument("--curves-out", required=True, help="eval-curves table to write (CSV)")
    figure = commands.add_parser("figure", help="draw one figure as PNG and PDF")
    figure.add_argument("name", choices=names(), help="the figure")
    for table, kind in TABLES.items():
        figure.add_argument(table_option(table), dest=table, help=kind.help)
    figure.add_argument("--reference", help="the papers' values (papers.csv); default: none")
    figure.add_argument("--study", help="study to draw instead of the figure's default")
    figure.add_argument("--out", required=True, help="PNG to write; the PDF goes next to it")
    summary = commands.add_parser("summary", help="per-configuration summary table")
    summary.add_argument("--runs", required=True, help="runs CSV (from aggregate)")
    summary.add_argument("--out", required=True, help="summary CSV to write")
    summary.add_argument("--markdown", action="store_true", help="also print it as markdown")
    claims = commands.add_parser(
        "claims",
        help="the papers' claims decided by code (CSV; beside it the markdown table, and "
        "one line per claim in NAME_headlines.md)",
    )
    claims.add_argument("--runs", required=True, help="runs CSV (from aggregate)")
    claims.add_argument("--reference", help="the papers' values (papers.csv); default: none")
    claims.add_argument(
        "--configfile",
        nargs="+",
        help="the study's config: a planned workload not landed yet counts as a part without data",
    )
    _benchmark_options(claims)
    claims.add_argument(
        "--out", required=True, help="claims CSV to write; the markdown table goes beside it (.md)"
    )

    readme = commands.add_parser(
        "readme", help="refresh a document's generated blocks from the files they show"
    )
    readme.add_argument("file", help="e.g. README.md")
    cost = commands.add_parser(
        "cost", help="seconds per run and the whole study's estimate, per study and workload"
    )
    cost.add_argument(
        "--runs",
        help="runs CSV (from aggregate) of the records landed; default: the records of "
        "--configfile's studies found on disk (none without --configfile)",
    )
    cost.add_argument(
        "--configfile", nargs="+", help="the study's config files, for the runs still planned"
    )
    cost.add_argument(
        "--prior",
        help="another runs CSV whose runs' cost, per condition, else per workload, stands in "
        "where none landed (e.g. an earlier protocol's)",
    )
    cost.add_argument(
        "--budget-core-hours",
        type=float,
        help="say whether the study's estimate still to train fits in this many core-hours "
        "(with --budget-since: what the budget has spent, plus the estimate still to train)",
    )
    cost.add_argument(
        "--budget-since",
        metavar="RUNS",
        help="runs CSV of the records that had landed when the budget began (e.g. `git show "
        "REV:results/protocol/runs.csv`): a landed record not in it, or retrained since (its "
        "total_s differs), counts against --budget-core-hours",
    )
    cost.add_argument(
        "--by",
        choices=["part", "condition"],
        default="part",
        help="one row per study and workload (default) or per condition",
    )
    calibrate = commands.add_parser(
        "calibrate",
    )
    calibrate.add_argument("--runs", required=True, help="runs CSV (from aggregate)")
    calibrate.add_argument(
        "--configfile", nargs="+", help="the study's config (its planned workloads)"
    )
    calibrate.add_argument(
        "--permutations", type=int, default=200, help="null tables (default 200)"
    )
    calibrate.add_argument(
        "--resamples", type=int, default=200, help="resampled tables for the power (default 200)"
    )
    calibrate.add_argument("--seed", type=int, default=0, help="seed of both draws (default 0)")
    _benchmark_options(calibrate)
    calibrate.add_argument(
        "--out", required=True, help="CSV to write, one row per claim part; markdown beside (.md)"
    )
    resolution = commands.add_parser(
        "resolution",
        help="per study and workload: the crossing's step against the tuned baseline's "
        "median, and evaluation's share of training, against their goals",
    )
    resolution.add_argument("--runs", required=True, help="runs CSV (from aggregate)")
    trials = commands.add_parser(
        "trials",
        help="per tuned baseline: its expected best of its searches' first T/2 and T trials, "
        "against the crossing's step (has the best-of-k curve flattened by T?)",
    )
    trials.add_argument("--runs", required=True, help="runs CSV (from aggregate)")
    trials.add_argument(
        "--configfile", nargs="+",
        help="the study's config files, for T (default: the most trials any search landed)",
    )  # fmt: skip
    peak = commands.add_parser(
        "peak",
        help="per workload and echo point of the echo-factor study: fresh examples to target "
        "per factor, where the curve turns, and how many distinct views repeats give",
    )
    peak.add_argument("--runs", required=True, help="runs CSV (from aggregate)")
    peak.add_argument(
        "--configfile", nargs="+", help="the study's config (a search short of its T is left out)"
    )
    peak.add_argument(
        "--views-examples", type=int, default=200,
        help="training examples whose augmentations are counted (default 200; 0: no views "
        "table, which reads the workloads' data)",
    )  # fmt: skip
    compare = commands.add_parser(
        "compare", help="do two out_dirs hold the same records, timing aside? (exit 1 if not)"
    )
    compare.add_argument("first", help="an out_dir (records under first/records)")
    compare.add_argument("second", help="another out_dir")
    verify = commands.add_parser(
        "verify",
        help="train a sample of committed records again and report bit agreement "
        "(exit 3 if any record differs)",
    )
    verify.add_argument(
        "records",
        nargs="*",
        help=f"record files of the config's study (default: the --cheapest {DEFAULT_CHEAPEST})",
    )
    verify.add_argument(
        "--configfile", nargs="+", default=["config/config.yaml"],
        help="the study's config files, merged as snakemake merges them "
        "(default config/config.yaml)",
    )  # fmt: skip
    sample = verify.add_mutually_exclusive_group()
    sample.add_argument(
        "--cheapest", type=int, metavar="K", help="the K committed records cheapest to train"
    )
    sample.add_argument("--random", type=int, metavar="K", help="K committed records at random")
    verify.add_argument("--seed", type=int, default=0, help="seed of --random (default 0)")
    verify.add_argument(
        "--trained-in", metavar="DIR",
        help="a records folder a workflow trained again (out_dir/records): compare with its "
        "records instead of training",
    )  # fmt: skip
    verify.add_argument("--out", required=True, help="CSV to write, one row per record")
    return parser, {
        "advice": advice.add_command(commands),
        "peak": peak,
        "aggregate": build,
        "figure": figure,
        "summary": summary,
        "claims": claims,
        "calibrate": calibrate,
        "cost": cost,
        "resolution": resolution,
        "trials": trials,
        "readme": readme,
        "compare": compare,
        "verify": verify,
    }


def _claim_tables() -> list[str]:
    """The benchmark tables the registered claims read (their ``Claim.table``); on the
    ``claims`` and ``calibrate`` command lines each is an option (``--sharing``)."""
    from analysis.claims import CLAIMS, RUNS

    return sorted({claim.table for claim in CLAIMS} - {RUNS})


def _benchmark_options(command: argparse.ArgumentParser) -> None:
    from analysis.figures import TABLES

    for table in _claim_tables():
        command.add_argument(
            table_option(table),
            dest=table,
            help=f"{TABLES[table].help}, for the claims on it; default: none (no data)",
        )


def _benchmark_tables(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict:
    """The benchmark tables given on the command line, by name."""
    from analysis.figures import TABLES

    return {
        table: TABLES[table].read(_existing(parser, table_option(table), getattr(args, table)))
        for table in _claim_tables()
        if getattr(args, table) is not None
    }


def table_option(table: str) -> str:
    """The ``figure`` command's option giving a table: ``echo_speedup`` -> ``--echo-speedup``.

    Args:
        table: A key of ``analysis.figures.TABLES``.
    """
    return "--" + table.replace("_", "-")


def _existing(parser: argparse.ArgumentParser, option: str, path: str) -> str:
    if not Path(path).is_file():
        parser.error(f"{option}: no such file: {path}")
    return path


def _aggregate(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    try:
        studies = parse_studies(
            args.study, [_existing(parser, "--study-file", f) for f in args.study_file]
        )
    except ValueError as error:
        parser.error(str(error))
    if not args.study and not args.study_file:
        parser.error("aggregate needs at least one --study or --study-file")
    # a study file of a study with nothing landed yet gives empty tables
    for name, paths in studies.items():
        for path in paths:
            _existing(parser, f"--study {name}", path)
    runs, curves = aggregate(studies)
    write_tables(runs, curves, args.runs_out, args.curves_out)
    print(f"wrote {args.runs_out} ({len(runs)} rows), {args.curves_out} ({len(curves)} rows)")


def _figure(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    from analysis.figures import TABLES, get, names, save

    spec = get(args.name)
    tables = {}
    for name in spec.inputs:
        option, path = table_option(name), getattr(args, name)
        if path is None:
            parser.error(f"figure {args.name} needs {option}")
        tables[name] = TABLES[name].read(_existing(parser, option, path))
    if args.study is not None and spec.study is None:
        studied = [name for name in names() if get(name).study is not None]
        parser.error(f"--study applies to the run-record figures {studied} only")
    options = {} if args.study is None else {"study": args.study}
    if args.reference is not None:
        options["reference"] = load_reference(_existing(parser, "--reference", args.reference))
    if not args.out.lower().endswith(".png"):
        parser.error(f"--out must end in .png, got {args.out!r}")
    png, pdf = save(spec.draw(**tables, **options), args.out)
    print(f"wrote {png} and {pdf}")


def _summary(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    table = summarize(relative_to_baseline(read_runs(_existing(parser, "--runs", args.runs))))
    atomic_write(args.out, lambda temporary: table.to_csv(temporary, index=False))
    print(f"wrote {args.out} ({len(table)} configurations)")
    for sentence in unreached_baselines(table):
        print(sentence)
    if args.markdown:
        print(markdown_table(table[_MARKDOWN_COLUMNS]))


def _claims(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    from analysis.claims import claims_table, headlines, markdown

    runs = read_runs(_existing(parser, "--runs", args.runs))
    reference = None
    if args.reference is not None:
        reference = load_reference(_existing(parser, "--reference", args.reference))
    if not args.out.lower().endswith(".csv"):
        parser.error(f"--out must end in .csv, got {args.out!r}")
    plan = _planned_workloads(parser, args.configfile)
    table = claims_table(runs, reference, plan, _benchmark_tables(parser, args))
    text = markdown(table)
    atomic_write(args.out, lambda temporary: table.to_csv(temporary, index=False))
    notes = Path(args.out).with_suffix(".md")
    atomic_write(notes, lambda temporary: temporary.write_text(text))
    short = notes.with_name(f"{notes.stem}_headlines.md")
    atomic_write(short, lambda temporary: temporary.write_text(headlines(table)))
    print(f"wrote {args.out}, {notes} and {short} ({len(table)} claims)")
    print(text, end="")


def _config(parser: argparse.ArgumentParser, configfile: list[str]) -> dict:
    """The study's config from ``--configfile``'s files, merged as snakemake merges them (a
    missing file is a usage error naming it)."""
    from experiments.study import load_config

    return load_config(*[_existing(parser, "--configfile", f) for f in configfile])


def _planned_workloads(
    parser: argparse.ArgumentParser, configfile: list[str] | None, config: dict | None = None
) -> dict[str, dict[str, int | None]] | None:
    """Study -> workload -> the trials per search its config plans (None: seeds), as
    `analysis.claims.study.Plan` (None without ``--configfile``); ``config``: that config,
    already loaded (`_config`)."""
    if not configfile:
        return None
    from experiments.study import plan

    studies = plan(config if config is not None else _config(parser, configfile))
    found: dict[str, dict[str, int | None]] = {}
    for name, paths in studies.studies.items():
        for path in paths:
            spec = studies.runs[path].spec
            trials = found.setdefault(name, {}).get(spec.workload)
            if spec.trial is not None:
                trials = max(trials or 0, spec.trial + 1)
            found[name][spec.workload] = trials
    return found


def _calibrate(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    from analysis.calibration import GOAL, calibrate, decidability

    runs = read_runs(_existing(parser, "--runs", args.runs))
    if not args.out.lower().endswith(".csv"):
        parser.error(f"--out must end in .csv, got {args.out!r}")
    for name in ("permutations", "resamples"):
        if getattr(args, name) < (1 if name == "permutations" else 0):
            parser.error(f"--{name} must be >= {1 if name == 'permutations' else 0}")
    table = calibrate(
        runs,
        _planned_workloads(parser, args.configfile),
        permutations=args.permutations,
        resamples=args.resamples,
        seed=args.seed,
        progress=lambda line: print(line, file=sys.stderr, flush=True),
        tables=_benchmark_tables(parser, args),
    )
    over = table[~table["meets_goal"]]
    text = (
        markdown_table(table)
        + f"\n\n{len(table) - len(over)} of {len(table)} claim parts (and claims, part "
        f"'all') read 'reproduced' on at most {GOAL:.0%}, and 'not reproduced' on at most "
        f"{GOAL:.0%}, of {args.permutations} tables at their boundary (seed {args.seed}).\n"
    )
    notes = Path(args.out).with_suffix(".md")
    by_claim = notes.with_name(f"{notes.stem}_by_claim.md")
    atomic_write(args.out, lambda temporary: table.to_csv(temporary, index=False))
    atomic_write(notes, lambda temporary: temporary.write_text(text))
    summary = decidability_markdown(decidability(table))
    atomic_write(by_claim, lambda temporary: temporary.write_text(summary))
    print(text, end="")
    print(f"wrote {args.out}, {notes} and {by_claim}")


def decidability_markdown(table: pd.DataFrame) -> str:
    """`analysis.calibration.decidability`'s table as Markdown, with readable headings and a
    line saying what its columns count."""
    from analysis.calibration import POWERFUL

    headings = {
        "too_weak": "too weak to decide",
        "no_data": "no data yet",
        "highest_fpr": "highest false reproduced",
        "highest_frr": "highest false not reproduced",
    }
    shown = table.assign(
        highest_fpr=table["highest_fpr"].map(lambda v: f"{v:.1%}"),
        highest_frr=table["highest_frr"].map(lambda v: f"{v:.1%}"),
    )
    return (
        markdown_table(shown.rename(columns=headings))
        + f"\n\nA part is decided when it reads reproduced or not reproduced; too weak to "
        f"decide when it reads not resolved and its rule reproduces on under {POWERFUL:.0%} "
        f"of tables resampled at the effect observed (its power): at this scale and noise, "
        f"the rule would seldom reproduce the part even were the effect observed the truth. "
        f"The highest rates are of its parts and of the claim, on tables at their boundary."
        f"\n"
    )


GENERATED = re.compile(r"(<!-- generated: (\S+) -->\n)(.*?)(<!-- end generated -->)", re.S)
"""A block of a document that shows a file as written: ``<!-- generated: FILE -->``, the
file's text, ``<!-- end generated -->`` (README's claims and cost tables)."""


def refresh_blocks(document: str, root: Path) -> str:
    """``document`` with each `GENERATED` block's text replaced by its file's (relative to
    ``root``).

    Raises:
        ValueError: A block names a file that does not exist.
    """

    def fill(match: re.Match[str]) -> str:
        path = root / match.group(2)
        if not path.is_file():
            raise ValueError(f"generated block names {match.group(2)}, which does not exist")
        return match.group(1) + path.read_text() + match.group(4)

    return GENERATED.sub(fill, document)


def _readme(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    readme = Path(_existing(parser, "readme", args.file))
    blocks = GENERATED.findall(readme.read_text())
    updated = refresh_blocks(readme.read_text(), readme.parent)
    atomic_write(readme, lambda temporary: temporary.write_text(updated))
    print(f"refreshed {len(blocks)} generated blocks of {readme}")


def _cost(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    from analysis.cost import censoring_estimates, censoring_line, speed_since, trained_since
    from analysis.protocol import CONDITION, PART, study_cost

    if args.budget_since is not None and args.budget_core_hours is None:
        parser.error("--budget-since needs --budget-core-hours")
    runs = None if args.runs is None else read_runs(_existing(parser, "--runs", args.runs))
    before = None
    if args.budget_since is not None:
        before = read_runs(_existing(parser, "--budget-since", args.budget_since))
        require_columns(before, ["record", "total_s"], args.budget_since)
    by = CONDITION if args.by == "condition" else PART
    planned, unique, censoring = None, None, None
    since, speed = None, pd.DataFrame()
    if args.configfile:
        from experiments.study import plan

        studies = plan(_config(parser, args.configfile))
        rows = []
        for name, paths in studies.studies.items():
            for path in paths:
                spec = studies.runs[path].spec
                row = {"study": name, "record": path, "workload": spec.workload}
                row.update(echo_point=spec.echo_point, echo_factor=spec.echo_factor)
                row.update(shuffle_buffer=spec.shuffle_buffer)
                # as the runs table has it (resolved), so that the prior's conditions match
                row["batch_size"] = spec.batch_size or _default_batch(spec.workload, spec.scale)
                row.update(repetition=spec.repetition, trial=spec.trial)
                row["censored"] = studies.runs[path].options.censor is not None
                rows.append(row)
        planned = pd.DataFrame(rows)
        unique = len(studies.runs)
        if runs is None:  # the records landed so far, read as aggregate would
            runs, _ = aggregate(studies.landed())
    elif args.by == "condition" or runs is None:
        parser.error("--by condition, or no --runs, needs --configfile (the planned runs)")
    if before is not None and runs is not None and len(runs):
        since = trained_since(runs, before)
        speed = speed_since(runs.loc[~runs["record"].duplicated()], since)
    if planned is not None and runs is not None and len(runs):
        priced = runs
        if len(speed):  # the landed runs' cost at the speed the study trains at now
            priced = runs.copy()
            ratio = runs["workload"].map(speed["ratio"]).fillna(1.0).where(~since, 1.0)
            priced["total_s"] = runs["total_s"] * ratio
        censoring = censoring_estimates(planned, priced)
        planned["expected_s"] = censoring["censored"]
    prior = None
    if args.prior is not None:  # another study's: only its cost columns are read
        prior = pd.read_csv(_existing(parser, "--prior", args.prior))
        require_columns(prior, ["record", "workload", "total_s"], args.prior)
    try:
        table = study_cost(runs, planned, prior, by)
    except ValueError as error:
        parser.error(str(error))
    print(markdown_table(table))
    once = runs.drop_duplicates("record") if runs is not None else pd.DataFrame({"total_s": []})
    if len(once):
        print(
            f"\n{len(once)} records landed, {once['total_s'].sum() / 3600:.2f} core-hours "
            f"({once['total_s'].mean():.0f} s per run on one core)"
        )
    else:
        print("\nno records landed yet")
    if len(speed):
        print(speed_line(speed))
    if unique is not None:
        left = (table["estimate_s"] - table["landed_s"].fillna(0)).sum()
        print(remaining_line(unique, len(once), left))
    if censoring is not None:
        print(censoring_line(censoring, planned, runs))
    if args.budget_core_hours is not None:
        once_each = planned.drop_duplicates("record") if planned is not None else None
        whole = study_cost(runs, once_each, prior)
        total = whole["estimate_s"].sum() / 3600
        left = total - whole["landed_s"].fillna(0).sum() / 3600
        spent = None
        if before is not None:
            chosen = since.loc[once.index] if since is not None else pd.Series(dtype=bool)
            spent = int(chosen.sum()), float(once.loc[chosen, "total_s"].sum()) / 3600
        print(budget_line(left, total, args.budget_core_hours, spent))


def _default_batch(workload: str, scale: str) -> int:
    from experiments import registry

    return registry.defaults(workload, scale).hparams["batch_size"]


def speed_line(speed: pd.DataFrame) -> str:
    """One line: `analysis.cost.speed_since`'s ratio per workload."""
    filled = " (the median of the others)"
    ratios = ", ".join(
        f"{workload} {row.ratio:.2f}x{'' if row.measured else filled}"
        for workload, row in speed.iterrows()
    )
    return (
        f"speed: seconds per step since the budget began over those before it ({ratios}; "
        "medians of downstream_s_per_step): the runs still to train are priced at the speed "
        "of those since"
    )


def budget_line(
    left: float, total: float, budget: float, spent: tuple[int, float] | None = None
) -> str:
    """Whether a study fits its ``budget`` (core-hours): ``left`` of its estimated ``total``
    still to train, plus ``spent = (runs, core_hours)`` since the budget began (None: the
    budget begins now)."""
    if spent is None:
        fits = "within" if left <= budget else "OVER"
        return (
            f"estimate {left:.1f} core-hours still to train (the whole study: {total:.1f}): "
            f"{fits} the budget of {budget:g} core-hours"
        )
    runs, hours = spent
    fits = "within" if hours + left <= budget else "OVER"
    return (
        f"budget: {hours:.1f} core-hours spent since it began ({runs} runs) + about "
        f"{left:.1f} still to train = {hours + left:.1f}: {fits} the budget of {budget:g} "
        f"core-hours ({budget - hours - left:+.1f})"
    )


def remaining_line(planned: int, landed: int, left_s: float) -> str:
    """What is left of a study of ``planned`` runs with ``landed`` records, ``left_s`` s of
    estimated core time."""
    line = f"{planned} runs planned (a run shared by two studies once)"
    if landed >= planned:
        return f"{line}; every one has landed"
    return (
        f"{line}; the remaining {planned - landed} at their conditions' mean cost: about "
        f"{left_s / 3600:.1f} core-hours (an estimate: a run two studies share counts in both; "
        "a condition with nothing landed takes the prior's, else its workload's mean)"
    )


def _resolution(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    from analysis.resolution import EVAL_SHARE_GOAL, SPACING_GOAL, resolution_table

    table = resolution_table(read_runs(_existing(parser, "--runs", args.runs)))
    print(markdown_table(table))
    print(
        f"\nstep: fresh examples between located crossings; spacing = step / baseline_median "
        f"(the median of the baseline's searches, or of its seeds where it is not tuned, that "
        f"reached the target; one_in = 1 / spacing); eval_share: evaluation, refinement "
        f"included, over training time. "
        f"Rule: meets when spacing <= 1/{round(1 / SPACING_GOAL)} and eval_share <= "
        f"{EVAL_SHARE_GOAL:.0%}"
    )


def _trials(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    from analysis.trials import trials_table

    runs = read_runs(_existing(parser, "--runs", args.runs))
    plan = _planned_workloads(parser, args.configfile)
    trials = None
    if plan is not None:
        trials = {
            (study, workload): n
            for study, workloads in plan.items()
            for workload, n in workloads.items()
            if n is not None
        }
    print(markdown_table(trials_table(runs, trials)))
    print(
        "\nPer tuned baseline (its study, workload and batch size): best_half, best_T: the "
        "expected fewest fresh examples to target among the first T/2 and T trials of a "
        "search (each search's best of its trials 1..k, averaged over its searches; a trial "
        "that missed at how far it ran, its cap or where it was censored); p_reached_half: "
        "the share of searches whose first T/2 trials hold one that reached the target; "
        "gain_half = best_half - best_T; step: fresh examples between located crossings; "
        "ratio_shift: the largest change, over the echo conditions tuned beside it, of their "
        "expected best relative to the baseline's between T/2 and T trials. Rule: flattened "
        "when gain_half <= step"
    )


def _peak(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    from analysis.peak import report

    if args.views_examples < 0:
        parser.error(f"--views-examples must be 0 or more, got {args.views_examples}")
    runs = read_runs(_existing(parser, "--runs", args.runs))
    config = _config(parser, args.configfile) if args.configfile else {}
    workloads = config.get("workloads", {})
    data_dirs = {name: (spec or {}).get("data_dir") for name, spec in workloads.items()}
    plan = _planned_workloads(parser, args.configfile, config)
    print(report(runs, plan, args.views_examples, data_dirs), end="")


def _compare(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    differences = compare_record_dirs(args.first, args.second)
    for line in differences:
        print(line)
    if differences:
        raise ValueError(
            f"{len(differences)} records differ between {args.first} and "
            f"{args.second} (timing fields aside)"
        )
    count = sum(1 for _ in Path(args.first, "records").rglob("*.json"))
    print(f"{count} records agree (timing fields aside)")


def _verify(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    from analysis.verify import COLUMNS, DEFAULT_CHEAPEST, select, verify
    from experiments.study import load_config, plan

    for name in ("cheapest", "random"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"argument --{name}: must be >= 1, got {value}")
    if args.records and (args.cheapest or args.random):
        parser.error("give record files or --cheapest/--random, not both")
    runs = plan(load_config(*args.configfile)).runs
    for path in args.records:
        if path not in runs:
            parser.error(f"{path} is not a record of {' '.join(args.configfile)}")
        if not Path(path).is_file():
            parser.error(f"{path} does not exist")
    committed = args.records or [path for path in runs if Path(path).is_file()]
    if not committed:
        raise ValueError(f"no committed records of {' '.join(args.configfile)}")
    if not args.records and args.cheapest is None and args.random is None:
        args.cheapest = DEFAULT_CHEAPEST
    chosen = select(committed, cheapest=args.cheapest, sample=args.random, seed=args.seed)
    rows = verify({path: runs[path].spec.args() for path in chosen}, args.trained_in)
    table = pd.DataFrame(rows, columns=list(COLUMNS))
    atomic_write(args.out, lambda temporary: table.to_csv(temporary, index=False))
    shown = ["record", "numerics", "identical", "first_differing_eval", "fresh_to_target_was",
             "fresh_to_target_now", "refined_fresh_was", "refined_fresh_now"]  # fmt: skip
    print(markdown_table(table[shown]))
    differ = int((~table["identical"]).sum())
    print(f"\n{len(table) - differ} of {len(table)} records identical; table: {args.out}")
    if differ:
        print(
            f"python -m analysis verify: {differ} of {len(table)} records do not retrain "
            "bit-identically (see first_differing_eval)",
            file=sys.stderr,
        )
        raise SystemExit(3)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line.

    Args:
        argv: The arguments. Default None: ``sys.argv[1:]``.
    """
    parser, commands = _parser()
    args = parser.parse_args(argv)
    command = {
        "advice": advice.run,
        "peak": _peak,
        "aggregate": _aggregate,
        "figure": _figure,
        "summary": _summary,
        "claims": _claims,
        "calibrate": _calibrate,
        "cost": _cost,
        "resolution": _resolution,
        "trials": _trials,
        "readme": _readme,
        "compare": _compare,
        "verify": _verify,
    }[args.command]
    try:
        command(commands[args.command], args)
    except ValueError as error:
        print(f"python -m analysis {args.command}: error: {error}", file=sys.stderr)
        raise SystemExit(1) from None
