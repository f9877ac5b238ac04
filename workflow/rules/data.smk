rule acquire_data:
    """Fill the data cache for one workload (a receipt says what was read)."""
    output:
        f"{OUT}/data/{{workload}}.json",
    log:
        f"{OUT}/logs/data/{{workload}}.log",
    params:
        python=PYTHON,
        scale=config["scale"],
        data_dir=lambda wc: (
            f"--data-dir {config['workloads'][wc.workload]['data_dir']}"
            if config["workloads"][wc.workload]["data_dir"]
            else ""
        ),
    conda:
        "../envs/suite.yaml"
    shell:
        "{params.python} -m experiments.acquire --workload {wildcards.workload} --scale {params.scale}"
        " {params.data_dir} --out {output} > {log} 2>&1"
