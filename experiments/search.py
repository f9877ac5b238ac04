"""Hyper-parameter search spaces and their seeded quasi-random trials (the paper's protocol).

Choi et al. tuned every workload and echo condition by quasi-random search over the learning
rate, the momentum and the schedule, repeated each search, and took per search the trial that
reached the target with the fewest fresh examples. A workload declares its space beside its
targets (``Workload.search_spaces``); trial ``t`` of repetition ``r`` is point ``t`` of a
scrambled Sobol sequence seeded with ``r`` (`SearchSpace.point`), so a trial is one ordinary
run whose identity is ``(repetition, trial)`` and whose hyper-parameters are derived from it.
Repetitions are independent searches (different scrambles); within a repetition, the first
``2**k`` trials are a balanced Sobol net.

This module imports nothing heavy (scipy is imported when a point is drawn).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SCALINGS", "Dimension", "SearchSpace"]

SCALINGS: tuple[str, ...] = ("log", "linear", "one_minus_log")
"""How a dimension maps the unit interval onto ``[low, high]``: log-uniform, uniform, or
``1 - value`` log-uniform (a momentum: ``low``/``high`` bound the momentum itself)."""


@dataclass(frozen=True)
class Dimension:
    """One searched hyper-parameter.

    Args:
        low: Smallest value (> 0 for ``log``; the momentum's lowest for ``one_minus_log``).
        high: Largest value.
        scaling: One of `SCALINGS`. Default ``"log"``.

    Raises:
        ValueError: ``low >= high``, a bound outside what the scaling allows, or an unknown
            scaling.
    """

    low: float
    high: float
    scaling: str = "log"

    def __post_init__(self) -> None:
        if self.scaling not in SCALINGS:
            raise ValueError(f"scaling={self.scaling!r} is not valid; use one of {SCALINGS}")
        if not (math.isfinite(self.low) and math.isfinite(self.high) and self.low < self.high):
            raise ValueError(f"need finite low < high, got [{self.low}, {self.high}]")
        if self.scaling == "log" and self.low <= 0:
            raise ValueError(f"a log-uniform dimension needs low > 0, got {self.low}")
        if self.scaling == "one_minus_log" and not (self.low >= 0 and self.high < 1):
            raise ValueError(f"a momentum needs 0 <= low < high < 1, got [{self.low}, {self.high}]")

    def value(self, u: float) -> float:
        """The value at ``u`` in ``[0, 1)`` of the unit interval."""
        if self.scaling == "linear":
            return self.low + u * (self.high - self.low)
        if self.scaling == "log":
            return math.exp(math.log(self.low) + u * (math.log(self.high) - math.log(self.low)))
        # 1 - momentum log-uniform between 1 - high and 1 - low.
        small, large = math.log(1 - self.high), math.log(1 - self.low)
        return 1 - math.exp(large - u * (large - small))

    def contains(self, value: float) -> bool:
        """Whether ``value`` lies in ``[low, high]``."""
        return self.low <= value <= self.high


@dataclass(frozen=True)
class SearchSpace:
    """The hyper-parameters a workload's search covers, one `Dimension` each.

    Args:
        dimensions: ``{hyper-parameter name: Dimension}``; must cover ``lr`` (log-uniform)
            and ``momentum`` (``one_minus_log``), plus a schedule parameter where the workload
            has one.

    Raises:
        ValueError: ``lr`` or ``momentum`` is missing or scaled otherwise.
    """

    dimensions: Mapping[str, Dimension] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, scaling in (("lr", "log"), ("momentum", "one_minus_log")):
            dimension = self.dimensions.get(name)
            if dimension is None or dimension.scaling != scaling:
                raise ValueError(f"a search space must cover {name!r} with scaling {scaling!r}")

    def point(self, repetition: int, trial: int) -> dict[str, float]:
        """The hyper-parameters of ``trial`` (>= 0) of search ``repetition`` (>= 0).

        Point ``trial`` of the Sobol sequence scrambled with seed ``repetition`` (scipy's
        ``qmc.Sobol``), mapped through each dimension, rounded to 6 significant digits so
        records and paths stay readable.
        """
        from scipy.stats import qmc

        for name, value in (("repetition", repetition), ("trial", trial)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
        names = sorted(self.dimensions)
        sobol = qmc.Sobol(len(names), scramble=True, seed=repetition)
        u = sobol.random_base2(max(0, math.ceil(math.log2(trial + 1))))[trial]
        values = (self.dimensions[n].value(float(x)) for n, x in zip(names, u, strict=True))
        return {n: float(f"{v:.6g}") for n, v in zip(names, values, strict=True)}

    def check_default(self, hparams: Mapping[str, Any]) -> None:
        """Raise ``ValueError`` naming a dimension whose default in ``hparams`` lies outside it
        or is missing (a baseline's default must lie inside its workload's space)."""
        for name, dimension in sorted(self.dimensions.items()):
            if name not in hparams:
                raise ValueError(f"search space covers {name!r}, which has no default")
            if not dimension.contains(hparams[name]):
                raise ValueError(
                    f"the default {name}={hparams[name]!r} lies outside its search range "
                    f"[{dimension.low:g}, {dimension.high:g}]"
                )

    def describe(self) -> str:
        """One line, e.g. ``lr log [0.01, 1], momentum 1-log [0.5, 0.98]``."""
        label = {"log": "log", "linear": "linear", "one_minus_log": "1-log"}
        return ", ".join(
            f"{n} {label[d.scaling]} [{d.low:g}, {d.high:g}]"
            for n, d in sorted(self.dimensions.items())
        )
