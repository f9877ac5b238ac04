# Paths and lookups shared by the rules. PLAN (experiments.study.plan) maps every record path
# of the studies to the run that writes it.
import sys

from snakemake.settings.types import DeploymentMethod

from analysis.figures import CAPTIONS, STUDIES

OUT = config.get("out_dir", "results")
FIGURES_DIR = config.get("figures_dir", "paper_figures")
# The interpreter running Snakemake (the project's venv), or the rule's conda environment's.
CONDA = DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method
PYTHON = "python" if CONDA else sys.executable


wildcard_constraints:
    workload="[a-z0-9_]+",
    run_id="[A-Za-z0-9_.\\-]+",
    name="[a-z_]+",


def record_paths():
    """Every record the studies read."""
    return sorted(PLAN.runs)


def run_args(wildcards, output):
    """`python -m experiments.run` arguments of the run that writes ``output[0]``."""
    return " ".join(PLAN.runs[output[0]].args())


SHARING = config.get("sharing", {})
SPEEDUP = config.get("echo_speedup", {})


def flags(options):
    """``{"ts_batches": 20, "modes": ["own"]}`` -> ``--ts-batches 20 --modes own``."""
    parts = []
    for key, value in options.items():
        values = value if isinstance(value, list) else [value]
        parts.append(f"--{key.replace('_', '-')} " + " ".join(f"{v}" for v in values))
    return " ".join(parts)


SHARING_CSV = f"{OUT}/benchmarks/shared_loading.csv"
SPEEDUP_CSV = f"{OUT}/benchmarks/echo_speedup.csv"
BENCHMARK_FIGURES = {
    "sharing_throughput": ("sharing", SHARING_CSV),
    "sharing_cpu": ("sharing", SHARING_CSV),
    "echo_on_stall": ("echo_speedup", SPEEDUP_CSV),
}


def figure_names():
    """Figures the config asks for: one per study, and the benchmarks' when configured."""
    names = [name for name, study in STUDIES.items() if study in PLAN.studies]
    names += [name for name, (key, _) in BENCHMARK_FIGURES.items() if key in config]
    return names


def figure_inputs(wildcards):
    if wildcards.name in BENCHMARK_FIGURES:
        return {"csv": BENCHMARK_FIGURES[wildcards.name][1]}
    return {"runs": f"{OUT}/runs.csv", "curves": f"{OUT}/eval_curves.csv"}


def figure_caption(wildcards):
    return CAPTIONS[wildcards.name]
