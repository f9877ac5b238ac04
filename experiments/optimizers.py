"""The optimizers a workload may train with, chosen by the ``optimizer`` hyper-parameter.

Each takes the learning rate, a momentum (for AdamW its beta1, as the language models have
always used it) and a weight decay. A workload without an ``optimizer`` hyper-parameter (every
cpu-scale one) keeps the kind it has always used, given as `build_optimizer`'s ``default``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch

__all__ = ["OPTIMIZERS", "adamw", "build_optimizer", "momentum", "nesterov"]

Parameters = Iterable[torch.nn.Parameter]


def nesterov(
    parameters: Parameters, *, lr: float, momentum: float, weight_decay: float
) -> torch.optim.Optimizer:
    """SGD with Nesterov momentum (L2 weight decay)."""
    return torch.optim.SGD(
        parameters, lr=lr, momentum=momentum, weight_decay=weight_decay, nesterov=True
    )


def momentum(
    parameters: Parameters, *, lr: float, momentum: float, weight_decay: float
) -> torch.optim.Optimizer:
    """SGD with (heavy-ball) momentum (L2 weight decay)."""
    return torch.optim.SGD(parameters, lr=lr, momentum=momentum, weight_decay=weight_decay)


def adamw(
    parameters: Parameters, *, lr: float, momentum: float, weight_decay: float
) -> torch.optim.Optimizer:
    """AdamW with betas ``(momentum, 0.98)`` (decoupled weight decay)."""
    return torch.optim.AdamW(parameters, lr=lr, betas=(momentum, 0.98), weight_decay=weight_decay)


OPTIMIZERS: dict[str, Callable[..., torch.optim.Optimizer]] = {
    "nesterov": nesterov,
    "momentum": momentum,
    "adamw": adamw,
}
"""Optimizer name (the ``optimizer`` hyper-parameter) -> its constructor."""


def build_optimizer(
    model: torch.nn.Module, hparams: Mapping[str, Any], default: str
) -> torch.optim.Optimizer:
    """The optimizer ``hparams["optimizer"]`` names (``default`` when absent) over ``model``.

    Args:
        model: The model whose parameters are trained.
        hparams: A run's hyper-parameters; ``lr``, ``momentum`` and ``weight_decay`` are read.
        default: The workload's kind when ``hparams`` names none; one of `OPTIMIZERS`.

    Raises:
        ValueError: An unknown optimizer name (the message lists the valid ones).
    """
    name = hparams.get("optimizer", default)
    if name not in OPTIMIZERS:
        raise ValueError(f"hparam optimizer={name!r} is not valid; use {', '.join(OPTIMIZERS)}")
    return OPTIMIZERS[name](
        model.parameters(),
        lr=hparams["lr"],
        momentum=hparams["momentum"],
        weight_decay=hparams["weight_decay"],
    )
