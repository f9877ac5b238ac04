"""Snakemake script of rule `aggregate`: records -> results/runs.csv, results/eval_curves.csv.

Every record is first checked against the run its config asks for, with the workloads'
current defaults filled in (`experiments.study.record_problems`: `RunSpec.mismatches`, and a
censored trial's incumbent against its search's earlier trials): a stale record is refused,
naming the field, never drawn.
"""

import sys

from analysis.records import aggregate, write_tables
from experiments.study import plan, record_problems

snakemake = globals()["snakemake"]  # injected by Snakemake's `script:` directive
study_plan = plan(snakemake.config)
with open(snakemake.log[0], "w") as log:
    stale = []
    for path in snakemake.input:
        stale += [f"{path}: {m}" for m in record_problems(path, study_plan)]
    if stale:
        print(
            "records that are not the runs the config asks for (delete them to retrain):", file=log
        )
        print("\n".join(stale), file=log)
        sys.exit(f"aggregate: {len(stale)} record fields differ from the config; see {log.name}")
    runs, curves = aggregate(study_plan.studies)
    write_tables(runs, curves, snakemake.output.runs, snakemake.output.curves)
    print(f"{len(runs)} rows from {len(snakemake.input)} records", file=log)
