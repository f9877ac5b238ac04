"""Learning-rate schedules as multipliers of the optimizer's rate, chosen by hyper-parameters.

A run's ``schedule`` hyper-parameter names one of `SCHEDULES`; its parameters are further
hyper-parameters named as the schedule function's keyword arguments. The multiplier of step
``k`` (0-based: the rate of the first step is ``lr * multiplier(0)``) is applied by torch's
`LambdaLR`, which the harness steps once after each optimizer step. Steps count optimizer
steps, echoed batches included. A run without a ``schedule`` trains at a constant rate, as
every cpu-scale workload does.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Mapping
from typing import Any

import torch

__all__ = [
    "SCHEDULES",
    "constant",
    "linear_decay",
    "lr_scheduler",
    "multiplier",
    "warmup_linear_decay",
    "warmup_piecewise_exponential",
]


def constant(step: int) -> float:
    """1 at every step."""
    return 1.0


def linear_decay(step: int, *, decay_steps: float, final_lr_fraction: float) -> float:
    """From 1 at step 0 linearly to ``final_lr_fraction`` at ``decay_steps``, then flat.

    Args:
        step: The optimizer step (>= 0).
        decay_steps: Steps of the decay (> 0; a search may give a fraction).
        final_lr_fraction: The multiplier from ``decay_steps`` on (in [0, 1]).
    """
    return 1.0 - (1.0 - final_lr_fraction) * min(step, decay_steps) / decay_steps


def warmup_linear_decay(
    step: int, *, warmup_steps: float, decay_steps: float, final_lr_fraction: float
) -> float:
    """Linear warm-up, then a linear decay to ``final_lr_fraction`` at ``decay_steps``.

    Args:
        step: The optimizer step (>= 0).
        warmup_steps: Steps of the warm-up (>= 0): step ``k`` < ``warmup_steps`` has
            ``(k + 1) / warmup_steps``; 0: no warm-up.
        decay_steps: The step (counted from 0, the warm-up included; > 0) at which the decay
            reaches ``final_lr_fraction``; flat after it.
        final_lr_fraction: The multiplier from ``decay_steps`` on (in [0, 1]).
    """
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    span = max(decay_steps - warmup_steps, 1.0)
    done = min(max(step - warmup_steps, 0.0), span) / span
    return 1.0 - (1.0 - final_lr_fraction) * done


def warmup_piecewise_exponential(
    step: int, *, warmup_steps: float, decay_factor: float, decay_every_steps: float
) -> float:
    """Linear warmup, then a factor of ``decay_factor`` every ``decay_every_steps``.

    Args:
        step: The optimizer step (>= 0).
        warmup_steps: Steps of the warmup (>= 0): step ``k`` < ``warmup_steps`` has
            ``(k + 1) / warmup_steps``; 0: no warmup.
        decay_factor: The factor of each decay (in (0, 1]).
        decay_every_steps: Steps between decays (> 0), counted from the end of the warmup:
            ``decay_factor ** ((k - warmup_steps) // decay_every_steps)``.
    """
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    return decay_factor ** ((step - warmup_steps) // decay_every_steps)


SCHEDULES: dict[str, Callable[..., float]] = {
    "constant": constant,
    "linear_decay": linear_decay,
    "warmup_linear_decay": warmup_linear_decay,
    "warmup_piecewise_exponential": warmup_piecewise_exponential,
}
"""Schedule name (the ``schedule`` hyper-parameter) -> its multiplier of ``(step, **params)``."""

_VALID: dict[str, tuple[Callable[[float], bool], str]] = {
    "decay_steps": (lambda v: v > 0, "> 0"),
    "final_lr_fraction": (lambda v: 0 <= v <= 1, "in [0, 1]"),
    "warmup_steps": (lambda v: v >= 0, ">= 0"),
    "decay_factor": (lambda v: 0 < v <= 1, "in (0, 1]"),
    "decay_every_steps": (lambda v: v > 0, "> 0"),
}
"""What each schedule parameter accepts: a test of a finite number, and it in words."""


def _parameters(name: str) -> list[str]:
    """The hyper-parameters schedule ``name`` reads: its keyword-only arguments."""
    signature = inspect.signature(SCHEDULES[name])
    return [p.name for p in signature.parameters.values() if p.kind is p.KEYWORD_ONLY]


def _checked(key: str, value: Any, name: str) -> float:
    valid, words = _VALID[key]
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not (number and math.isfinite(value) and valid(value)):
        raise ValueError(f"hparam {key}={value!r} of schedule {name!r} must be a number {words}")
    return float(value)


def multiplier(hparams: Mapping[str, Any]) -> Callable[[int], float]:
    """The multiplier of the rate at each step, from ``hparams``.

    Args:
        hparams: A run's hyper-parameters: ``schedule`` (one of `SCHEDULES`; absent:
            ``"constant"``) and that schedule's parameters (its keyword arguments).

    Returns:
        ``step -> multiplier``.

    Raises:
        ValueError: An unknown ``schedule``, or a parameter missing or out of range; the
            message names the key and what is valid.
    """
    name = hparams.get("schedule", "constant")
    if name not in SCHEDULES:
        raise ValueError(f"hparam schedule={name!r} is not valid; use {', '.join(SCHEDULES)}")
    needed = _parameters(name)
    missing = [key for key in needed if key not in hparams]
    if missing:
        raise ValueError(
            f"schedule {name!r} needs hparam {missing[0]!r}; it reads {', '.join(needed)}"
        )
    params = {key: _checked(key, hparams[key], name) for key in needed}
    return functools.partial(SCHEDULES[name], **params)


def lr_scheduler(
    optimizer: torch.optim.Optimizer, hparams: Mapping[str, Any]
) -> torch.optim.lr_scheduler.LRScheduler | None:
    """A `LambdaLR` over ``optimizer`` applying `multiplier` (``hparams``), or None for a
    constant rate (no ``schedule``, or ``"constant"``), so such a run is left as it was.

    Raises:
        ValueError: As `multiplier`.
    """
    factor = multiplier(hparams)
    if hparams.get("schedule", "constant") == "constant":
        return None
    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
