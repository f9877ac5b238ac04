"""Argument checks shared by the shared loader's constructors."""

from __future__ import annotations

__all__ = ["check_int"]


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
