"""`advise`: is a training job input-bound, and which echo setting should it use?

It measures the user's own loader and train step in this process, then advises from the
protocol study's evidence: for each workload, insertion point and factor, the fresh examples
to target relative to a tuned baseline (``echo/evidence.json``, made by ``python -m analysis
advice`` from the committed records)::

    advice = echo.advise(loader, step, workload="imagenet_resnet")
    print(advice)

The rule. R is the loader's seconds per batch over the step's. With R <= 1.05 the step
hardly waits, and echoing cannot help. Otherwise, with echo factor ``e`` at a point, one fresh
batch takes ``max(upstream, e x step)``, so the wall time to target relative to no echoing is
``ratio(e) x max(1, e / R)``, ``ratio(e)`` being the study's fresh-examples ratio at that point
and factor. Echoing before augmentation repeats the augmentation, so when the read and
augment stages are given their shares ``(1 - a)`` and ``a`` of the upstream, that point's
upstream per fresh batch is ``(1 - a) + e a`` instead of 1. Where R falls between two
factors measured at a point, ``e`` = the largest R of the measured windows (as many steps as
the loader allows even in its slowest window, so that a window slower than the median does
not leave the step waiting) is priced too, its ratio interpolated in log-log between the two
and its time charged ``e / R`` for the median window. The setting with the least expected
time is advised, with its interval (the ratio's min-max over the searches).

`echo` imports nothing else of this project: the evidence travels as a file beside this one.
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from echo.core import augment_takes_rng, check_int
from echo.points import EchoPoint

__all__ = [
    "EVIDENCE",
    "NOT_INPUT_BOUND",
    "Advice",
    "Candidate",
    "Measurement",
    "advise",
    "evidence",
    "measure",
    "recommend",
    "workloads",
]

EVIDENCE = Path(__file__).with_name("evidence.json")
"""The fresh-examples ratios advice rests on (``python -m analysis advice`` writes it)."""

NOT_INPUT_BOUND = 1.05
"""At or below this R the step hardly waits for data: echoing cannot help."""


@cache
def evidence() -> dict[str, Any]:
    """The evidence file's content: ``source``, ``summary``, ``scale``, ``statistic`` and
    ``rows`` (one per workload, insertion point and factor)."""
    return json.loads(EVIDENCE.read_text())


def workloads() -> dict[str, str]:
    """Workload -> its family, for every workload the evidence covers."""
    return {row["workload"]: row["family"] for row in evidence()["rows"]}


def _check_workload(workload: object) -> None:
    if workload not in workloads():
        raise ValueError(
            f"workload={workload!r} is not in the evidence; valid: {', '.join(workloads())}"
        )


def _synchronize() -> None:
    """Wait for queued CUDA work, when torch is in use with a GPU (not imported here)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def _spread(values: Iterable[float]) -> str:
    values = list(values)
    return f"{min(values):.3g}-{max(values):.3g}"


@dataclass(frozen=True)
class Measurement:
    """What `measure` timed: one value per window.

    Attributes:
        loader_s: The loader's seconds per batch, iterated alone.
        step_s: The step's seconds per step, on one batch held in memory.
        augment_share: The augment stage's share of read + augment time per example, when
            both stages were given; None otherwise.
    """

    loader_s: tuple[float, ...]
    step_s: tuple[float, ...]
    augment_share: float | None = None

    @property
    def ratios(self) -> tuple[float, ...]:
        """R of each window: window i of the loader over window i of the step."""
        return tuple(up / down for up, down in zip(self.loader_s, self.step_s, strict=True))

    @property
    def R(self) -> float:
        """The median R over the windows."""
        return statistics.median(self.ratios)


def _timed_windows(call: Callable[[], Any], windows: int, per_window: int) -> tuple[float, ...]:
    times = []
    for _ in range(windows):
        _synchronize()
        start = time.perf_counter()
        for _ in range(per_window):
            call()
        _synchronize()
        times.append((time.perf_counter() - start) / per_window)
    return tuple(times)


def _augment_share(read: Iterable[Any], augment: Callable[..., Any], examples: int) -> float:
    takes_rng = augment_takes_rng(augment)
    start = time.perf_counter()
    raw = list(itertools.islice(iter(read), examples))
    read_s = time.perf_counter() - start
    if not raw:
        raise ValueError("read yielded no example to time")
    rng = None
    if takes_rng:
        import numpy as np  # the rng build_pipeline hands augment

        rng = np.random.default_rng(0)
    start = time.perf_counter()
    for example in raw:
        augment(example, rng) if takes_rng else augment(example)
    augment_s = time.perf_counter() - start
    return augment_s / (read_s + augment_s)


def measure(
    loader: Iterable[Any],
    step: Callable[[Any], Any],
    *,
    windows: int = 5,
    batches: int = 10,
    warmup: int = 2,
    read: Iterable[Any] | None = None,
    augment: Callable[..., Any] | None = None,
    examples: int = 64,
) -> Measurement:
    """Time the loader alone, then the step alone on a batch held in memory.

    The loader is iterated without training (its workers run at full rate) for ``warmup``
    batches (worker start-up), then ``windows`` windows of ``batches`` batches each. The step
    then trains ``warmup`` times and ``windows`` windows of ``batches`` steps on the last
    batch (so it does train: use a model you can spare, or accept a few steps). With a GPU in
    use through torch, each window waits for the device's queued work.

    Args:
        loader: The training loader (any iterable of batches).
        step: The train step, ``step(batch)``.
        windows: Windows timed, for R's spread. Default 5.
        batches: Batches (and steps) per window. Default 10.
        warmup: Batches and steps before timing. Default 2.
        read: The read stage, an iterable of raw examples, to split the upstream's time
            between reading and augmenting. Default None: not split.
        augment: The augment stage, ``augment(example, rng)`` or ``augment(example)``.
            Default None.
        examples: Examples read and augmented to split the time. Default 64.

    Raises:
        ValueError: A count is not an integer >= 1 (``warmup`` >= 0), only one of ``read``
            and ``augment`` is given, or the loader ends before ``warmup + windows * batches``
            batches.
    """
    windows = check_int(windows, "windows", minimum=1)
    batches = check_int(batches, "batches", minimum=1)
    warmup = check_int(warmup, "warmup")
    examples = check_int(examples, "examples", minimum=1)
    if (read is None) != (augment is None):
        raise ValueError("read and augment split the upstream's time together: give both or none")
    needed = warmup + windows * batches
    iterators = [iter(loader)]
    held: list[Any] = []

    def take() -> None:
        try:
            held[:] = [next(iterators[0])]
        except StopIteration:
            raise ValueError(
                f"the loader ended before {needed} batches (warmup={warmup} + windows={windows} "
                f"x batches={batches}): lower them, or pass a longer loader"
            ) from None

    for _ in range(warmup):
        take()
    loader_s = _timed_windows(take, windows, batches)
    iterators.clear()  # a DataLoader's workers stop here, before the step is timed
    batch = held[0]
    for _ in range(warmup):
        step(batch)
    step_s = _timed_windows(lambda: step(batch), windows, batches)
    share = None if read is None else _augment_share(read, augment, examples)  # type: ignore[arg-type]
    return Measurement(loader_s, step_s, share)


@dataclass(frozen=True)
class Candidate:
    """One measured setting of the evidence, priced at a measured R.

    Attributes:
        point: The insertion point.
        factor: The echo factor.
        shuffle_buffer: The shuffle buffer the study used.
        ratio: Fresh examples to target over the tuned baseline's (median over searches).
        low: The ratio's minimum over the searches.
        high: The ratio's maximum over the searches.
        pipeline: Wall time per fresh example over no echoing's: ``max(upstream, e / R)``.
        study: The protocol study's part that measured it.
        searches: Searches behind the ratio.
        trials_per_search: Trials of each search.
        between: For a factor the study did not measure (R itself, between two measured
            factors of the point), those factors; the ratio and its bounds are interpolated
            linearly in log-log. None for a measured factor.
    """

    point: str
    factor: float
    shuffle_buffer: int
    ratio: float
    low: float
    high: float
    pipeline: float
    study: str
    searches: int
    trials_per_search: int | None
    between: tuple[float, float] | None = None

    @property
    def time(self) -> float:
        """Expected wall time to target over no echoing's: ``ratio x pipeline``."""
        return self.ratio * self.pipeline

    @property
    def interval(self) -> tuple[float, float]:
        """``time``'s interval: the ratio's min-max times ``pipeline``."""
        return self.low * self.pipeline, self.high * self.pipeline

    def describe(self) -> str:
        """``point e=F (shuffle_buffer=B[; interpolated ...]): xT (L-H)``."""
        low, high = self.interval
        return (
            f"{self.point} e={self.factor:.3g} ({self.settings()}): "
            f"x{self.time:.3f} ({low:.3f}-{high:.3f})"
        )

    def settings(self) -> str:
        """``shuffle_buffer=B``, and where the factor's ratio was interpolated from."""
        text = f"shuffle_buffer={self.shuffle_buffer}"
        if self.between is not None:
            text += f"; ratio interpolated between e={self.between[0]:g} and {self.between[1]:g}"
        return text


def recommend(
    R: float,
    workload: str,
    *,
    augment_share: float | None = None,
    R_max: float | None = None,
) -> list[Candidate]:
    """Every setting the evidence holds for ``workload``, priced at ``R``, best first.

    Args:
        R: The measured upstream/step time ratio (> 0).
        workload: A workload of the evidence (`workloads`).
        augment_share: The augment stage's share of the upstream time, when known. Default
            None: echoing before augmentation is priced as if augmentation cost nothing.
        R_max: The largest R of the measured windows: the factor priced between two measured
            ones (`Measurement.ratios`). Default None: ``R``.

    Raises:
        ValueError: ``R`` is not a positive number, ``augment_share`` is outside [0, 1], or
            ``workload`` is not in the evidence (the message lists those that are).
    """
    if isinstance(R, bool) or not isinstance(R, int | float) or not R > 0 or math.isinf(R):
        raise ValueError(f"R must be a positive number, got {R!r}")
    if R_max is not None and not (isinstance(R_max, int | float) and R_max >= R):
        raise ValueError(f"R_max must be a number >= R = {R!r}, got {R_max!r}")
    if augment_share is not None and not 0 <= augment_share <= 1:
        raise ValueError(f"augment_share must be in [0, 1], got {augment_share!r}")
    _check_workload(workload)
    share = augment_share or 0.0
    by_point: dict[str, list[dict[str, Any]]] = {}
    for row in evidence()["rows"]:
        if row["workload"] == workload:
            by_point.setdefault(row["echo_point"], []).append(row)
    candidates = []
    for rows in by_point.values():
        rows.sort(key=lambda row: row["echo_factor"])
        for row in rows:
            candidates.append(_priced(row, R, share))
        factor = round(R if R_max is None else R_max, 2)  # as many steps as the loader allows
        for below, above in itertools.pairwise(rows):
            if below["echo_factor"] < factor < above["echo_factor"]:
                candidates.append(_priced(_between(below, above, factor), R, share))
    return sorted(candidates, key=lambda c: (c.time, c.factor))


def _between(below: dict[str, Any], above: dict[str, Any], factor: float) -> dict[str, Any]:
    """An evidence row at ``factor`` between two measured ones: the ratio and its bounds
    interpolated linearly in log(factor) and log(ratio)."""
    weight = math.log(factor / below["echo_factor"]) / math.log(
        above["echo_factor"] / below["echo_factor"]
    )

    def interpolated(key: str) -> float:
        return math.exp((1 - weight) * math.log(below[key]) + weight * math.log(above[key]))

    return {
        **below,
        "echo_factor": factor,
        "ratio": interpolated("ratio"),
        "low": interpolated("low"),
        "high": interpolated("high"),
        "searches": min(below["searches"], above["searches"]),
        "between": (below["echo_factor"], above["echo_factor"]),
    }


def _priced(row: dict[str, Any], R: float, share: float) -> Candidate:
    e = row["echo_factor"]
    upstream = (1 - share) + e * share if row["echo_point"] == EchoPoint.BEFORE_AUGMENT else 1
    return Candidate(
        point=row["echo_point"],
        factor=e,
        shuffle_buffer=row["shuffle_buffer"],
        ratio=row["ratio"],
        low=row["low"],
        high=row["high"],
        pipeline=max(upstream, e / R),
        study=row["study"],
        searches=row["searches"],
        trials_per_search=row["trials_per_search"],
        between=row.get("between"),
    )


@dataclass(frozen=True)
class Advice:
    """What `advise` measured and advises; ``print(advice)`` says it in words.

    Attributes:
        measurement: The timings.
        workload: The workload whose evidence was read (None: none named).
        candidates: Every setting of that workload's evidence, best first (empty without a
            workload).
    """

    measurement: Measurement
    workload: str | None
    candidates: tuple[Candidate, ...]

    @property
    def input_bound(self) -> bool:
        """Whether R > `NOT_INPUT_BOUND`."""
        return self.measurement.R > NOT_INPUT_BOUND

    @property
    def setting(self) -> Candidate | None:
        """The advised setting: the best candidate when the job is input-bound and it is
        expected to reach the target sooner than no echoing; else None."""
        if not self.input_bound or not self.candidates or self.candidates[0].time >= 1:
            return None
        return self.candidates[0]

    @property
    def on_stall_max_factor(self) -> int | None:
        """The ``max_factor`` offered for `EchoOnStall`: the advised factor, rounded up."""
        return None if self.setting is None else math.ceil(self.setting.factor)

    def __str__(self) -> str:
        return "\n".join(_report(self))


def _measured_lines(advice: Advice) -> list[str]:
    m = advice.measurement
    lines = [
        f"echo advise: measured in this process, {len(m.ratios)} windows",
        f"  loader alone: {statistics.median(m.loader_s) * 1e3:.3g} ms per batch "
        f"({_spread(s * 1e3 for s in m.loader_s)} over the windows)",
        f"  train step on a batch in memory: {statistics.median(m.step_s) * 1e3:.3g} ms "
        f"({_spread(s * 1e3 for s in m.step_s)})",
        f"  R = {m.R:.3g} ({_spread(m.ratios)}): the loader's time per batch over the step's",
    ]
    if m.augment_share is not None:
        lines.append(
            f"  upstream per example: read {1 - m.augment_share:.0%}, augment {m.augment_share:.0%}"
        )
    return lines


def _report(advice: Advice) -> list[str]:
    lines = _measured_lines(advice)
    m = advice.measurement
    if not advice.input_bound:
        return [
            *lines,
            f"Nothing to do: R <= {NOT_INPUT_BOUND}, the step hardly waits for data, so echoing "
            "cannot make training faster.",
        ]
    if advice.workload is None:
        lines.append("Input-bound. Best setting per workload (expected time to target relative")
        lines.append("to no echoing, min-max over the searches):")
        for name, family in workloads().items():
            best = recommend(m.R, name, augment_share=m.augment_share, R_max=max(m.ratios))[0]
            lines.append(f"  {name} ({family}): {best.describe()}")
        lines.append(
            "Name the nearest one (workload=..., --workload) for one setting, and for "
            "EchoOnStall(loader, max_factor=...) capped at its factor, which echoes only while "
            "the step would wait."
        )
        return lines
    family = workloads()[advice.workload]
    best = advice.setting
    table = evidence()
    if best is None:
        lines.append(
            f"No measured setting of {advice.workload} is expected to beat no echoing at "
            f"R = {m.R:.3g} (best: {advice.candidates[0].describe()}): leave echo off."
        )
        return lines
    low, high = best.interval
    lines += [
        f"Advice: echo {best.point} with factor {best.factor:.3g} ({best.settings()}).",
        f"  Expected wall time to target: x{best.time:.3f} of no echoing ({low:.3f}-{high:.3f}):"
        f" fresh-examples ratio {best.ratio:.3f} ({best.low:.3f}-{best.high:.3f} over "
        f"{best.searches} searches of {best.trials_per_search} trials) x time per fresh "
        f"example {best.pipeline:.3f}.",
        f"  Evidence: workload {advice.workload} ({family}), {table['summary']} (study "
        f"{best.study}), measured at {table['scale']} scale: a larger model or dataset may "
        "value repeated examples differently.",
    ]
    if m.augment_share is None and best.point == EchoPoint.BEFORE_AUGMENT:
        lines.append(
            "  Echoing before augmentation repeats the augmentation: this assumed it costs "
            "little beside reading; give read and augment to price it."
        )
    others = [c.describe() for c in advice.candidates[1:4]]
    lines.append(f"  Next best: {'; '.join(others)}.")
    batch_echo = [
        c for c in advice.candidates if c.point == EchoPoint.AFTER_BATCH and c.between is None
    ]
    evidence_note = (
        f"where {advice.workload}'s ratio at e={batch_echo[0].factor:g} is "
        f"{batch_echo[0].ratio:.3f} ({batch_echo[0].low:.3f}-{batch_echo[0].high:.3f})"
        if batch_echo
        else f"which the study did not measure for {advice.workload}"
    )
    lines.append(
        f"Or EchoOnStall(loader, max_factor={advice.on_stall_max_factor}): it repeats a batch "
        f"only while the step would wait, so it trains about min({advice.on_stall_max_factor}, "
        f"R) steps per fresh batch even as R drifts (R ranged {_spread(m.ratios)} here) and "
        "never slows a loader that keeps up; the cap keeps repeats at the factor the evidence "
        f"favours. It echoes after batching, {evidence_note}."
    )
    return lines


def advise(
    loader: Iterable[Any],
    step: Callable[[Any], Any],
    *,
    workload: str | None = None,
    windows: int = 5,
    batches: int = 10,
    warmup: int = 2,
    read: Iterable[Any] | None = None,
    augment: Callable[..., Any] | None = None,
) -> Advice:
    """Measure ``loader`` and ``step`` here (`measure`), and advise an echo setting.

    Args:
        loader: The training loader (any iterable of batches).
        step: The train step, ``step(batch)``; it trains during the measurement.
        workload: The evidence's workload nearest yours (`workloads`: two image
            classifiers, two language models, one detector). Default None: the best setting
            for each is listed.
        windows: Windows timed. Default 5.
        batches: Batches and steps per window. Default 10.
        warmup: Batches and steps before timing. Default 2.
        read: The read stage (an iterable of raw examples), with ``augment``, to price
            echoing before augmentation. Default None.
        augment: The augment stage. Default None.

    Returns:
        An `Advice`; ``print(advice)`` shows the measurements, the advised setting with its
        evidence and interval, and `EchoOnStall` with a ``max_factor``.

    Raises:
        ValueError: A bad argument (see `measure` and `recommend`).
    """
    if workload is not None:
        _check_workload(workload)
    measurement = measure(
        loader, step, windows=windows, batches=batches, warmup=warmup, read=read, augment=augment
    )
    candidates: tuple[Candidate, ...] = ()
    if workload is not None:
        share, slowest = measurement.augment_share, max(measurement.ratios)
        candidates = tuple(recommend(measurement.R, workload, augment_share=share, R_max=slowest))
    return Advice(measurement, workload, candidates)
