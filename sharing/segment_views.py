"""A consumer's side of recycled segments (see `sharing.segments`): each segment is mapped
once, copy-on-write, and kept; each batch in it is viewed through a fresh buffer object whose
death (no tensor of the batch is left in this process) is what lets the producer reuse the
segment.

Before the segment goes back, the pages this consumer wrote to (its private copies) are
dropped (``MADV_DONTNEED``), so its next batch in the segment reads the producer's new
data, not what this consumer changed in an earlier one.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import weakref
from collections.abc import Callable

import numpy as np

from sharing.errors import ProtocolError

__all__ = ["SegmentViews"]


class SegmentViews:
    """Mappings of the segments a producer has sent, by segment id.

    Args:
        on_free: Called with a batch's seq once no view of it is left (from whichever
            thread drops the last one).
    """

    def __init__(self, on_free: Callable[[int], None]) -> None:
        self.on_free = on_free
        self._fds: dict[int, int] = {}
        self._maps: dict[int, mmap.mmap] = {}

    def view(self, sid: int, fds: list[int], seq: int) -> np.ndarray:
        """A buffer over segment ``sid`` (whose descriptor comes in ``fds`` the first time)
        for batch ``seq``; `on_free` follows its last reference.

        Raises:
            ProtocolError: No descriptor for a segment never sent, or more than one.
        """
        if len(fds) > 1 or (not fds and sid not in self._fds):
            for fd in fds:
                os.close(fd)
            raise ProtocolError(f"segment {sid} came with {len(fds)} descriptors")
        if fds:
            self._forget(sid)
            self._fds[sid] = fds[0]
        size = os.fstat(self._fds[sid]).st_size
        memory = self._maps.get(sid)
        if memory is None or len(memory) < size:  # new, or grown by the producer
            memory = mmap.mmap(self._fds[sid], size, access=mmap.ACCESS_COPY)
            self._maps[sid] = memory
        buffer = np.frombuffer(memory, dtype=np.uint8)
        done = weakref.finalize(buffer, _release, memory, self.on_free, seq)
        done.atexit = False  # at exit there is no one to tell
        return buffer

    def _forget(self, sid: int) -> None:
        fd = self._fds.pop(sid, None)
        if fd is not None:
            os.close(fd)
        self._maps.pop(sid, None)  # dropped, not closed: live views may still use it

    def close(self) -> None:
        """Close the descriptors (mappings go with their last view)."""
        for sid in list(self._fds):
            self._forget(sid)


def _release(memory: mmap.mmap, on_free: Callable[[int], None], seq: int) -> None:
    with contextlib.suppress(ValueError, OSError):  # closed, or gone at exit
        memory.madvise(mmap.MADV_DONTNEED)
    on_free(seq)
