"""How often each claim's rule says "reproduced", or "not reproduced", when the claim sits
exactly at its boundary, and how often "reproduced" at the observed effect: the rules' two
error rates and their power, measured from a study's own records.

* **At the boundary** (`permuted`): within each study and workload, the runs' outcomes (every
  measured column of the runs table, kept together per run) are shuffled among its rows, so
  no condition differs from another but by chance, while the study's design (which
  conditions, searches and seeds exist), its noise and its unreached runs stay. Each claim is
  decided on ``permutations`` such tables; a claim part's false-positive rate is the share
  that read "reproduced", its false "not reproduced" rate the share that read "not
  reproduced". Every part of a claim sits at its boundary at once, so the claim's own row
  (``all``) measures its combined verdict where each part could tip it.
* **At the observed effect** (`resampled`): within each study and workload, searches (tuned
  studies; the ``repetition``) or seeds are drawn with replacement, the same draw for every
  condition, so paired designs stay paired; a part's power is the share of ``resamples`` such
  tables that read "reproduced".

Both use the claims' own code (`analysis.claims.CLAIMS`), so they measure the rules as they
decide. The permutation null is "no effect": the right null for a claim that something is
*fewer* or *faster*. For a claim that something is *no worse* or *never below* a bound, no
effect makes the claim true, so a "reproduced" there would be the rule's power at no effect,
not a false positive; such a claim's null is the null table moved to the claim's boundary
(its ``Claim.boundary``: e.g. echoing needing the resolution more than the baseline / e),
where "reproduced" is wrong (`boundary_nulls`).

A claim on a benchmark's table (`analysis.claims.Claim.table`) is calibrated on that table:
its ``Claim.null`` shuffles each repeat's values among the cases it compares (moved to its
boundary where it has one), its ``Claim.resample`` draws the benchmark's repeats with
replacement (`analysis.claims.benchmark`).

`calibrate` returns one row per claim and part (and one per claim for the combined verdict),
with each rate's 95% Clopper-Pearson upper bound; `GOAL` is the largest rate of either error
a claim or claim part may have.

    python -m analysis calibrate --runs results/protocol/runs.csv \
        --configfile config/protocol.yaml --permutations 200 --out calibration.csv
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping

import numpy as np
import pandas as pd
from scipy.stats import beta

from analysis.claims.study import Plan
from analysis.records import RUN_COLUMNS

__all__ = [
    "ALL",
    "CALIBRATION_COLUMNS",
    "DECIDABILITY_COLUMNS",
    "GOAL",
    "OUTCOME_COLUMNS",
    "POWERFUL",
    "boundary_nulls",
    "calibrate",
    "decidability",
    "permuted",
    "resampled",
]

GOAL = 0.05
"""The largest share of boundary tables on which a claim or claim part may read "reproduced",
and the largest share on which it may read "not reproduced"."""

OUTCOME_COLUMNS = RUN_COLUMNS[RUN_COLUMNS.index("reached") : RUN_COLUMNS.index("total_s") + 1]
"""What a run measured (the runs table's columns from ``reached`` to ``total_s``): what the
null shuffles, one run's values together."""

CALIBRATION_COLUMNS = [
    "claim", "part", "verdict", "null_tables", "null_reproduced", "false_positive_rate",
    "fpr_high", "null_not_reproduced", "false_refutation_rate", "frr_high", "meets_goal",
    "resamples", "resampled_reproduced", "power",
]  # fmt: skip
"""Columns of `calibrate`'s table: per claim and part (by name; `ALL`: the claim's combined
verdict), the verdict on the real records, the null tables (at the claim's boundary) and how
many read "reproduced", that rate and its 95% upper bound (Clopper-Pearson), how many read
"not reproduced", that rate (false refutation) and its upper bound, whether both rates are at
most `GOAL`, and the resampled tables, how many read "reproduced", and that share (the
power)."""

_GROUP = ["study", "workload"]

ALL = "all"
"""The ``part`` of a claim's row for its combined verdict."""


def _groups(runs: pd.DataFrame) -> Iterator[np.ndarray]:
    yield from runs.groupby(_GROUP, sort=False).indices.values()


def permuted(runs: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    """``runs`` with its outcome columns shuffled among the rows of each study and workload.

    Args:
        runs: The runs table (`analysis.records`).
        rng: The generator that draws the permutations.

    Returns:
        A copy: identities as they were, each row carrying another row's outcomes.
    """
    out = runs.copy()
    columns = [out.columns.get_loc(c) for c in OUTCOME_COLUMNS if c in out]
    values = runs.iloc[:, columns].to_numpy()
    for index in _groups(runs):
        out.iloc[index, columns] = values[rng.permutation(index)]
    return out


def _unit(rows: pd.DataFrame) -> str:
    """What a study repeats: its searches, or its seeds."""
    return "repetition" if rows["trial"].notna().any() else "seed"


def resampled(runs: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    """``runs`` with each study and workload's searches (or seeds) drawn with replacement,
    one draw for all its conditions, relabelled ``0..n-1`` so each draw is its own search.

    Args:
        runs: The runs table.
        rng: The generator that draws the units.

    Returns:
        A new table of the same size per study and workload.
    """
    parts = []
    for index in _groups(runs):
        rows = runs.iloc[index]
        unit = _unit(rows)
        units = np.sort(rows[unit].dropna().unique())
        drawn = rng.choice(units, size=len(units), replace=True)
        for label, value in enumerate(drawn):
            chosen = rows[rows[unit] == value].copy()
            chosen[unit] = label
            chosen["record"] = chosen["record"].astype(str) + f"#{label}"
            parts.append(chosen)
    return pd.concat(parts, ignore_index=True) if parts else runs.iloc[:0]


Decide = Callable[[pd.DataFrame], dict[str, dict[str, str | tuple[str, float]]]]
"""A runs table -> claim name -> part name -> its verdict, or its verdict and its p-value
against the claim (`analysis.claims.Part.p_against`; a bare "not reproduced" counts as
refuted at any level)."""

Null = Callable[[pd.DataFrame, np.random.Generator], pd.DataFrame]
"""A runs table -> a table drawn under a claim's null (default: `permuted`)."""


def boundary_nulls() -> dict[str, Null]:
    """The null of each claim with a boundary (`analysis.claims.Claim.boundary`): a
    `permuted` table moved to the claim's boundary."""
    from analysis.claims import CLAIMS

    return {
        claim.name: (lambda runs, rng, move=claim.boundary: move(permuted(runs, rng)))
        for claim in CLAIMS
        if claim.boundary is not None
    }


def _decide_all(plan: Plan | None, table: str = "runs", names: set[str] | None = None) -> Decide:
    """The registered claims on ``table`` (the runs table, or a benchmark's), those of
    ``names`` only where given, as a `Decide`."""
    from analysis.claims import CLAIMS, decide

    def decide_all(rows: pd.DataFrame) -> dict[str, dict[str, str | tuple[str, float]]]:
        return {
            claim.name: {
                part.name: (part.verdict, part.p_against) for part in decide(claim, rows, plan)[1]
            }
            for claim in CLAIMS
            if claim.table == table and (names is None or claim.name in names)
        }

    return decide_all


def _verdicts(parts: dict[str, str | tuple[str, float]]) -> tuple[dict[str, str], str]:
    """Each part's verdict, and the claim's (`analysis.claims.rules.combine`)."""
    from analysis.claims import NOT_REPRODUCED, combine

    pairs = {
        name: (found, 0.0 if found == NOT_REPRODUCED else 1.0) if isinstance(found, str) else found
        for name, found in parts.items()
    }
    verdicts = {name: verdict for name, (verdict, _) in pairs.items()}
    return verdicts, combine(list(verdicts.values()), [p for _, p in pairs.values()])


def _upper(hits: int, n: int, level: float = 0.95) -> float:
    """The Clopper-Pearson upper bound of a rate of ``hits`` in ``n``."""
    return 1.0 if hits >= n else float(beta.ppf(1 - (1 - level) / 2, hits + 1, n - hits))


def calibrate(
    runs: pd.DataFrame,
    plan: Plan | None = None,
    permutations: int = 200,
    resamples: int = 200,
    seed: int = 0,
    decide: Decide | None = None,
    progress: Callable[[str], None] | None = None,
    nulls: dict[str, Null] | None = None,
    tables: Mapping[str, pd.DataFrame] | None = None,
) -> pd.DataFrame:
    """Each claim part's false-positive rate under the null and its power at the observed
    effect.

    Args:
        runs: The runs table of the study the claims read.
        plan: What the study's config plans (`analysis.claims.study.Plan`).
        permutations: Null tables (`permuted`), >= 1. Default 200.
        resamples: Resampled tables (`resampled`), >= 0. Default 200.
        seed: Seeds both draws. Default 0.
        decide: The rules to calibrate: runs table -> claim -> part verdicts. Default: the
            claims of `analysis.claims`.
        progress: Called with a line now and then (e.g. ``print``). Default: silent.
        nulls: Claim name -> how to draw its null table, for the claims whose null is not
            `permuted`; each such claim is decided on tables of its own. Default: with the
            default ``decide``, `boundary_nulls`; else none.
        tables: Benchmark tables by name, for the registered claims on benchmarks (with the
            default ``decide``): each is decided on ``permutations`` tables drawn by its
            ``Claim.null`` and ``resamples`` drawn by its ``Claim.resample``. Default None.

    Returns:
        One row per claim and part, then per claim (``part`` ``all``), with
        `CALIBRATION_COLUMNS`.

    Raises:
        ValueError: ``permutations`` < 1 or ``resamples`` < 0.
    """
    from analysis.claims import NOT_REPRODUCED, REPRODUCED

    if permutations < 1 or resamples < 0:
        raise ValueError(
            f"need permutations >= 1 and resamples >= 0, got {permutations} and {resamples}"
        )
    benchmarks = []  # (claim, its table) for the claims on benchmarks' tables given

    def rules(names: set[str]) -> Decide:
        return decide  # a given decide: decided whole, ``names`` picked from what it says

    if decide is None:
        from analysis.claims import CLAIMS

        decide, nulls = _decide_all(plan), boundary_nulls() if nulls is None else nulls
        given = tables or {}
        benchmarks = [(c, given[c.table]) for c in CLAIMS if c.table in given]

        def rules(names: set[str]) -> Decide:  # only the claims a table is drawn for
            return _decide_all(plan, names=names)

    real = decide(runs)
    for claim, table in benchmarks:
        real.update(_decide_all(plan, claim.table)(table))
    rng = np.random.default_rng(seed)

    nulls = nulls or {}

    def tally(
        count: int,
        draw: Callable[[], pd.DataFrame],
        what: str,
        only: set[str] | None = None,
        decide: Decide = decide,
    ) -> dict[tuple, Counter]:
        hits: dict[tuple, Counter] = {}
        for done in range(count):
            found = decide(draw())
            for claim, parts in found.items():
                if only is not None and claim not in only:
                    continue
                verdicts, whole = _verdicts(parts)
                for name, verdict in [*verdicts.items(), (ALL, whole if parts else None)]:
                    hits.setdefault((claim, name), Counter())[verdict] += 1
            if progress and (done + 1) % max(1, count // 10) == 0:
                progress(f"{what}: {done + 1} of {count} tables")
        return hits

    plain = set(real) - set(nulls) - {claim.name for claim, _ in benchmarks}
    null = tally(permutations, lambda: permuted(runs, rng), "null", plain, rules(plain))
    for claim, draw in nulls.items():
        null.update(
            tally(
                permutations,
                lambda d=draw: d(runs, rng),
                f"null of {claim}",
                {claim},
                rules({claim}),
            )
        )
    on_runs = set(real) - {claim.name for claim, _ in benchmarks}
    power = (
        tally(resamples, lambda: resampled(runs, rng), "resampled", on_runs, rules(on_runs))
        if resamples
        else {}
    )
    for claim, table in benchmarks:
        only = {claim.name}
        mine = _decide_all(plan, claim.table, only)
        null.update(
            tally(permutations, lambda c=claim, t=table: c.null(t, rng), claim.name, only, mine)
        )
        if resamples:
            power.update(
                tally(
                    resamples, lambda c=claim, t=table: c.resample(t, rng), claim.name, only, mine
                )
            )
    rows = []
    for claim, parts in real.items():
        verdicts, whole = _verdicts(parts)
        for label in [*parts, ALL]:
            verdict = whole if label == ALL else verdicts[label]
            tally = null.get((claim, label), Counter())
            hits, refuted = tally[REPRODUCED], tally[NOT_REPRODUCED]
            found = power.get((claim, label), Counter())[REPRODUCED]
            rows.append({
                "claim": claim,
                "part": label,
                "verdict": verdict,
                "null_tables": permutations,
                "null_reproduced": hits,
                "false_positive_rate": hits / permutations,
                "fpr_high": _upper(hits, permutations),
                "null_not_reproduced": refuted,
                "false_refutation_rate": refuted / permutations,
                "frr_high": _upper(refuted, permutations),
                "meets_goal": max(hits, refuted) / permutations <= GOAL,
                "resamples": resamples,
                "resampled_reproduced": found,
                "power": found / resamples if resamples else float("nan"),
            })  # fmt: skip
    return pd.DataFrame(rows, columns=CALIBRATION_COLUMNS)


def _highest(rows: pd.DataFrame, column: str) -> float:
    return float(rows[column].max()) if column in rows else 0.0


POWERFUL = 0.8
"""The power (`calibrate`'s ``power``) at which a part left "not resolved" counts as one our
scale could decide at the effect observed, had the data been a little kinder."""

DECIDABILITY_COLUMNS = [
    "claim", "verdict", "parts", "decided", "too_weak", "no_data", "highest_fpr", "highest_frr",
]  # fmt: skip
"""Columns of `decidability`: per claim, its combined verdict, its parts, how many read
"reproduced" or "not reproduced" (decided), how many "not resolved" with power under
`POWERFUL` (too weak: our scale cannot decide them at the effect observed), how many have no
data yet, and the highest false-positive and false-refutation rates of its parts and of the
claim itself."""


def decidability(table: pd.DataFrame) -> pd.DataFrame:
    """What a study's scale can decide, per claim, from `calibrate`'s table.

    Args:
        table: `calibrate`'s table (``CALIBRATION_COLUMNS``).

    Returns:
        One row per claim (``DECIDABILITY_COLUMNS``), in the table's order. A part left "not
        resolved" with power at least `POWERFUL` counts in neither ``decided`` nor
        ``too_weak``: its data were against it, not its scale.
    """
    from analysis.claims import NO_DATA, NOT_REPRODUCED, NOT_RESOLVED, REPRODUCED

    rows = []
    for claim, rows_of in table.groupby("claim", sort=False):
        parts = rows_of[rows_of["part"] != ALL]
        whole = rows_of.loc[rows_of["part"] == ALL, "verdict"]
        weak = (parts["verdict"] == NOT_RESOLVED) & ~(parts["power"].fillna(0) >= POWERFUL)
        rows.append({
            "claim": claim,
            "verdict": whole.iloc[0] if len(whole) else NO_DATA,
            "parts": len(parts),
            "decided": int(parts["verdict"].isin([REPRODUCED, NOT_REPRODUCED]).sum()),
            "too_weak": int(weak.sum()),
            "no_data": int((parts["verdict"] == NO_DATA).sum()),
            "highest_fpr": float(rows_of["false_positive_rate"].max()) if len(parts) else 0.0,
            "highest_frr": _highest(rows_of, "false_refutation_rate") if len(parts) else 0.0,
        })  # fmt: skip
    return pd.DataFrame(rows, columns=DECIDABILITY_COLUMNS)
