"""A process's end: closing the producers and consumers a program leaves open at interpreter
exit, while the code they need to close still runs (``atexit`` comes before modules are torn
down), and only in the process that opened them (a forked child that exits must not make its
parent's consumer leave or unlink its parent's socket); SIGTERM while serving."""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import threading
import weakref
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["on_sigterm", "opened", "owns"]


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
