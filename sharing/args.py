"""Argument checks shared by the shared loader's constructors."""

from __future__ import annotations

__all__ = ["check_int"]


def check_int(name: str, value: object, low: int, *, allow_none: bool = False) -> None:
    """Raise a `ValueError` naming ``name`` unless ``value`` is an int >= ``low`` (or None
    when ``allow_none``)."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        valid = f"an integer >= {low}" + (" or None" if allow_none else "")
        raise ValueError(f"{name} must be {valid}, got {value!r}")
