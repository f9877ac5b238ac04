"""Snakemake script of rule `aggregate`: records -> results/runs.csv, results/eval_curves.csv."""

import json
import sys

from analysis.records import aggregate, write_tables
from experiments.study import mismatches, plan

snakemake = globals()["snakemake"]  # injected by Snakemake's `script:` directive
study_plan = plan(snakemake.config)
with open(snakemake.log[0], "w") as log:
    stale = []
    for path in snakemake.input:
        with open(path) as file:
            found = mismatches(study_plan.runs[path], json.load(file))
        stale += [f"{path}: {m}" for m in found]
    if stale:
        print("records that do not match the config (delete them to retrain):", file=log)
        print("\n".join(stale), file=log)
        sys.exit(f"aggregate: {len(stale)} record fields differ from the config; see {log.name}")
    runs, curves = aggregate(study_plan.studies)
    write_tables(runs, curves, snakemake.output.runs, snakemake.output.curves)
    print(f"{len(runs)} rows from {len(snakemake.input)} records", file=log)
