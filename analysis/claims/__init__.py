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

A claim on a tuned study is decided at T, the trials per search its config plans, and again
on each search's first T/2 trials (and the previous plan's T = 10 where it lies between):
its ``firmness`` says whether the verdict holds across them, and a part whose verdict changes
reads "depends on T" with its verdicts shown (`analysis.claims.study.horizons`).

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
from analysis.claims.study import Horizon, MixedNumerics, Plan, horizons

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
    "headlines",
    "markdown",
]

MIXED_NUMERICS = "mixed numerics"
"""The verdict of a claim whose study pools records computed in different numerics modes or
library versions (`run_contract.numerics.record_numerics`): nothing is decided from them."""
VERDICTS = (REPRODUCED, NOT_REPRODUCED, NOT_RESOLVED, NO_DATA, MIXED_NUMERICS)
"""Every verdict a claim can get."""

CLAIM_COLUMNS = [
    "claim", "statement", "paper", "ours", "rule", "verdict", "firmness", "headline",
    "paper_number",
]  # fmt: skip
"""Columns of the claims table, in order: ``verdict`` at T; ``firmness``, whether it holds
at T/2 (and the previous T); ``headline``, our number for the claim with its interval;
``paper_number``, the paper's."""

DEPENDS_ON_T = "depends on T"
"""What a part or claim whose verdict changes with the trials per search reads beside its
verdicts."""


@dataclass(frozen=True)
class Part:
    """One decided part of a claim (a workload, a condition, a step of a sweep).

    Attributes:
        name: What it compares, stable across tables of the same design (the calibration
            counts by it), e.g. ``cifar10_resnet before_augment e=2``.
        verdict: One of `VERDICTS` but `MIXED_NUMERICS`.
        text: What we found, for the table's "ours" column.
        p_against: The sign test's p-value against the part (`combine` refutes a claim of
            ``m`` parts at ``ALPHA / m``). Default 1.
        number: Its headline number with its interval (``e=2 / baseline 0.57
            (0.54-0.75)``). Default none.
    """

    name: str
    verdict: str
    text: str
    p_against: float = 1.0
    number: str = ""


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
        headline: The part whose number heads the claim's line (its name, or the start of
            it). Default: the first part with a number.
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
    headline: str = ""


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
    return verdict_of(parts), parts


def verdict_of(parts: list[Part]) -> str:
    """The claim's verdict from its parts (`combine`)."""
    return combine([part.verdict for part in parts], [part.p_against for part in parts])


def _paper_number(reference: pd.DataFrame | None, claim: Claim) -> str:
    """The paper's numbers for ``claim`` (its own row and its ``also`` rows of kind
    ``number``), or ``qualitative``."""
    if reference is None or "quantity" not in reference:
        return ""
    rows = reference[reference["quantity"].isin([claim.name, *claim.also])]
    rows = rows[rows["kind"] == "number"]
    numbers = [f"{r['quantity']} = {r['value']:g} {r['unit']}".rstrip() for _, r in rows.iterrows()]
    return "; ".join(numbers) or "qualitative"


def _headline(claim: Claim, parts: list[Part]) -> str:
    """The claim's headline part's number, and how many of its parts read each verdict."""
    numbered = [p for p in parts if p.number]
    chosen = [p for p in numbered if p.name.startswith(claim.headline)] or numbered
    counts = {v: sum(p.verdict == v for p in parts) for v in (REPRODUCED, NOT_REPRODUCED)}
    tally = f"{counts[REPRODUCED]} of {len(parts)} parts reproduced"
    if counts[NOT_REPRODUCED]:
        tally += f", {counts[NOT_REPRODUCED]} not"
    if not chosen:
        return tally if parts else ""
    return f"{chosen[0].name}: {chosen[0].number} ({tally})"


def _shown(verdicts: dict[str, str]) -> str:
    """``depends on T (not resolved at T/2 = 5, reproduced at T = 10)``, or the one verdict
    every horizon gives (``reproduced (also at T/2 = 5)``)."""
    if len(set(verdicts.values())) == 1:
        also = f" (also at {', '.join(list(verdicts)[:-1])})" if len(verdicts) > 1 else ""
        return next(iter(verdicts.values())) + also
    at = ", ".join(f"{verdict} at {label}" for label, verdict in verdicts.items())
    return f"{DEPENDS_ON_T} ({at})"


def _firmness(verdicts: dict[str, str]) -> str:
    """``firm (the same at T/2 = 5)``, ``depends on T (...)``, or ``""`` with one horizon."""
    if len(verdicts) < 2:
        return ""
    if len(set(verdicts.values())) > 1:
        return _shown(verdicts)
    return f"firm (the same at {', '.join(list(verdicts)[:-1])})"


def _decide_at(
    claim: Claim, table: pd.DataFrame, plan: Plan | None, at: list[Horizon]
) -> tuple[list[Part], dict[str, list[Part]]]:
    """``claim``'s parts at T, and its parts at each horizon (only T's where the claim reads
    no tuned runs)."""
    tuned = (
        claim.table == RUNS
        and "trial" in table
        and (table["study"].isin(claim.studies) & table["trial"].notna()).any()
    )
    parts = claim.decide(table, plan or {})  # at T, first: its errors are T's
    if not tuned or len(at) < 2:
        return parts, {}
    found = {h.label: claim.decide(h.runs, h.plan) for h in at[:-1]}
    return parts, {**found, at[-1].label: parts}


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
    at = horizons(runs, plan) if len(runs) else []
    rows = []
    for claim in CLAIMS:
        firmness = headline = ""
        try:
            if claim.table not in given:
                parts, ours = [], f"no {claim.table} benchmark table"
            else:
                parts, by_horizon = _decide_at(claim, given[claim.table], plan, at)
                shown = {
                    p.name: _shown({
                        label: next((q.verdict for q in found if q.name == p.name), NO_DATA)
                        for label, found in by_horizon.items()
                    }) if by_horizon else p.verdict
                    for p in parts
                }  # fmt: skip
                ours = "; ".join(f"{p.name}: {p.text}: {shown[p.name]}" for p in parts)
                ours = ours or ("no runs yet" if claim.table == RUNS else "no rows")
                firmness = _firmness({k: verdict_of(v) for k, v in by_horizon.items()})
                headline = _headline(claim, parts)
            verdict, rule = verdict_of(parts), claim.rule
        except MixedNumerics as mixed:
            ours, rule, verdict = str(mixed), "none: records not comparable", MIXED_NUMERICS
        rows.append({
            "claim": claim.name,
            "statement": claim.statement,
            "paper": _paper(reference, claim),
            "ours": ours,
            "rule": rule,
            "verdict": verdict,
            "firmness": firmness,
            "headline": headline,
            "paper_number": _paper_number(reference, claim),
        })  # fmt: skip
    return pd.DataFrame(rows, columns=CLAIM_COLUMNS)


def markdown(table: pd.DataFrame) -> str:
    """The claims table as a markdown table (``|`` in cells escaped): the claim as we test
    it, the paper's words and numbers, ours, the rule and the verdict."""
    header = ["claim", "paper", "ours", "rule", "verdict"]
    rows = [
        [row["statement"], row["paper"], row["ours"], row["rule"], _verdict_cell(row)]
        for _, row in table.iterrows()
    ]
    return _pipe_table(header, rows)


def headlines(table: pd.DataFrame) -> str:
    """The claims table as one short line per claim (README's): the claim, our headline
    number with its interval, the paper's number, and the verdict with its firmness."""
    header = ["claim", "ours (the headline part; parts reproduced)", "paper", "verdict"]
    rows = [
        [row["statement"], row["headline"] or "-", row["paper_number"] or "-", _verdict_cell(row)]
        for _, row in table.iterrows()
    ]
    return _pipe_table(header, rows)


def _verdict_cell(row: pd.Series) -> str:
    firmness = row.get("firmness")
    firm = f", {firmness}" if isinstance(firmness, str) and firmness else ""
    return f"**{row['verdict']}**{firm}"


def _pipe_table(header: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for cells in rows:
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"
