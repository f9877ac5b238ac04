"""Workload registry: ``@register("name")`` on a class, discovery of ``experiments/workloads/``.

Adding a workload is one new module in ``experiments/workloads/`` (found by `discover`) and
one entry under ``workloads:`` in ``config/config.yaml``; nothing else is edited.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable

from experiments.workload import SCALES, Workload

__all__ = ["WORKLOAD_PACKAGE", "discover", "get", "names", "register"]

WORKLOAD_PACKAGE = "experiments.workloads"

_WORKLOADS: dict[str, type[Workload]] = {}


def _check_declarations(name: str, cls: type[Workload]) -> None:
    if not cls.targets:
        raise ValueError(f"workload {name!r} declares no targets")
    for scale in cls.targets:
        if scale not in SCALES:
            raise ValueError(f"workload {name!r}: scale {scale!r} is not one of {SCALES}")
        for table in ("hparams", "budgets"):
            if scale not in getattr(cls, table):
                raise ValueError(f"workload {name!r}: {table} has no entry for scale {scale!r}")
        missing = {"batch_size", "lr"} - set(cls.hparams[scale])
        if missing:
            raise ValueError(f"workload {name!r}: hparams[{scale!r}] lacks {sorted(missing)}")


def register(name: str) -> Callable[[type[Workload]], type[Workload]]:
    """Class decorator that registers a `Workload` subclass under ``name``.

    Args:
        name: The workload's name on the command line, in config and in records.

    Raises:
        ValueError: ``name`` is taken by another class, or the class's declarations are
            incomplete (a scale without hparams or budget, hparams without batch_size/lr).
        TypeError: The decorated object is not a `Workload` subclass.
    """

    def decorate(cls: type[Workload]) -> type[Workload]:
        if not (isinstance(cls, type) and issubclass(cls, Workload)):
            raise TypeError(f"@register({name!r}) needs a Workload subclass, got {cls!r}")
        known = _WORKLOADS.get(name)
        same = known is not None and (known.__module__, known.__qualname__) == (
            cls.__module__,
            cls.__qualname__,
        )
        if known is not None and not same:
            raise ValueError(f"workload name {name!r} is already registered by {known!r}")
        _check_declarations(name, cls)
        cls.name = name
        _WORKLOADS[name] = cls
        return cls

    return decorate


def discover(package: str = WORKLOAD_PACKAGE) -> None:
    """Import every module of ``package`` so that their ``@register`` decorators run."""
    pkg = importlib.import_module(package)
    for module in pkgutil.iter_modules(pkg.__path__):
        importlib.import_module(f"{package}.{module.name}")


def names() -> list[str]:
    """Sorted names of all registered workloads (after discovering `WORKLOAD_PACKAGE`)."""
    discover()
    return sorted(_WORKLOADS)


def get(name: str) -> type[Workload]:
    """The workload class registered as ``name``.

    Raises:
        ValueError: No such workload; the message lists the registered names.
    """
    known = names()
    if name not in _WORKLOADS:
        raise ValueError(f"workload={name!r} is not registered; valid: {', '.join(known)}")
    return _WORKLOADS[name]
