# Paths and lookups shared by the rules. PLAN (experiments.study.plan) maps every record path
# of the studies to the run that writes it.
import os
import shlex
import sys

from snakemake.settings.types import DeploymentMethod

from analysis import claims, figures
from analysis.cli import table_option
from experiments.study import load_config

OUT = config["out_dir"]
# The default study's out_dir, where the benchmarks a study without them reads are.
DEFAULT_OUT = load_config("config/config.yaml")["out_dir"]
FIGURES_DIR = config["figures_dir"]
# The interpreter running Snakemake (the project's venv), or the rule's conda environment's.
CONDA = DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method
PYTHON = "python" if CONDA else sys.executable
# Threads of a job that must run alone: Snakemake scales a claim above --cores down to it, so
# the job takes every core (unlike `workflow.cores`, this needs no --cores: --report, --lint).
ALONE = 1024


wildcard_constraints:
    workload="[a-z0-9_]+",
    run_id="[A-Za-z0-9_.\\-]+",
    name="[a-z_]+",


def record_paths():
    """Every record the studies read."""
    return sorted(PLAN.runs)


def earlier_trials(wildcards):
    """The records a censored search trial reads first (`PlannedRun.waits_for`)."""
    return PLAN.runs[f"{OUT}/records/{wildcards.workload}/{wildcards.run_id}.json"].waits_for()


def run_args(wildcards, output):
    """`python -m experiments.run` arguments of the run that writes ``output[0]``."""
    return shlex.join(PLAN.runs[output[0]].args())


def flags(section):
    """A params function: the config's ``section`` (its schema's defaults filled in) as a
    benchmark's options, ``{"steps": 40, "ratios": [1, 2], "touch": False}`` -> ``--steps 40
    --ratios 1 2 --no-touch``;
    read only when the rule runs, as the section is there only when the config asks for it."""

    def options(wildcards):
        parts = []
        for key, value in config[section].items():
            option = key.replace("_", "-")
            if isinstance(value, bool):  # argparse.BooleanOptionalAction: --x / --no-x
                parts.append(f"--{'' if value else 'no-'}{option}")
                continue
            values = value if isinstance(value, list) else [value]
            parts.append(f"--{option} " + " ".join(f"{v}" for v in values))
        return " ".join(parts)

    return options


SHARING_CSV = f"{OUT}/benchmarks/shared_loading.csv"
SPEEDUP_CSV = f"{OUT}/benchmarks/echo_speedup.csv"
SHARING_RAY_CSV = f"{OUT}/benchmarks/sharing_ray.csv"
# Where the workflow writes each table a figure can be drawn from (analysis.figures.TABLES
# names them; a figure's registration says which it needs); a benchmark table is there when
# the config has the section of the same name.
TABLES = {
    "runs": f"{OUT}/runs.csv",
    "curves": f"{OUT}/eval_curves.csv",
    "sharing": SHARING_CSV,
    "echo_speedup": SPEEDUP_CSV,
    "sharing_ray": SHARING_RAY_CSV,
}


def figure_names():
    """Figures the config asks for: those of its studies, and the benchmarks' when configured."""
    wanted = []
    for name in figures.names():
        spec = figures.get(name)
        if spec.study in PLAN.studies if spec.study else set(spec.inputs) <= set(config):
            wanted.append(name)
    return wanted


def figure_inputs(wildcards):
    return {table: TABLES[table] for table in figures.get(wildcards.name).inputs}


def figure_tables(wildcards, input):
    """``--runs results/runs.csv --curves ...``: the `python -m analysis figure` options."""
    tables = figures.get(wildcards.name).inputs
    return " ".join(f"{table_option(table)} {input[table]}" for table in tables)


def claim_inputs(wildcards):
    """The benchmark tables the claims on benchmarks read (`analysis.claims.Claim.table`):
    those the config runs, else the default study's where they are (a study that runs no
    benchmarks, e.g. the protocol study, reads those, as `scripts/study-report.sh` does)."""
    wanted = {claim.table for claim in claims.CLAIMS} - {claims.RUNS}
    inputs = {}
    for table in sorted(wanted):
        default = os.path.join(DEFAULT_OUT, os.path.relpath(TABLES[table], OUT))
        if table in config:
            inputs[table] = TABLES[table]
        elif os.path.isfile(default):
            inputs[table] = default
    return inputs


def claim_tables(wildcards, input):
    """``--sharing results/benchmarks/shared_loading.csv ...``: `python -m analysis claims`'s
    benchmark options."""
    return " ".join(f"{table_option(table)} {input[table]}" for table in claim_inputs(wildcards))


def figure_caption(wildcards):
    return figures.get(wildcards.name).caption
