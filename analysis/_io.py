"""Helpers for the package's files and tables: atomic writes (readers, and an interrupted
workflow, never see half a file) and the check that a table has the columns it needs.

Every file the package writes (tables, summaries, figures) goes through `atomic_write`, and
so gets the mode of any file the user creates: ``0o666`` less the umask (0644 under the
usual 022), readable by the other users of a shared cluster file system unless the umask
says otherwise."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable, Iterable
from pathlib import Path

import pandas as pd

__all__ = ["atomic_write", "require_columns"]


def atomic_write(path: str | os.PathLike[str], write: Callable[[Path], object]) -> Path:
    """Write ``path`` through a temporary file in its folder, then rename it into place.

    The temporary file is created with mode ``0o666`` less the umask, as ``open()`` would
    create ``path`` (``tempfile.mkstemp`` would make it owner-only, 0600), and the rename
    keeps that mode.

    Args:
        path: The file to write; its folder is created if missing.
        write: Called with the temporary file's path; writes the whole content there.

    Returns:
        ``path`` as a ``Path``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.parent / f".{path.name}.{secrets.token_hex(8)}.tmp"
    os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    try:
        write(temporary)
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
