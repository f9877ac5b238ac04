"""Hyper-parameter search spaces and their seeded quasi-random trials (the paper's protocol).

Choi et al. tuned every workload and echo condition by quasi-random search over the learning
rate, the momentum and the schedule, repeated each search, and took per search the trial that
reached the target with the fewest fresh examples. A workload declares its space beside its
targets (``Workload.search_spaces``); trial ``t`` of repetition ``r`` is point ``t`` of a
scrambled Sobol sequence seeded with ``r`` (`SearchSpace.point`), so a trial is one ordinary
run whose identity is ``(repetition, trial)`` and whose hyper-parameters are derived from it.
Repetitions are independent searches (different scrambles); within a repetition, the first
``2**k`` trials are a balanced Sobol net.

A space may search the learning-rate schedule too (`SCHEDULE`, a `Choice` of
`BUDGET_SCHEDULES`: constant, linear decay, or warm-up plus linear decay). Such a schedule's
length is the trial's own budget, so the point is resolved against it
(``SearchSpace.point(..., budget_steps=...)``, `budget_schedule`): the rate decays linearly to
`FINAL_LR_FRACTION` of its start over the optimizer steps in which the trial would use up its
fresh-example budget, after a warm-up of `WARMUP_FRACTION` of them where the schedule has one.
Those two shapes are fixed, not searched: at cpu scale's few trials per search, each searched
dimension thins the others' coverage.

This module imports nothing heavy: scipy's ``qmc.Sobol`` draws a search's points once per
machine (`sobol_block`), into the data cache; a run process reads them back from there, as
importing ``scipy.stats`` alone costs a few seconds of CPU, more than a short trial's set-up.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = [
    "BUDGET_SCHEDULES",
    "FINAL_LR_FRACTION",
    "SCALINGS",
    "SCHEDULE",
    "WARMUP_FRACTION",
    "Choice",
    "Dimension",
    "SearchSpace",
    "budget_schedule",
    "sobol_block",
]

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
class Choice:
    """One searched categorical hyper-parameter: the unit interval cut into equal parts, one
    per option, in order.

    Args:
        options: The values (strings), at least two, no repeats.
        absent: What a run whose hyper-parameters lack this one has (one of ``options``), so
            that a workload's defaults need not name it. Default None: they must.

    Raises:
        ValueError: Fewer than two options, a repeated one, or ``absent`` not among them.
    """

    options: tuple[str, ...]
    absent: str | None = None

    def __post_init__(self) -> None:
        if len(self.options) < 2 or len(set(self.options)) != len(self.options):
            raise ValueError(f"a choice needs two or more distinct options, got {self.options}")
        if self.absent is not None and self.absent not in self.options:
            raise ValueError(f"absent={self.absent!r} is not one of {self.options}")

    def value(self, u: float) -> str:
        """The option whose part of ``[0, 1)`` holds ``u``."""
        return self.options[min(int(u * len(self.options)), len(self.options) - 1)]

    def contains(self, value: Any) -> bool:
        """Whether ``value`` is one of the options."""
        return value in self.options


BUDGET_SCHEDULES: tuple[str, ...] = ("constant", "linear_decay", "warmup_linear_decay")
"""The schedules a search chooses among (`experiments.schedules`), each spanning the trial's
budget (`budget_schedule`)."""

SCHEDULE = Choice(BUDGET_SCHEDULES, absent="constant")
"""The ``schedule`` dimension of the cpu-scale spaces: constant, linear decay, or warm-up
plus linear decay, in equal shares of the trials; a run without a ``schedule`` trains at a
constant rate (`experiments.schedules`), so a default need not name one."""

FINAL_LR_FRACTION = 0.01
"""Where a searched decay ends: this fraction of the initial rate, at the budget's last step."""

WARMUP_FRACTION = 0.05
"""A searched warm-up's share of the budget's steps."""


def budget_schedule(name: str, budget_steps: int) -> dict[str, Any]:
    """The hyper-parameters of schedule ``name`` spanning a budget of ``budget_steps``.

    Args:
        name: One of `BUDGET_SCHEDULES`.
        budget_steps: The optimizer steps in which the run would use up its fresh-example
            budget (>= 1).

    Returns:
        ``schedule`` and its parameters (`experiments.schedules`): none for ``constant``;
        ``decay_steps`` (the budget) and ``final_lr_fraction`` (`FINAL_LR_FRACTION`) for
        ``linear_decay``; those and ``warmup_steps`` (`WARMUP_FRACTION` of the budget, at
        least 1) for ``warmup_linear_decay``.

    Raises:
        ValueError: An unknown name or a budget below one step.
    """
    if name not in BUDGET_SCHEDULES:
        raise ValueError(f"schedule={name!r} is not valid; use one of {BUDGET_SCHEDULES}")
    if not isinstance(budget_steps, int) or budget_steps < 1:
        raise ValueError(f"budget_steps must be an integer >= 1, got {budget_steps!r}")
    if name == "constant":
        return {"schedule": name}
    params = {"schedule": name, "decay_steps": budget_steps, "final_lr_fraction": FINAL_LR_FRACTION}
    if name == "warmup_linear_decay":
        params["warmup_steps"] = max(1, round(WARMUP_FRACTION * budget_steps))
    return params


@dataclass(frozen=True)
class SearchSpace:
    """The hyper-parameters a workload's search covers, one `Dimension` each.

    Args:
        dimensions: ``{hyper-parameter name: Dimension or Choice}``; must cover ``lr``
            (log-uniform) and ``momentum`` (``one_minus_log``), plus a schedule parameter
            where the workload has one; ``schedule`` may only be `SCHEDULE` (the schedule is
            then resolved against each trial's budget, `budget_schedule`).

    Raises:
        ValueError: ``lr`` or ``momentum`` is missing or scaled otherwise, or ``schedule`` is
            another dimension than `SCHEDULE`.
    """

    dimensions: Mapping[str, Dimension | Choice] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, scaling in (("lr", "log"), ("momentum", "one_minus_log")):
            dimension = self.dimensions.get(name)
            if dimension is None or dimension.scaling != scaling:
                raise ValueError(f"a search space must cover {name!r} with scaling {scaling!r}")
        if "schedule" in self.dimensions and self.dimensions["schedule"] != SCHEDULE:
            raise ValueError(
                f"a searched schedule must be experiments.search.SCHEDULE {SCHEDULE.options}"
            )

    @property
    def budget_dependent(self) -> bool:
        """Whether a point needs its trial's budget in steps (the schedule is searched)."""
        return "schedule" in self.dimensions

    def point(self, repetition: int, trial: int, budget_steps: int | None = None) -> dict[str, Any]:
        """The hyper-parameters of ``trial`` (>= 0) of search ``repetition`` (>= 0).

        Point ``trial`` of the Sobol sequence scrambled with seed ``repetition`` (scipy's
        ``qmc.Sobol``), mapped through each dimension, numbers rounded to 6 significant
        digits so records and paths stay readable. A searched ``schedule`` comes with its
        parameters for a budget of ``budget_steps`` (`budget_schedule`).

        Args:
            repetition: The search (>= 0).
            trial: The trial within it (>= 0).
            budget_steps: The trial's budget in optimizer steps; needed (and only read) when
                the space searches the schedule. Default None.

        Raises:
            ValueError: A bad repetition or trial, or a searched schedule without
                ``budget_steps``.
        """
        for name, value in (("repetition", repetition), ("trial", trial)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
        names = sorted(self.dimensions)
        u = sobol_block(len(names), repetition, max(0, math.ceil(math.log2(trial + 1))))[trial]
        values = (self.dimensions[n].value(float(x)) for n, x in zip(names, u, strict=True))
        point = {
            n: v if isinstance(v, str) else float(f"{v:.6g}")
            for n, v in zip(names, values, strict=True)
        }
        if self.budget_dependent:
            if budget_steps is None:
                raise ValueError("this space searches the schedule: pass the trial's budget_steps")
            point.update(budget_schedule(point.pop("schedule"), budget_steps))
        return point

    def check_default(self, hparams: Mapping[str, Any]) -> None:
        """Raise ``ValueError`` naming a dimension whose default in ``hparams`` lies outside it
        or is missing (a baseline's default must lie inside its workload's space)."""
        for name, dimension in sorted(self.dimensions.items()):
            value = hparams.get(name, getattr(dimension, "absent", None))
            if value is None:
                raise ValueError(f"search space covers {name!r}, which has no default")
            if not dimension.contains(value):
                where = (
                    f"options {dimension.options}"
                    if isinstance(dimension, Choice)
                    else f"range [{dimension.low:g}, {dimension.high:g}]"
                )
                raise ValueError(f"the default {name}={value!r} lies outside its search {where}")

    def describe(self) -> str:
        """One line, e.g. ``lr log [0.01, 1], momentum 1-log [0.5, 0.98], schedule one of
        constant/linear_decay/warmup_linear_decay``."""
        label = {"log": "log", "linear": "linear", "one_minus_log": "1-log"}
        return ", ".join(
            f"{n} one of {'/'.join(d.options)}"
            if isinstance(d, Choice)
            else f"{n} {label[d.scaling]} [{d.low:g}, {d.high:g}]"
            for n, d in sorted(self.dimensions.items())
        )


def _draw_sobol(dimensions: int, seed: int, m: int) -> Any:
    from scipy.stats import qmc

    return qmc.Sobol(dimensions, scramble=True, seed=seed).random_base2(m)


def sobol_block(dimensions: int, seed: int, m: int, cache: str | Path | None = None) -> Any:
    """The first ``2**m`` points of the Sobol sequence in ``dimensions`` dimensions scrambled
    with ``seed`` (scipy's ``qmc.Sobol(dimensions, scramble=True, seed=seed).random_base2(m)``),
    as a float64 array of shape ``(2**m, dimensions)``.

    Drawn once per machine and kept in the data cache (`experiments.data.cache`, folder
    ``sobol``, under a name with the versions of scipy and numpy that drew it, so an upgrade
    draws afresh), built atomically: two processes drawing the same block at once both
    succeed. Where the cache cannot be written, the block is drawn in memory.

    Args:
        dimensions: The number of dimensions (>= 1).
        seed: The scramble's seed (>= 0): the search's repetition.
        m: log2 of the number of points (>= 0).
        cache: The cache folder. Default None: `experiments.data.cache.cache_dir`'s.
    """
    import numpy as np

    from experiments.data.cache import build_once, cache_dir

    versions = f"scipy{metadata.version('scipy')}-numpy{np.__version__}"
    name = f"sobol-d{dimensions}-seed{seed}-m{m}-{versions}.npy"

    def complete(path: Path) -> bool:
        try:
            block = np.load(path, allow_pickle=False)
        except (OSError, ValueError):
            return False
        return block.shape == (2**m, dimensions) and block.dtype == np.float64

    def build(path: Path) -> None:
        with open(path, "wb") as file:
            np.save(file, _draw_sobol(dimensions, seed, m), allow_pickle=False)

    try:
        folder = cache_dir(cache) / "sobol"
        return np.load(build_once(folder / name, build, complete), allow_pickle=False)
    except OSError:  # a read-only or full cache: draw it here
        return _draw_sobol(dimensions, seed, m)
