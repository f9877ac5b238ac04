OUT = config["benchmarks"]["out_dir"]


rule echo_overhead:
    output:
        f"{OUT}/echo_overhead.csv",
    log:
        f"{OUT}/logs/echo_overhead.log",
    shell:
        "python -m benchmarks.echo_overhead --out {output} > {log} 2>&1"


rule echo_speedup:
    output:
        f"{OUT}/echo_speedup.csv",
    log:
        f"{OUT}/logs/echo_speedup.log",
    shell:
        "python -m benchmarks.echo_speedup --out {output} > {log} 2>&1"


rule echo_benchmarks:
    input:
        rules.echo_overhead.output,
        rules.echo_speedup.output,
