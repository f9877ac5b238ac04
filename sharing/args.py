"""Argument checks shared by the shared loader's constructors."""

from __future__ import annotations

import inspect

__all__ = ["check_int", "signature_of_init"]


def signature_of_init(cls: type) -> type:
    """Give ``cls`` its ``__init__``'s signature (without ``self``), which ``inspect`` would
    otherwise take from a ``__new__(cls, *args, **kwargs)`` that picks a backend; returns
    ``cls`` (a class decorator)."""
    init = inspect.signature(cls.__init__)
    cls.__signature__ = init.replace(parameters=list(init.parameters.values())[1:])
    return cls


def check_int(
    value: object, name: str, minimum: int = 0, *, allow_none: bool = False
) -> int | None:
    """Validate an integer argument (a Python int, not bool) and return it.

    It takes `echo.core.check_int`'s arguments, and ``allow_none``: the two libraries import
    nothing of each other, so each keeps its own.

    Args:
        value: The value to check.
        name: Argument name used in the error message.
        minimum: Smallest valid value. Default 0.
        allow_none: Whether None is valid too. Default False.

    Raises:
        ValueError: ``value`` is not an integer (nor None where ``allow_none``) or is below
            ``minimum``.
    """
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        valid = f"an integer >= {minimum}" + (" or None" if allow_none else "")
        raise ValueError(f"{name} must be {valid}, got {value!r}")
    return value
