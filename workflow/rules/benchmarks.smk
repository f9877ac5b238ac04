rule sharing_benchmark:
    """Per-consumer throughput and CPU of independent vs shared loading (figures 7, 8)."""
    output:
        SHARING_CSV,
    log:
        f"{OUT}/logs/sharing_benchmark.log",
    params:
        python=PYTHON,
        flags=flags(SHARING),
        # TensorSocket for the comparison, installed beside the project (never imported by it)
        install=(
            "benchmarks/install_tensorsocket.sh &&"
            if "tensorsocket" in SHARING.get("modes", ["tensorsocket"])
            else ""
        ),
    threads: ALONE  # a throughput benchmark: it runs alone
    conda:
        "../envs/suite.yaml"
    shell:
        "({params.install} TF_CPP_MIN_LOG_LEVEL=2 {params.python} -m benchmarks.sharing {params.flags}"
        " --tensorsocket-path .bench-deps/tensorsocket --out {output}) > {log} 2>&1"


rule echo_speedup:
    """Steps/s of fixed-factor batch echoing and EchoOnStall across R (figure 9)."""
    output:
        SPEEDUP_CSV,
    log:
        f"{OUT}/logs/echo_speedup.log",
    params:
        python=PYTHON,
        flags=flags(SPEEDUP),
    threads: ALONE  # a timing benchmark: it runs alone
    conda:
        "../envs/suite.yaml"
    shell:
        "{params.python} -m benchmarks.echo_speedup {params.flags} --out {output} > {log} 2>&1"
