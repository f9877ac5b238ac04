"""Recycled shared-memory segments for a dataset-level producer (`Producer.from_dataset`).

A segment is an anonymous memory file (``memfd_create``): it has no name anywhere, so only
processes handed its descriptor can map it (the producer's workers, and its consumers over
the control socket). Its pages are allocated once (``posix_fallocate``) and it is reused
batch after batch: a worker collates straight into it through a mapping it keeps, and each
consumer keeps its own mapping, so after a segment's first use nobody faults its pages in or
hands the kernel fresh memory again. A segment is reused only after every holder has let
go of the batch in it (`SegmentPool.release`); it grows when a batch needs more room.

A later CUDA path can register each segment's mapping in the producer once as pinned host
memory (``cudaHostRegister``) and copy batches to the GPU from it asynchronously: segments
are few and long-lived, which is what registration needs.
"""

from __future__ import annotations

import mmap
import os
import threading
from dataclasses import dataclass

__all__ = ["Mappings", "Segment", "SegmentPool", "grow"]


def grow(fd: int, size: int) -> int:
    """Make the memory file ``fd`` at least ``size`` bytes (a page multiple), its pages
    allocated now rather than at first touch; its size after."""
    have = os.fstat(fd).st_size
    if size > have:
        size = -(-size // mmap.PAGESIZE) * mmap.PAGESIZE
        os.ftruncate(fd, size)
        os.posix_fallocate(fd, 0, size)
        return size
    return have


@dataclass
class Segment:
    """One recycled segment: its id (as consumers name it), descriptor and size in bytes."""

    sid: int
    fd: int
    size: int


class SegmentPool:
    """The producer's segments: `acquire` a free one (or a new one), `release` it when no one
    holds the batch in it any more. Thread-safe: the loader thread acquires, the serving
    thread releases.

    Args:
        initial_bytes: Size of a new segment before its first batch sizes it. Default 1 MiB.
    """

    def __init__(self, initial_bytes: int = 1 << 20) -> None:
        self.initial_bytes = initial_bytes
        self._lock = threading.Lock()
        self._segments: dict[int, Segment] = {}
        self._free: list[int] = []
        self._closed = False

    def __len__(self) -> int:
        return len(self._segments)

    def __getitem__(self, sid: int) -> Segment:
        return self._segments[sid]

    @property
    def free(self) -> int:
        """Segments no one holds."""
        with self._lock:
            return len(self._free)

    @property
    def nbytes(self) -> int:
        """Bytes of every segment."""
        with self._lock:
            return sum(segment.size for segment in self._segments.values())

    def acquire(self) -> Segment:
        """A segment no one holds: a released one (the most recently used, its pages warm),
        else a new one."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the segment pool is closed")
            if self._free:
                return self._segments[self._free.pop()]
            sid = len(self._segments)
            fd = os.memfd_create(f"sharing-segment-{sid}", os.MFD_CLOEXEC)
            segment = Segment(sid, fd, grow(fd, self.initial_bytes))
            self._segments[sid] = segment
            return segment

    def resized(self, sid: int) -> None:
        """Note that a worker grew segment ``sid``."""
        segment = self._segments[sid]
        segment.size = os.fstat(segment.fd).st_size

    def release(self, sid: int) -> None:
        """Segment ``sid`` may be reused."""
        with self._lock:
            if not self._closed and sid in self._segments and sid not in self._free:
                self._free.append(sid)

    def close(self) -> None:
        """Close every segment's descriptor (its memory goes once no process maps it)."""
        with self._lock:
            self._closed = True
            for segment in self._segments.values():
                os.close(segment.fd)
            self._segments.clear()
            self._free.clear()


class Mappings:
    """This process's writable mapping of each segment it was given (MAP_SHARED), grown and
    remapped when a batch needs more room."""

    def __init__(self) -> None:
        self.fds: dict[int, int] = {}
        self.maps: dict[int, mmap.mmap] = {}

    def give(self, sid: int, fd: int) -> None:
        """Segment ``sid`` is (now) the memory file ``fd``."""
        old = self.fds.pop(sid, None)
        if old is not None and old != fd:
            os.close(old)
        self.maps.pop(sid, None)
        self.fds[sid] = fd

    def buffer(self, sid: int, size: int) -> mmap.mmap:
        """A writable mapping of segment ``sid``, grown to at least ``size`` bytes."""
        fd = self.fds[sid]
        size = grow(fd, size)
        if sid not in self.maps or len(self.maps[sid]) < size:
            # A smaller old mapping is dropped, not closed: views of it may still be alive.
            # Its pages are mapped in one call (MAP_POPULATE), not faulted in one by one.
            self.maps[sid] = mmap.mmap(fd, size, mmap.MAP_SHARED | mmap.MAP_POPULATE)
        return self.maps[sid]
