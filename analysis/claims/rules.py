"""The one family of rules every claim part is decided by: a paired sign test, both ways.

A comparison sets condition ``x`` against condition ``y`` pair by pair: search ``r`` of ``x``
against search ``r`` of ``y`` in a tuned study (every condition searches the same points with
the same seeds), seed ``s`` against seed ``s`` in a study of fixed hyper-parameters. A claim
part says ``x < y + margin``, ``margin`` its boundary on the pair's gap ``x - y``:

* ``margin = 0`` ("fewer", "faster"): the paper's boundary is "no difference"; a gap within
  the resolution ``tie`` of it is a tie;
* ``margin = +delta`` ("at most as many", "no worse", "never below"): ``x`` may exceed ``y``
  by the resolution, not more (``tie = 0``).

A pair **favours** the claim when its gap lies below ``margin - tie``, **disfavours** it when
its gap lies above ``margin + tie``, and is a **tie** otherwise: neither for nor against, it
is shown and dropped, as the sign test drops ties. A run that missed its target is censored:
its value lies somewhere above its cap (a value ``(low, high)`` with ``high`` infinite), so a
pair counts only where every value its runs may have puts it on the same side, and is a tie
where censoring leaves it open (a run given as ``inf`` or nan, cap unknown, is worse than
every run that reached: two such runs tie). With ``n`` untied pairs, ``k`` favouring:

* **reproduced** when the one-sided exact sign test rejects "no better than the margin":
  ``P(Binomial(n, 1/2) >= k) <= ALPHA``;
* **not reproduced** when the same test rejects the opposite, on evidence of its own (the
  pairs beyond the tie band on the other side): ``P(Binomial(n, 1/2) >= n - k) <= ALPHA``;
* **not resolved** otherwise.

At the boundary of its claim (gaps distributed symmetrically about ``margin``, pairs
independent) the rule says "reproduced" with probability at most ``ALPHA``, and "not
reproduced" with probability at most ``ALPHA``, whatever the noise: its two stated error
rates, which `analysis.calibration` measures on each study's own records. A claim of several
parts (`combine`) is reproduced when every part is, and not reproduced when one of its ``m``
parts is refuted at ``ALPHA / m`` (Bonferroni), so that a claim whose every part sits at its
boundary reads "not reproduced" at most ``ALPHA`` of the time too. The price is power: with
``n`` pairs the smallest p is ``2**-n``, so fewer than 5 untied pairs (``MIN_PAIRS``) can
never decide a part at 5%, and 5 pairs must all agree.

Beside the verdict a comparison keeps the pairs' ratios ``x / y``: their median and their
range, which over ``n`` pairs is a distribution-free interval for the median ratio with
coverage ``1 - 2 * 2**-n`` (93.75% at 5 pairs) - the paper's own error bars (min and max over
repeated searches), paired - and, for a pair with a censored run, the bound its ratio lies
within (`Comparison.bounded`). Where the paper gives a number, the claim says whether this
interval holds it (`Comparison.holds`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import binom

__all__ = [
    "ALPHA",
    "MIN_PAIRS",
    "NOT_REPRODUCED",
    "NOT_RESOLVED",
    "NO_DATA",
    "REPRODUCED",
    "Comparison",
    "Values",
    "combine",
    "compare",
    "sign_p",
]

REPRODUCED, NOT_REPRODUCED, NOT_RESOLVED, NO_DATA = (
    "reproduced",
    "not reproduced",
    "not resolved",
    "no data",
)

ALPHA = 0.05
"""The sign test's level: the largest chance of "reproduced", and of "not reproduced", at a
claim's boundary."""

MIN_PAIRS = math.ceil(-math.log2(ALPHA))
"""The fewest untied pairs that can decide a part at `ALPHA` (5: 1/32 <= 0.05 < 1/16)."""

Values = Sequence[float] | np.ndarray | tuple[np.ndarray, np.ndarray]
"""One value per pair (``inf`` or nan: missed, cap unknown), or ``(low, high)`` arrays: each
value lies within its bounds (equal where measured; a run censored at its cap ``c``:
``(c, inf)``)."""


def sign_p(k: int, n: int) -> float:
    """``P(Binomial(n, 1/2) >= k)``: the one-sided sign test's p-value (1 when ``n`` is 0)."""
    return float(binom.sf(k - 1, n, 0.5)) if n else 1.0


def _ratio(low: float, high: float) -> str:
    """A ratio known only within ``[low, high]``: ``<0.45``, ``>1.20`` or ``0.40-0.60``."""
    if not math.isfinite(high):
        return f">{low:.2f}"
    return f"<{high:.2f}" if low <= 0 else f"{low:.2f}-{high:.2f}"


@dataclass(frozen=True)
class Comparison:
    """One claim part decided: ``x < y + margin``, pair by pair.

    Attributes:
        verdict: `REPRODUCED`, `NOT_REPRODUCED`, `NOT_RESOLVED` or `NO_DATA` (no pairs).
        favour: Pairs favouring the claim.
        against: Pairs against it.
        ties: Pairs within the tie band, or left open by censoring.
        p_for: The sign test's p-value for the claim.
        p_against: Its p-value for the opposite.
        ratios: ``x / y`` of the pairs where both reached (sorted).
        reached_x: Runs of ``x`` that reached the target, and ``n_x`` of them in all.
        n_x: Runs of ``x``.
        reached_y: Runs of ``y`` that reached the target.
        n_y: Runs of ``y``.
        bounded: ``(low, high)`` of ``x / y`` for each pair where one run is censored at a
            known cap and the other reached (sorted). Default none.
    """

    verdict: str
    favour: int
    against: int
    ties: int
    p_for: float
    p_against: float
    ratios: tuple[float, ...]
    reached_x: int
    n_x: int
    reached_y: int
    n_y: int
    bounded: tuple[tuple[float, float], ...] = ()

    @property
    def pairs(self) -> int:
        """Untied pairs."""
        return self.favour + self.against

    @property
    def median_ratio(self) -> float:
        """The median of `ratios` (nan without any)."""
        return float(np.median(self.ratios)) if self.ratios else math.nan

    @property
    def interval(self) -> tuple[float, float]:
        """The range of `ratios`: a distribution-free interval for the median ratio (nan
        without any)."""
        return (min(self.ratios), max(self.ratios)) if self.ratios else (math.nan, math.nan)

    @property
    def coverage(self) -> float:
        """The coverage of `interval` for the median ratio: ``1 - 2 * 2**-m`` over ``m``
        ratios (0 for fewer than 2)."""
        m = len(self.ratios)
        return 1 - 2 * 0.5**m if m >= 2 else 0.0

    def holds(self, value: float) -> bool | None:
        """Whether `interval` holds ``value`` (None without an interval)."""
        low, high = self.interval
        return None if math.isnan(low) else bool(low <= value <= high)

    def headline(self, unit: str = "", invert: bool = False) -> str:
        """``0.72 (0.57-0.80)``: the median ratio ``x / y`` and its interval (``invert``: of
        ``y / x``, e.g. a speed-up), then the bounds of the pairs with a censored run."""
        if self.verdict == NO_DATA:
            return "no pairs"
        ratios = sorted(1 / r for r in self.ratios if r) if invert else list(self.ratios)
        ratio = (
            f"{float(np.median(ratios)):.2f}{unit} ({ratios[0]:.2f}-{ratios[-1]:.2f})"
            if ratios
            else "no pair where both reached"
        )
        if self.bounded:
            shown = sorted(
                (1 / high if high else math.inf, 1 / low if low > 0 else math.inf)
                if invert
                else (low, high)
                for low, high in self.bounded
            )
            ratio += f", censored {', '.join(_ratio(low, high) for low, high in shown)}"
        return ratio

    def summary(self, unit: str = "", invert: bool = False) -> str:
        """`headline`, then who reached the target: ``0.72 (0.57-0.80), reached 5/5 vs
        5/5``."""
        if self.verdict == NO_DATA:
            return "no pairs"
        reached = f"reached {self.reached_x}/{self.n_x} vs {self.reached_y}/{self.n_y}"
        return f"{self.headline(unit, invert)}, {reached}"

    def tally(self) -> str:
        """``4 for, 0 against, 1 tied (p 0.062 for, 1.000 against)``: the pairs' sides and
        both p-values."""
        return (
            f"{self.favour} for, {self.against} against, {self.ties} tied "
            f"(p {self.p_for:.3f} for, {self.p_against:.3f} against)"
        )

    def describe(self, unit: str = "", invert: bool = False) -> str:
        """`summary`, then the sign test: ``..., 5 for, 0 against, 0 tied (p 0.031 for,
        1.000 against)``, and why too few untied pairs cannot decide."""
        if self.verdict == NO_DATA:
            return "no pairs"
        few = (
            f"; {self.pairs} untied pairs cannot decide at {ALPHA:g} ({MIN_PAIRS} needed)"
            if self.pairs < MIN_PAIRS
            else ""
        )
        return f"{self.summary(unit, invert)}, {self.tally()}{few}"


def _bounds(values: Values) -> tuple[np.ndarray, np.ndarray]:
    """``values`` as ``(low, high)`` arrays, a missed run of unknown cap at ``(inf, inf)``."""
    if isinstance(values, tuple) and len(values) == 2 and np.ndim(values[0]) == 1:
        low, high = (np.asarray(v, dtype=float) for v in values)
    else:
        low = high = np.asarray(values, dtype=float)
    low = np.where(np.isnan(low), math.inf, low)
    return low, np.where(np.isnan(high), math.inf, high)


def compare(x: Values, y: Values, margin: float = 0.0, tie: float = 0.0) -> Comparison:
    """Decide ``x < y + margin`` from paired values (`ALPHA`, the module's rule).

    Args:
        x: One value per pair (e.g. search ``r``'s best fresh examples to target), or its
            ``(low, high)`` bounds (`Values`).
        y: The same for the condition compared against, in the same order.
        margin: The claim's boundary on ``x - y``: 0 for a claim of "fewer" or "faster",
            ``+delta`` for an "at most" claim (the values' units). Default 0.
        tie: Half the width of the band about ``margin`` in which a pair is a tie (the
            resolution, for a claim of "fewer"), >= 0. Default 0.

    Returns:
        The `Comparison`.

    Raises:
        ValueError: ``x`` and ``y`` differ in length, or ``tie`` < 0.
    """
    x_low, x_high = _bounds(x)
    y_low, y_high = _bounds(y)
    if x_low.shape != y_low.shape:
        raise ValueError(f"x and y must pair up, got {len(x_low)} and {len(y_low)} values")
    if tie < 0:
        raise ValueError(f"tie must be >= 0, got {tie}")
    with np.errstate(invalid="ignore"):
        gap_high = x_high - y_low - margin  # the pair's largest gap over the claim's boundary
        gap_low = x_low - y_high - margin
    favour = int((gap_high < -tie).sum())  # nan (inf - inf) compares false: open, a tie
    against = int((gap_low > tie).sum())
    ties = len(x_low) - favour - against
    n = favour + against
    p_for, p_against = sign_p(favour, n), sign_p(against, n)
    if not len(x_low):
        verdict = NO_DATA
    elif p_for <= ALPHA:
        verdict = REPRODUCED
    elif p_against <= ALPHA:
        verdict = NOT_REPRODUCED
    else:
        verdict = NOT_RESOLVED
    finite = (
        (x_low == x_high)
        & (y_low == y_high)
        & np.isfinite(x_low)
        & np.isfinite(y_low)
        & (y_low != 0)
    )
    one_censored = (x_low == x_high) != (y_low == y_high)
    known = np.isfinite(x_low) & np.isfinite(y_low) & (y_low > 0) & one_censored
    with np.errstate(divide="ignore", invalid="ignore"):
        bounded = [
            (float(a / d), float(b / c))
            for a, b, c, d in zip(
                x_low[known], x_high[known], y_low[known], y_high[known], strict=True
            )
        ]
    return Comparison(
        verdict=verdict,
        favour=favour,
        against=against,
        ties=ties,
        p_for=p_for,
        p_against=p_against,
        ratios=tuple(sorted((x_low[finite] / y_low[finite]).tolist())),
        reached_x=int((np.isfinite(x_high) & (x_low == x_high)).sum()),
        n_x=len(x_low),
        reached_y=int((np.isfinite(y_high) & (y_low == y_high)).sum()),
        n_y=len(y_low),
        bounded=tuple(sorted(bounded)),
    )


def combine(verdicts: Sequence[str], p_against: Sequence[float]) -> str:
    """A claim of several parts: all reproduced -> reproduced; one of the ``m`` parts with
    data refuted at ``ALPHA / m`` (its ``p_against``, Bonferroni) -> not reproduced; no parts,
    or none with data -> no data; otherwise not resolved.

    Args:
        verdicts: The parts' verdicts.
        p_against: The parts' p-values against the claim (`Comparison.p_against`), in the
            same order.
    """
    known = [v for v in verdicts if v != NO_DATA]
    if not known:
        return NO_DATA
    if all(v == REPRODUCED for v in known) and len(known) == len(verdicts):
        return REPRODUCED
    refuted = [
        v == NOT_REPRODUCED and p <= ALPHA / len(known)
        for v, p in zip(verdicts, p_against, strict=True)
    ]
    return NOT_REPRODUCED if any(refuted) else NOT_RESOLVED
