"""The papers' claims decided by code: one module per claim, one family of rules.

Each module of this package (but `analysis.claims.rules` and `analysis.claims.study`) holds
one claim of ``paper_figures/reference/papers.csv``, named after its row's ``quantity``
(``claim_fewer_fresh_at_e2.py``): a module-level ``CLAIM``, a `Claim` with the paper's
statement as we test it, the studies it reads, its rule's parameters in words, the rows of
the reference table quoted beside it (the paper's numbers), and ``decide``, which turns the
runs table into the claim's parts. Every part is decided by the same paired sign test
(`analysis.claims.rules`), with the pairs the design makes (search against search, seed
against seed); a part whose paper gives a number also says whether our interval holds it.
`CLAIMS` is the registry, in each claim's ``order``; `claims_table` decides them all.

A claim on a benchmark (the sharing loader's throughput and CPU, echoing against a slow
upstream) reads that benchmark's table instead of the runs table (its ``table``, a key of
``analysis.figures.TABLES``), pairs the benchmark's interleaved repeats, and says how its
table is drawn under the null and resampled (`analysis.claims.benchmark`).

Adding a claim is one new module here; the table, its markdown, README's Results and the
calibration (`analysis.calibration`) read the registry.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.claims.rules import (
    NO_DATA,
    NOT_REPRODUCED,
    NOT_RESOLVED,
    REPRODUCED,
    combine,
)
from analysis.claims.study import MixedNumerics, Plan

__all__ = [
    "CLAIMS",
    "CLAIM_COLUMNS",
    "MIXED_NUMERICS",
    "NOT_REPRODUCED",
    "NOT_RESOLVED",
    "NO_DATA",
    "REPRODUCED",
    "RUNS",
    "VERDICTS",
    "Claim",
    "Draw",
    "Part",
    "claims_table",
    "combine",
    "markdown",
]

MIXED_NUMERICS = "mixed numerics"
"""The verdict of a claim whose study pools records computed in different numerics modes or
library versions (`run_contract.numerics.record_numerics`): nothing is decided from them."""
VERDICTS = (REPRODUCED, NOT_REPRODUCED, NOT_RESOLVED, NO_DATA, MIXED_NUMERICS)
"""Every verdict a claim can get."""

CLAIM_COLUMNS = ["claim", "statement", "paper", "ours", "rule", "verdict"]
"""Columns of the claims table, in order."""


@dataclass(frozen=True)
class Part:
    """One decided part of a claim (a workload, a condition, a step of a sweep).

    Attributes:
        name: What it compares, stable across tables of the same design (the calibration
            counts by it), e.g. ``cifar10_resnet before_augment e=2``.
        verdict: One of `VERDICTS` but `MIXED_NUMERICS`.
        text: What we found, for the table's "ours" column.
    """

    name: str
    verdict: str
    text: str


Decide = Callable[[pd.DataFrame, Plan], list[Part]]
"""The claim's table (the runs table, or a benchmark's) and the plan -> a claim's parts."""

Draw = Callable[[pd.DataFrame, np.random.Generator], pd.DataFrame]
"""A claim's table -> a table drawn from it (under the null, or resampled)."""

RUNS = "runs"
"""The ``table`` of a claim decided from run records."""


@dataclass(frozen=True)
class Claim:
    """One of the papers' claims and how our runs decide it.

    Attributes:
        name: The ``quantity`` of its row in the reference table.
        statement: The claim as we test it.
        studies: The studies it reads.
        rule: Its parts' comparisons and margins, in words.
        decide: The runs table and the plan -> its parts.
        order: Its place in the table.
        also: Other rows of the reference table (by ``quantity``) quoted beside it.
        boundary: For a claim that something is at most, no worse or never below, the
            runs table moved to the claim's boundary (``runs -> runs``), applied to a null
            table (`analysis.calibration.permuted`) to measure its false-positive rate; None
            (a claim of fewer or faster): the null table as it is.
        table: What it decides from: `RUNS`, or a benchmark's table (a key of
            ``analysis.figures.TABLES``, e.g. ``sharing``). Default `RUNS`.
        null: For a claim on a benchmark's table: that table drawn under the claim's null
            (moved to its boundary where it has one). Default None (a claim on runs).
        resample: For a claim on a benchmark's table: that table's repeats drawn with
            replacement (`analysis.claims.benchmark.resample_repeats`). Default None.
    """

    name: str
    statement: str
    studies: tuple[str, ...]
    rule: str
    decide: Decide
    order: int
    also: tuple[str, ...] = ()
    boundary: Callable[[pd.DataFrame], pd.DataFrame] | None = None
    table: str = RUNS
    null: Draw | None = None
    resample: Draw | None = None


def _discover() -> tuple[Claim, ...]:
    found = []
    for module in pkgutil.iter_modules(__path__):
        if module.name in ("benchmark", "rules", "study") or module.name.startswith("_"):
            continue
        claim = importlib.import_module(f"{__name__}.{module.name}").CLAIM
        if claim.name != module.name:
            raise ValueError(f"analysis/claims/{module.name}.py declares claim {claim.name!r}")
        found.append(claim)
    return tuple(sorted(found, key=lambda claim: claim.order))


CLAIMS: tuple[Claim, ...] = _discover()
"""Every registered claim, in order."""


def _paper(reference: pd.DataFrame | None, claim: Claim) -> str:
    """The paper's statement of ``claim`` (its row's note), then the rows it quotes."""
    if reference is None or "quantity" not in reference:
        return ""
    from analysis.reference import describe

    own = reference[reference["quantity"] == claim.name]
    parts = [str(note) for note in own["note"] if str(note)]
    for quantity in claim.also:
        rows = reference[reference["quantity"] == quantity]
        parts += [
            str(r["note"]) if r["kind"] != "number" else describe(r) for _, r in rows.iterrows()
        ]
    return " ".join(parts)


def decide(claim: Claim, table: pd.DataFrame, plan: Plan | None = None) -> tuple[str, list[Part]]:
    """``claim``'s verdict and parts on ``table``, its `Claim.table` (`MIXED_NUMERICS` and no
    parts when a study it reads pools numerics)."""
    try:
        parts = claim.decide(table, plan or {})
    except MixedNumerics:
        return MIXED_NUMERICS, []
    return combine([part.verdict for part in parts]), parts


def claims_table(
    runs: pd.DataFrame,
    reference: pd.DataFrame | None = None,
    plan: Plan | None = None,
    tables: Mapping[str, pd.DataFrame] | None = None,
) -> pd.DataFrame:
    """Decide every claim of `CLAIMS` from the runs table and the benchmarks' tables.

    Args:
        runs: The runs table (``analysis.records``) of a study config; a study it lacks
            gives `NO_DATA`.
        reference: The papers' table (``analysis.reference.load_reference``): the ``note`` of
            the claim's row, and its ``also`` rows, are the ``paper`` column. Default None.
        plan: What the config plans (`analysis.claims.study.Plan`): a planned workload
            without complete searches is a part without data, and a search is complete at
            its planned trials. Default None: the records' own workloads and searches.
        tables: Benchmark tables by name (``sharing``, ``echo_speedup``) for the claims on
            benchmarks; a claim whose table is not given gets `NO_DATA`. Default None.

    Returns:
        One row per claim with the columns `CLAIM_COLUMNS`.
    """
    given = {**(tables or {}), RUNS: runs}
    rows = []
    for claim in CLAIMS:
        try:
            if claim.table not in given:
                parts, ours = [], f"no {claim.table} benchmark table"
            else:
                parts = claim.decide(given[claim.table], plan or {})
                ours = "; ".join(f"{p.name}: {p.text}: {p.verdict}" for p in parts)
                ours = ours or ("no runs yet" if claim.table == RUNS else "no rows")
            verdict, rule = combine([p.verdict for p in parts]), claim.rule
        except MixedNumerics as mixed:
            ours, rule, verdict = str(mixed), "none: records not comparable", MIXED_NUMERICS
        rows.append({
            "claim": claim.name,
            "statement": claim.statement,
            "paper": _paper(reference, claim),
            "ours": ours,
            "rule": rule,
            "verdict": verdict,
        })  # fmt: skip
    return pd.DataFrame(rows, columns=CLAIM_COLUMNS)


def markdown(table: pd.DataFrame) -> str:
    """The claims table as a markdown table (``|`` in cells escaped): the claim as we test
    it, the paper's words and numbers, ours, the rule and the verdict."""
    header = ["claim", "paper", "ours", "rule", "verdict"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for _, row in table.iterrows():
        cells = [row["statement"], row["paper"], row["ours"], row["rule"], f"**{row['verdict']}**"]
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"
