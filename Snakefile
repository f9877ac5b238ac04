# Thin by design: configuration, its validation, includes and the default target. Rules live
# in workflow/rules/*.smk; the logic they run lives in the packages.
from experiments.study import check_config, plan


# `--configfile F` replaces the default study instead of being merged into it (F is a whole
# study, e.g. config/test.yaml); `--config KEY=VALUE` alone still overrides the default.
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


check_config(config, "workflow/schemas/config.schema.yaml")  # fills in the defaults
PLAN = plan(config)


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/benchmarks.smk"
include: "workflow/rules/analysis.smk"


rule all:
    default_target: True
    input:
        # The records themselves, not only the tables drawn from them: Snakemake does not
        # remake a deleted input of an output that exists, so a deleted (stale) record would
        # otherwise never be retrained.
        rules.records.input,
        rules.figures.input,
        rules.summary.output,
        rules.claims.output,
