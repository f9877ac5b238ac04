"""The one family of rules every claim part is decided by: a paired sign test.

A comparison sets condition ``x`` against condition ``y`` pair by pair: search ``r`` of ``x``
against search ``r`` of ``y`` in a tuned study (every condition searches the same points with
the same seeds), seed ``s`` against seed ``s`` in a study of fixed hyper-parameters. A claim
part says ``x < y + margin``:

* ``margin = -delta`` ("fewer", "faster"): ``x`` must be below ``y`` by more than the
  resolution ``delta``;
* ``margin = +delta`` ("at most as many", "no worse", "never below"): ``x`` may exceed ``y``
  by the resolution, not more.

A pair **favours** the claim when ``x < y + margin``, **disfavours** it when ``x > y +
margin``, and is a tie (dropped, as the sign test drops ties) otherwise. A run that missed its
target counts as worse than every run that reached it (``+inf``): it favours the other side,
and two such runs tie. With ``n`` untied pairs, ``k`` favouring:

* **reproduced** when the one-sided exact sign test rejects "no better than the margin":
  ``P(Binomial(n, 1/2) >= k) <= ALPHA``;
* **not reproduced** when it rejects the opposite: ``P(Binomial(n, 1/2) >= n - k) <= ALPHA``;
* **not resolved** otherwise.

At the boundary of its claim (``x = y + margin`` in the median, pairs independent) the rule
says "reproduced" with probability at most ``ALPHA``, whatever the noise: that is its stated
false-positive rate, which `analysis.calibration` measures on each study's own records. The
price is power: with ``n`` pairs the smallest p is ``2**-n``, so fewer than 5 pairs
(``MIN_PAIRS``) can never reproduce a claim at 5%, and 5 pairs must all agree.

Beside the verdict a comparison keeps the pairs' ratios ``x / y``: their median and their
range, which over ``n`` pairs is a distribution-free interval for the median ratio with
coverage ``1 - 2 * 2**-n`` (93.75% at 5 pairs) - the paper's own error bars (min and max over
repeated searches), paired. Where the paper gives a number, the claim says whether this
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
"""The sign test's level: the largest chance of "reproduced" at a claim's boundary."""

MIN_PAIRS = math.ceil(-math.log2(ALPHA))
"""The fewest untied pairs that can reproduce a claim at `ALPHA` (5: 1/32 <= 0.05 < 1/16)."""


def sign_p(k: int, n: int) -> float:
    """``P(Binomial(n, 1/2) >= k)``: the one-sided sign test's p-value (1 when ``n`` is 0)."""
    return float(binom.sf(k - 1, n, 0.5)) if n else 1.0


@dataclass(frozen=True)
class Comparison:
    """One claim part decided: ``x < y + margin``, pair by pair.

    Attributes:
        verdict: `REPRODUCED`, `NOT_REPRODUCED`, `NOT_RESOLVED` or `NO_DATA` (no pairs).
        favour: Pairs favouring the claim.
        against: Pairs against it.
        ties: Pairs within the margin exactly (or both runs unreached).
        p_for: The sign test's p-value for the claim.
        p_against: Its p-value for the opposite.
        ratios: ``x / y`` of the pairs where both reached (sorted).
        reached_x: Runs of ``x`` that reached the target, and ``n_x`` of them in all.
        n_x: Runs of ``x``.
        reached_y: Runs of ``y`` that reached the target.
        n_y: Runs of ``y``.
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

    def summary(self, unit: str = "", invert: bool = False) -> str:
        """``0.72 (0.57-0.80), reached 5/5 vs 5/5``: the median ratio ``x / y`` and its
        interval (``invert``: of ``y / x``, e.g. a speed-up), and who reached the target."""
        if self.verdict == NO_DATA:
            return "no pairs"
        ratios = sorted(1 / r for r in self.ratios if r) if invert else list(self.ratios)
        ratio = (
            f"{float(np.median(ratios)):.2f}{unit} ({ratios[0]:.2f}-{ratios[-1]:.2f})"
            if ratios
            else "no pair where both reached"
        )
        return f"{ratio}, reached {self.reached_x}/{self.n_x} vs {self.reached_y}/{self.n_y}"

    def describe(self, unit: str = "", invert: bool = False) -> str:
        """`summary`, then the sign test: ``..., 5 of 5 pairs for (p 0.031)``."""
        if self.verdict == NO_DATA:
            return "no pairs"
        ties = f", {self.ties} tied" if self.ties else ""
        few = (
            f"; {self.pairs} pairs cannot reproduce at {ALPHA:g} ({MIN_PAIRS} needed)"
            if self.pairs < MIN_PAIRS
            else ""
        )
        return (
            f"{self.summary(unit, invert)}, "
            f"{self.favour} of {self.pairs} pairs for{ties} (p {self.p_for:.3f}){few}"
        )


def compare(x: Sequence[float], y: Sequence[float], margin: float = 0.0) -> Comparison:
    """Decide ``x < y + margin`` from paired values (`ALPHA`, the module's rule).

    Args:
        x: One value per pair (e.g. search ``r``'s best fresh examples to target); ``inf``
            or nan: the run missed its target.
        y: The same for the condition compared against, in the same order.
        margin: ``-delta`` for a strict claim, ``+delta`` for an "at most" claim (the values'
            units). Default 0.

    Returns:
        The `Comparison`.

    Raises:
        ValueError: ``x`` and ``y`` differ in length.
    """
    a = np.asarray(x, dtype=float)
    b = np.asarray(y, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"x and y must pair up, got {len(a)} and {len(b)} values")
    a = np.where(np.isnan(a), math.inf, a)
    b = np.where(np.isnan(b), math.inf, b)
    both_missed = np.isinf(a) & np.isinf(b)
    with np.errstate(invalid="ignore"):
        gap = np.where(both_missed, 0.0, a - (b + margin))
    gap = np.where(np.isnan(gap), 0.0, gap)
    favour = int(((gap < 0) & ~both_missed).sum())
    against = int(((gap > 0) & ~both_missed).sum())
    ties = len(a) - favour - against
    n = favour + against
    p_for, p_against = sign_p(favour, n), sign_p(against, n)
    if not len(a):
        verdict = NO_DATA
    elif p_for <= ALPHA:
        verdict = REPRODUCED
    elif p_against <= ALPHA:
        verdict = NOT_REPRODUCED
    else:
        verdict = NOT_RESOLVED
    finite = np.isfinite(a) & np.isfinite(b) & (b != 0)
    return Comparison(
        verdict=verdict,
        favour=favour,
        against=against,
        ties=ties,
        p_for=p_for,
        p_against=p_against,
        ratios=tuple(sorted((a[finite] / b[finite]).tolist())),
        reached_x=int(np.isfinite(a).sum()),
        n_x=len(a),
        reached_y=int(np.isfinite(b).sum()),
        n_y=len(b),
    )


def combine(verdicts: Sequence[str]) -> str:
    """A claim of several parts: all reproduced -> reproduced; any not reproduced -> not
    reproduced; no parts, or none with data -> no data; otherwise not resolved."""
    known = [v for v in verdicts if v != NO_DATA]
    if not known:
        return NO_DATA
    if NOT_REPRODUCED in known:
        return NOT_REPRODUCED
    if all(v == REPRODUCED for v in known) and len(known) == len(verdicts):
        return REPRODUCED
    return NOT_RESOLVED
