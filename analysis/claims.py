"""The papers' claims decided by code: one row per claim, its numbers and a verdict by a rule.

Each claim compares groups of values: per tuned search, its best trial (the protocol study's
insertion and echo-factor studies, `analysis.protocol.best_of_searches`; only searches whose
trials have all landed), or per seed (the studies with fixed hyper-parameters). Two rules
decide a comparison, both stated here and in README ("Results"):

* `by_ranges`, for tuned searches (the paper's own error bars: min and max over repeated
  searches). For the claim ``x < y`` (fewer): **reproduced** when every search of ``x`` lies
  below every search of ``y`` by at least the resolution ``delta`` (``max(x) + delta <=
  min(y)``); **not reproduced** when the medians do not favour it (``median(x) + delta >
  median(y)``); otherwise **not resolved** (the medians favour it, the ranges overlap). For
  ``x <= y`` (no more than): reproduced when ``max(x) <= min(y) + delta``, not reproduced
  when the ranges are separated the other way (``min(x) >= max(y) + delta``), else not
  resolved.
* `by_bootstrap`, for seeds: a 95% percentile bootstrap interval (10,000 resamples of each
  group, seeded) of ``median(x) / median(y)`` (or of the difference, for a metric). For
  ``x < y``: reproduced when the interval lies below 1, not reproduced when the point
  estimate is at or above 1, else not resolved; for ``x <= y`` with tolerance ``delta``:
  reproduced when the interval lies at or below ``1 + delta`` (difference: ``delta``), not
  reproduced when it lies above, else not resolved.

A claim over several workloads or conditions is reproduced when every part is, not
reproduced when any part is not, and not resolved otherwise; a claim whose runs are missing
is **no data** (the study has not produced them yet). The resolution ``delta`` of fresh
examples is the spacing of the refined crossing (``refine_every_fresh``) where runs have one,
else the evaluation interval.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.protocol import best_of_searches, crossing_step

__all__ = [
    "CLAIMS",
    "CLAIM_COLUMNS",
    "MIXED_NUMERICS",
    "NOT_REPRODUCED",
    "NOT_RESOLVED",
    "NO_DATA",
    "REPRODUCED",
    "VERDICTS",
    "by_bootstrap",
    "by_ranges",
    "claims_table",
    "combine",
    "markdown",
]

REPRODUCED, NOT_REPRODUCED, NOT_RESOLVED, NO_DATA = (
    "reproduced",
    "not reproduced",
    "not resolved",
    "no data",
)
MIXED_NUMERICS = "mixed numerics"
"""The verdict of a claim whose study pools records computed in different numerics modes or
library versions (`run_contract.numerics.record_numerics`): nothing is decided from them."""
VERDICTS = (REPRODUCED, NOT_REPRODUCED, NOT_RESOLVED, NO_DATA, MIXED_NUMERICS)
"""Every verdict a claim can get."""

CLAIM_COLUMNS = ["claim", "statement", "paper", "ours", "rule", "verdict"]
"""Columns of the claims table, in order."""

_RESAMPLES, _LEVEL = 10_000, 0.95


def _values(values: Sequence[float]) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    return array[np.isfinite(array)]


def by_ranges(x: Sequence[float], y: Sequence[float], delta: float, *, strict: bool) -> str:
    """The verdict on ``x < y`` (``strict``) or ``x <= y`` from the min-max ranges.

    Args:
        x: One value per search (e.g. its best trial's fresh examples to target).
        y: The same for the condition compared against.
        delta: The resolution (>= 0) in the values' units.
        strict: ``x < y`` (True) or ``x <= y``.

    Returns:
        One of `VERDICTS` (`NO_DATA` when either side has no finite value).
    """
    x, y = _values(x), _values(y)
    if not len(x) or not len(y):
        return NO_DATA
    if strict:
        if x.max() + delta <= y.min():
            return REPRODUCED
        return NOT_REPRODUCED if np.median(x) + delta > np.median(y) else NOT_RESOLVED
    if x.max() <= y.min() + delta:
        return REPRODUCED
    return NOT_REPRODUCED if x.min() >= y.max() + delta else NOT_RESOLVED


def _bootstrap(x: np.ndarray, y: np.ndarray, statistic: Callable, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    xs = rng.choice(x, size=(_RESAMPLES, len(x)))
    ys = rng.choice(y, size=(_RESAMPLES, len(y)))
    values = statistic(np.median(xs, axis=1), np.median(ys, axis=1))
    tail = (1 - _LEVEL) / 2 * 100
    return np.percentile(values, [tail, 100 - tail])


def by_bootstrap(
    x: Sequence[float],
    y: Sequence[float],
    *,
    strict: bool,
    delta: float = 0.0,
    difference: bool = False,
    seed: int = 0,
) -> tuple[str, tuple[float, float] | None]:
    """The verdict on ``x < y`` (``strict``) or ``x <= y`` from a bootstrap interval.

    Args:
        x: One value per seed.
        y: The same for the condition compared against.
        strict: ``x < y`` (True) or ``x <= y`` within ``delta``.
        delta: Tolerance of ``x <= y``: relative (ratio) or absolute (``difference``).
        difference: Bootstrap ``median(x) - median(y)`` (compared with 0) instead of the
            ratio (compared with 1). Default False.
        seed: The resampling seed. Default 0.

    Returns:
        The verdict and the interval (None with `NO_DATA`).
    """
    x, y = _values(x), _values(y)
    if not len(x) or not len(y) or (not difference and (y <= 0).any()):
        return NO_DATA, None
    statistic = np.subtract if difference else np.divide
    low, high = _bootstrap(x, y, statistic, seed)
    bound = (0.0 if difference else 1.0) + (0.0 if strict else delta)
    if strict:
        if high < bound:
            return REPRODUCED, (low, high)
        estimate = statistic(np.median(x), np.median(y))
        return (NOT_REPRODUCED if estimate >= bound else NOT_RESOLVED), (low, high)
    if high <= bound:
        return REPRODUCED, (low, high)
    return (NOT_REPRODUCED if low > bound else NOT_RESOLVED), (low, high)


def combine(verdicts: Sequence[str]) -> str:
    """All parts reproduced: reproduced; any not reproduced: not reproduced; no parts or
    every part without data: no data; otherwise not resolved."""
    known = [v for v in verdicts if v != NO_DATA]
    if not known:
        return NO_DATA
    if NOT_REPRODUCED in known:
        return NOT_REPRODUCED
    if all(v == REPRODUCED for v in known) and len(known) == len(verdicts):
        return REPRODUCED
    return NOT_RESOLVED


# --- the runs behind each claim ----------------------------------------------------------


def _fmt(values: np.ndarray, scale: float = 1.0) -> str:
    values = np.sort(_values(values)) / scale
    if not len(values):
        return "none reached"
    median = float(np.median(values))
    return f"{median:.2f} ({values.min():.2f}-{values.max():.2f})"


Planned = dict[str, list[str]]
"""Study -> the workloads its config plans (`claims_table`'s ``planned``)."""


class _MixedNumerics(ValueError):
    """A study's records were computed in more than one numerics mode or library version."""


class _Runs:
    """The runs of one study, each search reduced to its best trial."""

    def __init__(self, runs: pd.DataFrame, study: str, planned: Planned):
        self.study = study
        # the workloads the config plans: one missing from the records is a part without
        # data, not a part left out
        self.planned = planned.get(study, [])
        rows = runs[runs["study"] == study]
        kinds = rows["numerics"].value_counts() if "numerics" in rows else ()
        if len(kinds) > 1:
            counts = ", ".join(f"{count} {kind}" for kind, count in kinds.items())
            raise _MixedNumerics(
                f"study {study} pools records of different numerics ({counts}): retrain them "
                "in one mode (run_contract.numerics)"
            )
        self.tuned = bool(len(rows)) and rows["trial"].notna().any()
        self.rows = best_of_searches(rows) if len(rows) else rows  # complete searches only

    def select(self, workload: str, **fields: object) -> pd.DataFrame:
        rows = self.rows[self.rows["workload"] == workload]
        for name, value in fields.items():
            rows = rows[rows[name].isna()] if value is None else rows[rows[name] == value]
        return rows

    def fresh(self, rows: pd.DataFrame, column: str = "fresh_examples_to_target") -> np.ndarray:
        """One value per search or seed; a search or seed that missed the target is +inf
        (worse than any value) so that it counts against the condition."""
        values = rows[column].to_numpy(float)
        return np.where(rows["reached"].astype(bool), values, math.inf)

    def delta(self, rows: pd.DataFrame) -> float:
        """The resolution of fresh examples to target of ``rows``."""
        return crossing_step(rows)

    def workloads(self) -> list[str]:
        landed = set(self.rows["workload"].unique()) if len(self.rows) else set()
        return sorted(landed | set(self.planned if landed else []))

    @property
    def rule(self) -> str:
        """The rule deciding this study's comparisons."""
        return "ranges over searches" if self.tuned else "bootstrap over seeds"


def _reached_median(values: np.ndarray, default: float = 1.0) -> float:
    """The median of the reached (finite) values; ``default`` when none reached."""
    reached = values[np.isfinite(values)]
    return float(np.median(reached)) if len(reached) else default


_UNREACHED = 1e300
"""A search that missed the target sits above every reached value (it counts against its
condition) while staying finite for `by_ranges`."""


def _compare(study: _Runs, x: np.ndarray, y: np.ndarray, delta: float, *, strict: bool) -> str:
    """The verdict on ``x < y`` / ``x <= y`` of one study's values, by its rule."""
    if study.tuned:
        x, y = np.minimum(x, _UNREACHED), np.minimum(y, _UNREACHED)
        return by_ranges(x, y, delta, strict=strict)
    verdict, _ = by_bootstrap(x[np.isfinite(x)], y[np.isfinite(y)], strict=strict)
    return verdict


def _baseline(study: _Runs, workload: str, batch_size: object = None) -> pd.DataFrame:
    rows = study.select(workload, echo_point="none")
    return rows if batch_size is None else rows[rows["batch_size"] == batch_size]


def _fewer_at_e2(runs: pd.DataFrame, planned: Planned) -> tuple[list[str], list[str], str]:
    study = _Runs(runs, "insertion", planned)
    verdicts, parts = [], []
    for workload in study.workloads():
        base = _baseline(study, workload)
        echo = study.select(workload, echo_point="before_augment", echo_factor=2.0)
        b, e = study.fresh(base), study.fresh(echo)
        verdict = _compare(study, e, b, study.delta(base), strict=True)
        scale = _reached_median(b)
        parts.append(f"{workload} {_fmt(e, scale)}: {verdict}")
        verdicts.append(verdict)
    return verdicts, parts, study.rule


def _never_below(runs: pd.DataFrame, planned: Planned) -> tuple[list[str], list[str], str]:
    verdicts, parts, seen = [], [], set()
    for name in ("insertion", "echo_factor"):
        study = _Runs(runs, name, planned)
        for workload in study.workloads():
            base = _baseline(study, workload)
            b = study.fresh(base)
            echoes = study.rows[
                (study.rows["workload"] == workload) & (study.rows["echo_point"] != "none")
            ]
            for (point, factor), echo in echoes.groupby(["echo_point", "echo_factor"]):
                if (workload, point, factor) in seen:  # a condition two studies share
                    continue
                seen.add((workload, point, factor))
                e = study.fresh(echo)
                # never below the ideal: b / factor <= e (within the resolution)
                verdict = _compare(study, b / factor, e, study.delta(base), strict=False)
                if verdict != REPRODUCED:
                    scale = _reached_median(b)
                    parts.append(
                        f"{workload} {point} e={factor:g}: {_fmt(e, scale)} vs 1/e = "
                        f"{1 / factor:.2f}: {verdict}"
                    )
                verdicts.append(verdict)
    if verdicts and all(v == REPRODUCED for v in verdicts):
        parts.append(f"all {len(verdicts)} tuned conditions at or above 1/e within resolution")
    return verdicts, parts, _Runs(runs, "insertion", planned).rule


def _insertion_order(runs: pd.DataFrame, planned: Planned) -> tuple[list[str], list[str], str]:
    study = _Runs(runs, "insertion", planned)
    verdicts, parts = [], []
    order = ["before_augment", "after_augment", "after_batch"]
    for workload in study.workloads():
        points = [p for p in order if len(study.select(workload, echo_point=p, echo_factor=2.0))]
        base = study.fresh(_baseline(study, workload))
        scale = _reached_median(base)
        delta = study.delta(_baseline(study, workload))
        values = {
            p: study.fresh(study.select(workload, echo_point=p, echo_factor=2.0)) for p in points
        }
        for better, worse in itertools.pairwise(points):
            verdict = _compare(study, values[better], values[worse], delta, strict=False)
            parts.append(
                f"{workload} {better} {_fmt(values[better], scale)} <= {worse} "
                f"{_fmt(values[worse], scale)}: {verdict}"
            )
            verdicts.append(verdict)
    return verdicts, parts, study.rule


def _shuffle_buffer(runs: pd.DataFrame, planned: Planned) -> tuple[list[str], list[str], str]:
    study = _Runs(runs, "shuffle_buffer", planned)
    verdicts, parts = [], []
    for workload in study.workloads():
        for point in ("after_augment", "after_batch"):
            rows = study.select(workload, echo_point=point)
            buffers = sorted(rows["shuffle_buffer"].unique())
            if len(buffers) < 2:
                continue
            small = study.fresh(rows[rows["shuffle_buffer"] == buffers[0]])
            large = study.fresh(rows[rows["shuffle_buffer"] == buffers[-1]])
            verdict = _compare(study, large, small, study.delta(rows), strict=True)
            parts.append(
                f"{workload} {point}: buffer {buffers[-1]} median {np.median(large):,.0f} vs "
                f"{buffers[0]} {np.median(small):,.0f} fresh: {verdict}"
            )
            verdicts.append(verdict)
    return verdicts, parts, study.rule


def _factor_peak(runs: pd.DataFrame, planned: Planned) -> tuple[list[str], list[str], str]:
    study = _Runs(runs, "echo_factor", planned)
    verdicts, parts = [], []
    for workload in study.workloads():
        base = _baseline(study, workload)
        b, delta = study.fresh(base), study.delta(base)
        scale = _reached_median(b)
        for point in ("before_augment", "after_augment"):
            e8 = study.fresh(study.select(workload, echo_point=point, echo_factor=8.0))
            e16 = study.fresh(study.select(workload, echo_point=point, echo_factor=16.0))
            if not len(e8) or not len(e16):
                continue
            beats = _compare(study, e16, b, delta, strict=True)
            flattens = _compare(study, e8 / 2, e16, delta, strict=True)
            verdict = combine([beats, flattens])
            parts.append(
                f"{workload} {point}: e=8 {_fmt(e8, scale)}, e=16 {_fmt(e16, scale)} "
                f"(beats baseline: {beats}; short of the ideal halving from 8 to 16: "
                f"{flattens})"
            )
            verdicts.append(verdict)
    return verdicts, parts, study.rule


def _batch_size(runs: pd.DataFrame, planned: Planned) -> tuple[list[str], list[str], str]:
    study = _Runs(runs, "batch_size", planned)
    verdicts, parts = [], []
    for workload in study.workloads():
        rows = study.select(workload, echo_point="after_batch")
        sizes = sorted(rows["batch_size"].unique())
        if len(sizes) < 2:
            continue
        relative = {}
        for size in (sizes[0], sizes[-1]):
            base = study.fresh(_baseline(study, workload, size))
            median = _reached_median(base, math.nan)
            relative[size] = study.fresh(rows[rows["batch_size"] == size]) / median
        verdict = _compare(study, relative[sizes[-1]], relative[sizes[0]], 0.0, strict=True)
        parts.append(
            f"{workload} batch echoing: batch {sizes[0]} {_fmt(relative[sizes[0]])}, batch "
            f"{sizes[-1]} {_fmt(relative[sizes[-1]])} of its baseline: {verdict}"
        )
        verdicts.append(verdict)
    return verdicts, parts, study.rule


def _no_harm(runs: pd.DataFrame, planned: Planned) -> tuple[list[str], list[str], str]:
    study = _Runs(runs, "no_harm", planned)
    verdicts, parts = [], []
    for workload in study.workloads():
        base = _baseline(study, workload)
        sign = 1.0 if (base["target_direction"] == "min").all() else -1.0
        tolerance = 0.01 * abs(float(base["target_value"].iloc[0])) if len(base) else 0.0
        for point in ("after_batch", "before_augment", "after_augment"):
            echo = study.select(workload, echo_point=point)
            if not len(echo) or not len(base):
                continue
            x = sign * echo["best_metric"].to_numpy(float)
            y = sign * base["best_metric"].to_numpy(float)
            verdict, _interval = by_bootstrap(x, y, strict=False, delta=tolerance, difference=True)
            parts.append(
                f"{workload} {point}: best {base['target_metric'].iloc[0]} "
                f"{np.median(echo['best_metric']):.3f} vs baseline "
                f"{np.median(base['best_metric']):.3f}: {verdict}"
            )
            verdicts.append(verdict)
    return verdicts, parts, "bootstrap over seeds (difference, tolerance 1% of the target)"


def _wall_time(runs: pd.DataFrame, planned: Planned) -> tuple[list[str], list[str], str]:
    study = _Runs(runs, "wall_time", planned)
    verdicts, parts = [], []
    for workload in study.workloads():
        baseline = _baseline(study, workload)
        base = study.fresh(baseline, "wall_s_to_target")
        r = float(baseline["R"].median())  # the baseline's: upstream over step time
        rows = study.rows[
            (study.rows["workload"] == workload) & (study.rows["echo_point"] == "before_augment")
        ]
        for (point, factor), echo in rows.groupby(["echo_point", "echo_factor"]):
            wall = study.fresh(echo, "wall_s_to_target")
            verdict = _compare(study, wall, base, 0.0, strict=True)
            finite = wall[np.isfinite(wall)]
            reached = base[np.isfinite(base)]
            speedup = np.median(reached) / np.median(finite) if len(finite) else np.nan
            parts.append(f"{workload} {point} e={factor:g} (R {r:.1f}): {speedup:.2f}x: {verdict}")
            verdicts.append(verdict)
    return verdicts, parts, study.rule


@dataclass(frozen=True)
class Claim:
    """One of the papers' claims: its identifier (the ``quantity`` of its row in the
    reference table), what it says, and how our runs decide it."""

    name: str
    statement: str
    decide: Callable[[pd.DataFrame, Planned], tuple[list[str], list[str], str]]
    also: tuple[str, ...] = ()
    """Other rows of the reference table (by ``quantity``) quoted beside the claim."""


CLAIMS: tuple[Claim, ...] = (
    Claim(
        "claim_fewer_fresh_at_e2",
        "Echoing at e = 2 (before augmentation) reaches the target with fewer fresh examples "
        "than the baseline, for every workload",
        _fewer_at_e2,
    ),
    Claim(
        "claim_never_below_1_over_e",
        "Fresh examples to target never fall below the baseline's / e",
        _never_below,
    ),
    Claim(
        "claim_insertion_order",
        "Echoing before augmentation needs at most as many fresh examples as after "
        "augmentation, which needs at most as many as batch echoing",
        _insertion_order,
        also=("claim_resnet50_batch_echo_no_gain",),
    ),
    Claim(
        "claim_shuffle_buffer_helps",
        "A larger shuffle buffer after the echo stage reduces fresh examples to target",
        _shuffle_buffer,
    ),
    Claim(
        "claim_factor_peak",
        "Gains flatten or peak at a moderate e, yet e = 16 still beats the baseline",
        _factor_peak,
        also=("claim_lm1b_best_factor_4_to_8",),
    ),
    Claim(
        "claim_batch_echo_gains_with_batch_size",
        "Batch echoing helps more (relative to its baseline) at a larger batch size",
        _batch_size,
    ),
    Claim(
        "claim_no_harm",
        "Echoing does not harm the best quality reached within a budget of fresh examples",
        _no_harm,
    ),
    Claim(
        "claim_wall_time_speedup",
        "With a slow upstream, echoing before augmentation reaches the target in less wall time",
        _wall_time,
        also=("wall_time_speedup", "upstream_to_downstream_ratio"),
    ),
)
"""Every claim the table decides, in order."""


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


def claims_table(
    runs: pd.DataFrame,
    reference: pd.DataFrame | None = None,
    planned: Planned | None = None,
) -> pd.DataFrame:
    """Decide every claim of `CLAIMS` from the runs table.

    Args:
        runs: The runs table (``analysis.records``) of a study config with the studies the
            claims read (insertion, echo_factor, shuffle_buffer, batch_size, no_harm,
            wall_time); a missing study gives `NO_DATA`.
        reference: The papers' table (``analysis.reference.load_reference``): the ``note`` of
            the row whose ``quantity`` is the claim's name is the ``paper`` column. Default
            None.
        planned: Study -> the workloads its config plans. A planned workload without
            complete searches yet is a part of the claim without data (so "every workload"
            is not decided on the ones landed so far). Default None: the records' workloads.

    Returns:
        One row per claim with the columns `CLAIM_COLUMNS`. A claim whose study pools records
        of different numerics (the runs table's ``numerics``) gets `MIXED_NUMERICS`, and its
        ``ours`` counts the records of each.
    """
    rows = []
    for claim in CLAIMS:
        try:
            verdicts, parts, rule = claim.decide(runs, planned or {})
            ours, verdict = "; ".join(parts) if parts else "no runs yet", combine(verdicts)
        except _MixedNumerics as mixed:
            ours, rule, verdict = str(mixed), "none: records not comparable", MIXED_NUMERICS
        rows.append(
            {
                "claim": claim.name,
                "statement": claim.statement,
                "paper": _paper(reference, claim),
                "ours": ours,
                "rule": rule,
                "verdict": verdict,
            }
        )
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
