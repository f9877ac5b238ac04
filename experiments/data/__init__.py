"""Readers of the workloads' data sources, and the error raised when one is missing."""

from __future__ import annotations

__all__ = ["MissingDataError"]


class MissingDataError(FileNotFoundError):
    """A data source is not installed or not where it was looked for; the message says the
    one command (or the folder layout) that provides it."""
