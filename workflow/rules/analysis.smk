# Records -> tidy tables -> one figure per rule invocation (PNG for README, PDF beside it).


rule aggregate:
    """Check every record against the run its config asks for; write the tidy tables."""
    input:
        record_paths(),
    output:
        runs=f"{OUT}/runs.csv",
        curves=f"{OUT}/eval_curves.csv",
    log:
        f"{OUT}/logs/aggregate.log",
    conda:
        "../envs/suite.yaml"
    script:
        "../scripts/aggregate.py"


rule summary:
    """Fresh examples, steps and wall time to target relative to baseline (median, min-max)."""
    input:
        rules.aggregate.output.runs,
    output:
        f"{OUT}/summary.csv",
    log:
        f"{OUT}/logs/summary.log",
    params:
        python=PYTHON,
    conda:
        "../envs/suite.yaml"
    shell:
        "{params.python} -m analysis summary --runs {input} --out {output} > {log} 2>&1"


rule claims:
    """The papers' claims decided by code from the records (analysis.claims)."""
    input:
        unpack(claim_inputs),
        runs=rules.aggregate.output.runs,
        reference=config["reference"],
    output:
        csv=f"{OUT}/claims.csv",
        md=f"{OUT}/claims.md",
        headlines=f"{OUT}/claims_headlines.md",
    log:
        f"{OUT}/logs/claims.log",
    params:
        python=PYTHON,
        # the plan: a search is complete at the trials the config asks for
        configs=" ".join(map(str, workflow.configfiles)) or "config/config.yaml",
        tables=claim_tables,
    conda:
        "../envs/suite.yaml"
    shell:
        "{params.python} -m analysis claims --runs {input.runs} --reference {input.reference}"
        " {params.tables} --configfile {params.configs} --out {output.csv} > {log} 2>&1"


rule figure:
    """One figure of the papers, from the tables (or a benchmark's CSV)."""
    input:
        unpack(figure_inputs),
        reference=config["reference"],
    output:
        png=report(
            f"{FIGURES_DIR}/{{name}}.png",
            caption="../report/figure.rst",
            category="Figures",
        ),
        pdf=f"{FIGURES_DIR}/{{name}}.pdf",
    log:
        f"{OUT}/logs/figures/{{name}}.log",
    params:
        python=PYTHON,
        caption=figure_caption,
        tables=figure_tables,
    conda:
        "../envs/suite.yaml"
    shell:
        "{params.python} -m analysis figure {wildcards.name} {params.tables}"
        " --reference {input.reference} --out {output.png} > {log} 2>&1"


rule figures:
    """Every figure the config asks for (from committed records: no training)."""
    input:
        expand(f"{FIGURES_DIR}/{{name}}.png", name=figure_names()),
