"""The one atomic file writer of the project (records, tables, figures, benchmark CSVs).

A file is written through a temporary file in its folder, flushed to disk and renamed into
place, so a reader, or a run that was killed, never leaves or sees half a file. It gets the
mode of any file the user creates, ``0o666`` less the umask (0644 under the usual 022),
readable by the other users of a shared cluster file system unless the umask says otherwise.
This module imports nothing heavy: the analysis package writes through it too.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable
from pathlib import Path

__all__ = ["atomic_write"]


def atomic_write(path: str | os.PathLike[str], write: Callable[[Path], object]) -> Path:
    """Write ``path`` through a temporary file in its folder, then rename it into place.

    The temporary file is created with mode ``0o666`` less the umask, as ``open()`` would
    create ``path`` (``tempfile.mkstemp`` would make it owner-only, 0600), synced to disk, and
    the rename keeps that mode.

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
        fd = os.open(temporary, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temporary)
        raise
    return path
