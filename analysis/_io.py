"""Helpers for the package's files and tables: atomic writes (readers, and an interrupted
workflow, never see half a file) and the check that a table has the columns it needs."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

import pandas as pd

__all__ = ["atomic_write", "require_columns"]


def atomic_write(path: str | os.PathLike[str], write: Callable[[Path], object]) -> Path:
    """Write ``path`` through a temporary file in its folder, then rename it into place.

    Args:
        path: The file to write; its folder is created if missing.
        write: Called with the temporary file's path; writes the whole content there.

    Returns:
        ``path`` as a ``Path``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(handle)
    try:
        write(Path(temporary))
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temporary)
        raise
    return path


def require_columns(
    table: pd.DataFrame, columns: Iterable[str], what: str, *, hint: str = ""
) -> None:
    """Raise ValueError when ``table`` lacks one of ``columns``.

    Args:
        table: The table.
        columns: The columns it needs.
        what: Names the table in the message (an argument, a file).
        hint: Appended to the message. Default: nothing.

    Raises:
        ValueError: ``"<what> lacks the columns [...]<hint>"``.
    """
    missing = [column for column in columns if column not in table.columns]
    if missing:
        raise ValueError(f"{what} lacks the columns {missing}{hint}")
