"""Closing the producers and consumers a program leaves open: at interpreter exit, while the
code they need to close still runs (``atexit`` comes before modules are torn down), and only
in the process that opened them (a forked child that exits must not make its parent's
consumer leave or unlink its parent's socket)."""

from __future__ import annotations

import atexit
import contextlib
import os
import weakref
from typing import Protocol

__all__ = ["opened", "owns"]


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
