# Thin by design: configuration and wiring only; rules live in workflow/rules/*.smk and the
# logic they run lives in the packages.
configfile: "config/config.yaml"


include: "workflow/rules/benchmarks.smk"


rule all:
    default_target: True
    input:
        rules.echo_benchmarks.input,
