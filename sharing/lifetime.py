"""A process's end: closing the producers and consumers a program leaves open at interpreter
exit, while the code they need to close still runs (``atexit`` comes before modules are torn
down), and only in the process that opened them (a forked child that exits must not make its
parent's consumer leave or unlink its parent's socket); SIGTERM while serving; and what a
killed process's workers left behind (`sweep_temp_dirs`)."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import stat
import tempfile
import threading
import weakref
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["on_sigterm", "opened", "owns", "sweep_temp_dirs"]


class _Closable(Protocol):
    def close(self) -> None: ...


_OPEN: weakref.WeakKeyDictionary[_Closable, int] = weakref.WeakKeyDictionary()


def opened(obj: _Closable) -> int:
    """Register ``obj`` to be closed at exit if still open; returns this process's pid."""
    pid = os.getpid()
    _OPEN[obj] = pid
    return pid


def owns(pid: int) -> bool:
    """Whether this process is the one that got ``pid`` from `opened`."""
    return pid == os.getpid()


@atexit.register
def _close_open() -> None:
    for obj, pid in list(_OPEN.items()):
        if owns(pid):
            with contextlib.suppress(Exception):  # exiting: one failure must not stop the rest
                obj.close()


def on_sigterm(callback: Callable[[], None]) -> Callable[[], Any]:
    """Route SIGTERM to ``callback`` (in the main thread only; elsewhere nothing changes);
    returns the function that restores the previous handler."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.getsignal(signal.SIGTERM)

    def handler(signum: int, frame: Any) -> None:
        callback()

    signal.signal(signal.SIGTERM, handler)
    return lambda: signal.signal(signal.SIGTERM, previous)


def sweep_temp_dirs() -> list[str]:
    """Remove the ``pymp-*`` folders that processes killed with SIGKILL left in the temp
    folder; the paths removed.

    A DataLoader worker that passes a batch's descriptor makes one (multiprocessing's
    resource sharer listens on a ``listener-*`` socket in it) and removes it when it exits in
    order; killed, it leaves it. Only folders of this user are swept, holding nothing but
    ``listener-*`` socket files, at least one, none of them bound by a live socket (none is
    in /proc/net/unix): a live process's folder is never touched.
    """
    temp, swept = tempfile.gettempdir(), []
    folders = [os.path.join(temp, n) for n in os.listdir(temp) if n.startswith("pymp-")]
    if not folders:
        return swept
    with open("/proc/net/unix", encoding="utf-8", errors="replace") as table:
        bound = {line.split()[-1] for line in table if len(line.split()) == 8}
    for folder in folders:
        if _left_by_the_dead(folder, bound):
            shutil.rmtree(folder, ignore_errors=True)
            swept.append(folder)
    return swept


def _left_by_the_dead(folder: str, bound: set[str]) -> bool:
    """Whether ``folder`` is this user's and holds only unbound ``listener-*`` sockets."""
    try:
        info = os.lstat(folder)
        if info.st_uid != os.getuid() or not stat.S_ISDIR(info.st_mode):
            return False
        paths = [os.path.join(folder, name) for name in os.listdir(folder)]
        return bool(paths) and all(
            os.path.basename(path).startswith("listener-")
            and stat.S_ISSOCK(os.lstat(path).st_mode)
            and path not in bound
            for path in paths
        )
    except OSError:
        return False
