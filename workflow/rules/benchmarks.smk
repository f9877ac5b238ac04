rule sharing_benchmark:
    """Per-consumer throughput and CPU of independent vs shared loading (figures 7, 8).

    A shell rule, not a `script:` one: Snakemake reruns a script rule whose script is newer
    than its output, and a fresh clone checks workflow/ out after the committed results/.
    TensorSocket is installed beside the project first when a mode needs it (the project
    never imports it); `-u`: forked trials inherit no unwritten lines of the log."""
    output:
        SHARING_CSV,
    log:
        f"{OUT}/logs/sharing_benchmark.log",
    params:
        python=PYTHON,
        flags=flags("sharing"),
        install=lambda wildcards: (
            "benchmarks/install_tensorsocket.sh && "
            if "tensorsocket" in config["sharing"]["modes"]
            else ""
        ),
    threads: ALONE  # a throughput benchmark: it runs alone
    conda:
        "../envs/suite.yaml"
    shell:
        "({params.install}TF_CPP_MIN_LOG_LEVEL=2 {params.python} -u -m benchmarks.sharing"
        " {params.flags} --tensorsocket-path .bench-deps/tensorsocket --out {output})"
        " > {log} 2>&1"


rule echo_speedup:
    """Steps/s of fixed-factor batch echoing and EchoOnStall across R (figure 9)."""
    output:
        SPEEDUP_CSV,
    log:
        f"{OUT}/logs/echo_speedup.log",
    params:
        python=PYTHON,
        flags=flags("echo_speedup"),
    threads: ALONE  # a timing benchmark: it runs alone
    conda:
        "../envs/suite.yaml"
    shell:
        "{params.python} -m benchmarks.echo_speedup {params.flags} --out {output} > {log} 2>&1"


rule sharing_ray_benchmark:
    """Loading shared across simulated hosts through Ray (figure sharing_across_hosts)."""
    output:
        SHARING_RAY_CSV,
    log:
        f"{OUT}/logs/sharing_ray.log",
    params:
        python=PYTHON,
        flags=flags("sharing_ray"),
    threads: ALONE  # a throughput benchmark: it runs alone
    conda:
        "../envs/suite.yaml"
    shell:
        "{params.python} -m benchmarks.sharing_ray {params.flags} --out {output} > {log} 2>&1"
