"""Workload registry: ``@register("name")`` on a class, discovery of ``experiments/workloads/``.

Adding a workload is one new module in ``experiments/workloads/`` (found by `discover`) and
one entry under ``workloads:`` in ``config/config.yaml``; nothing else is edited. A module
that fails to import or declares its workload wrongly is set aside with one line naming the
file and the problem (`broken`); the other workloads keep working.

`declared_names` reads the names from the modules' source without importing them (no torch),
for the Snakefile's config check.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import pkgutil
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from run_contract.identity import SCALES, Defaults

if TYPE_CHECKING:
    from experiments.workload import Workload

__all__ = [
    "WORKLOAD_PACKAGE",
    "broken",
    "declared_names",
    "defaults",
    "discover",
    "get",
    "names",
    "register",
]

WORKLOAD_PACKAGE = "experiments.workloads"

_WORKLOADS: dict[str, type[Workload]] = {}
_BROKEN: dict[str, str] = {}  # module name -> "FILE: what is wrong"


def _check_declarations(name: str, cls: type[Workload]) -> None:
    if not cls.targets:
        raise ValueError(f"workload {name!r} declares no targets")
    for scale in cls.targets:
        if scale not in SCALES:
            raise ValueError(f"workload {name!r}: scale {scale!r} is not one of {SCALES}")
        for table in ("default_hparams", "budgets"):
            if scale not in getattr(cls, table):
                raise ValueError(f"workload {name!r}: {table} has no entry for scale {scale!r}")
        missing = {"batch_size", "lr"} - set(cls.default_hparams[scale])
        if missing:
            raise ValueError(
                f"workload {name!r}: default_hparams[{scale!r}] lacks {sorted(missing)}"
            )
        revision = cls.revision
        if not isinstance(revision, int) or isinstance(revision, bool) or revision < 1:
            raise ValueError(
                f"workload {name!r}: revision must be an integer >= 1, got {revision!r}"
            )
        try:
            if scale in cls.search_spaces:
                cls.search_spaces[scale].check_default(cls.default_hparams[scale])
        except ValueError as error:
            raise ValueError(f"workload {name!r}: search_spaces[{scale!r}]: {error}") from None


def register(name: str) -> Callable[[type[Workload]], type[Workload]]:
    """Class decorator that registers a `Workload` subclass under ``name``.

    Args:
        name: The workload's name on the command line, in config and in records.

    Raises:
        ValueError: ``name`` is taken by another class, or the class's declarations are
            incomplete (a scale without default_hparams or budget, default_hparams without
            batch_size/lr).
        TypeError: The decorated object is not a `Workload` subclass.
    """
    from experiments.workload import Workload

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


def _where(error: BaseException, fallback: str) -> str:
    """``file:line`` of the innermost frame of ``error`` in a workload module, else ``fallback``."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if "workloads" in f.filename]
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else fallback


def discover(package: str = WORKLOAD_PACKAGE) -> None:
    """Import every module of ``package`` so that their ``@register`` decorators run.

    A module that raises is recorded in `broken` (one line: file, error) and skipped, and a
    warning line is printed once on stderr; the others still register.
    """
    pkg = importlib.import_module(package)
    for module in pkgutil.iter_modules(pkg.__path__):
        qualified = f"{package}.{module.name}"
        if qualified in _BROKEN or qualified in sys.modules:
            continue
        try:
            importlib.import_module(qualified)
        except Exception as error:  # a user's module: any error sets it aside, named
            path = str(Path(pkg.__path__[0], f"{module.name}.py"))
            sys.modules.pop(qualified, None)
            _BROKEN[qualified] = f"{_where(error, path)}: {type(error).__name__}: {error}"
            print(f"warning: workload module skipped: {_BROKEN[qualified]}", file=sys.stderr)


def broken() -> dict[str, str]:
    """Workload modules that failed to import: module name -> ``"FILE:LINE: error"``."""
    discover()
    return dict(_BROKEN)


def names() -> list[str]:
    """Sorted names of all registered workloads (after discovering `WORKLOAD_PACKAGE`)."""
    discover()
    return sorted(_WORKLOADS)


def get(name: str) -> type[Workload]:
    """The workload class registered as ``name``.

    Raises:
        ValueError: No such workload (the message lists the registered names), or its
            module is broken (the message names the file and the error).
    """
    known = names()
    if name not in _WORKLOADS:
        module = next((m for m in _BROKEN if m.rsplit(".", 1)[-1] == name), None)
        if module is not None:
            raise ValueError(f"workload {name!r} is broken: {_BROKEN[module]}")
        raise ValueError(f"workload={name!r} is not registered; valid: {', '.join(known)}")
    return _WORKLOADS[name]


def defaults(name: str, scale: str) -> Defaults:
    """What workload ``name`` declares at ``scale``: hyper-parameters, budget, search space.

    Raises:
        ValueError: An unknown workload, or a scale it does not declare.
    """
    cls = get(name)
    if scale not in cls.targets:
        raise ValueError(f"{name} has no {scale!r} scale; valid: {', '.join(cls.targets)}")
    budget = cls.budgets[scale]
    return Defaults(
        cls.default_hparams[scale],
        budget.max_fresh,
        budget.eval_every_fresh,
        budget.reference_fresh,
        cls.search_spaces.get(scale),
        cls.revision,
    )


def _registered_in(source: str) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            for decorator in node.decorator_list:
                call: Any = decorator
                if (
                    isinstance(call, ast.Call)
                    and getattr(call.func, "id", getattr(call.func, "attr", None)) == "register"
                    and call.args
                    and isinstance(call.args[0], ast.Constant)
                ):
                    names.append(call.args[0].value)
    return names


def declared_names(package: str = WORKLOAD_PACKAGE) -> list[str]:
    """Sorted names the modules of ``package`` register, read from their source (no import).

    A module that does not parse is skipped here; `discover` reports it when it is imported.
    """
    spec = importlib.util.find_spec(package)
    found: list[str] = []
    for folder in spec.submodule_search_locations if spec else []:
        for path in sorted(Path(folder).glob("*.py")):
            try:
                found += _registered_in(path.read_text())
            except SyntaxError:
                continue
    return sorted(found)
