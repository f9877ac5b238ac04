"""Where acquired third-party data (and what is derived from it) is cached, and the one way a
cache entry is made: built privately, published whole, never deleted.

Several processes may fill the same cache at once (two workflows started on a new machine,
SLURM jobs sharing a home folder). Each builds in a temporary folder of its own, next to the
entry, and publishes the result with one atomic rename, or a hard link for a file, neither of
which replaces what is there: the first complete build wins and the others discard theirs. A
complete entry is never removed or rebuilt, so its readers never see it go away.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from experiments.data import MissingDataError

__all__ = ["CACHE_ENV", "build_once", "cache_dir"]

CACHE_ENV = "ECHO_SHARE_CACHE"

_NO_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS}
"""What ``os.link`` raises where a file system has no hard links (FAT, some FUSE and SMB)."""


def cache_dir(data_dir: str | Path | None = None) -> Path:
    """The cache folder: ``data_dir`` when given, else ``$ECHO_SHARE_CACHE``, else
    ``~/.cache/echo-share-suite``. Created when missing."""
    if data_dir is not None:
        path = Path(data_dir)
    else:
        path = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "echo-share-suite")
    path.mkdir(parents=True, exist_ok=True)
    return path


def _empty_folder(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink() and not any(path.iterdir())


def _publish(built: Path, dest: Path) -> None:
    """Move ``built`` to ``dest`` unless something is there (an empty folder may be replaced)."""
    if built.is_dir():
        try:
            os.rename(built, dest)  # refused onto a file or a folder that is not empty
        except OSError as error:
            if error.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR):
                raise
        return
    try:
        os.link(built, dest)  # refused when dest exists, unlike a rename
    except FileExistsError:
        pass
    except OSError as error:
        if error.errno not in _NO_LINKS:
            raise
        if not os.path.lexists(dest):  # two complete copies may race here; either will do
            os.replace(built, dest)


def build_once(
    dest: str | os.PathLike[str],
    build: Callable[[Path], object],
    complete: Callable[[Path], bool],
) -> Path:
    """The cache entry ``dest`` (a file or a folder), built by ``build`` unless already there.

    ``build`` runs in a new temporary folder next to ``dest`` (``.<name>.tmp-<random>``, of
    this process alone), removed when it fails. Its result is published by one atomic rename
    (a hard link for a file) that never replaces an entry: when another process published a
    complete ``dest`` meanwhile, that one is kept and returned, and this build discarded. A
    complete ``dest`` is never deleted, and neither are the temporary folders of other
    builders (a killed build leaves its own behind, under a name no other builder uses).

    Args:
        dest: The entry's path; its folder is created if missing.
        build: Called with the path to create (``<temporary folder>/<name of dest>``, not yet
            existing); makes the whole entry there, a folder or a file.
        complete: Whether a path holds a complete entry (e.g. a marker file is there, or a
            checksum matches); called on ``dest`` and on the build before it is published.

    Returns:
        ``dest`` as a ``Path``, complete.

    Raises:
        MissingDataError: ``dest`` exists but is not complete (not an empty folder): left as
            it is, never deleted; the message says to delete it.
        RuntimeError: ``build`` returned without making a complete entry.
        Exception: Whatever ``build`` raised.
    """
    dest = Path(dest)
    if complete(dest):
        return dest
    if os.path.lexists(dest) and not _empty_folder(dest):
        raise MissingDataError(f"{dest} exists but is not complete; delete it to rebuild it")
    dest.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.tmp-"))
    try:
        built = scratch / dest.name
        build(built)
        if not complete(built):
            raise RuntimeError(f"the build of {dest} returned, but what it made is not complete")
        _publish(built, dest)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)  # empty, or the build that lost
    if not complete(dest):
        raise MissingDataError(f"{dest} exists but is not complete; delete it to rebuild it")
    return dest
