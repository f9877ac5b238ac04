rule train:
    """Train one configuration to its target (or budget) and write its run record."""
    input:
        # ancient: a refreshed data cache does not make existing records stale
        ancient(f"{OUT}/data/{{workload}}.json"),
        # a censored trial reads its search's earlier trials: they train first (ancient: an
        # earlier trial retrained does not retrain the later ones, which stay exact)
        ancient(earlier_trials),
    output:
        f"{OUT}/records/{{workload}}/{{run_id}}.json",
    log:
        f"{OUT}/logs/train/{{workload}}/{{run_id}}.log",
    params:
        python=PYTHON,
        args=run_args,
    threads: config["train"]["threads"]
    conda:
        "../envs/suite.yaml"
    shell:
        "{params.python} -m experiments.run {params.args} --out {output} > {log} 2>&1"


rule records:
    """Every run record the studies ask for (training only; no tables or figures)."""
    input:
        record_paths(),
