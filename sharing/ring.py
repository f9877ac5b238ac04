"""The ring of fixed-size batch slots in one anonymous shared-memory file (memfd).

The file has no name in /dev/shm or anywhere else: consumers receive its descriptor over the
control socket (SCM_RIGHTS) and the kernel frees it when the last process unmaps it, so
nothing is ever left behind, not even after SIGKILL.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from dataclasses import dataclass, field

__all__ = ["Ring", "Slot"]


@dataclass
class Slot:
    """One slot's use: which batch it holds and who still needs it."""

    seq: int | None = None
    refs: set[int] = field(default_factory=set)
    retained: bool = False

    @property
    def free(self) -> bool:
        return not self.refs and not self.retained


class Ring:
    """``slots`` slots of ``slot_bytes`` each in a memfd mapped read-write by the producer."""

    def __init__(self, slots: int, slot_bytes: int) -> None:
        if slots < 1 or slot_bytes < 1:
            raise ValueError(
                f"ring needs slots >= 1 and slot_bytes >= 1, got {slots}, {slot_bytes}"
            )
        self.slot_bytes = slot_bytes
        self.slots = [Slot() for _ in range(slots)]
        self.fd = os.memfd_create("sharing-ring", os.MFD_CLOEXEC)
        try:
            os.ftruncate(self.fd, slots * slot_bytes)
            self.buffer = mmap.mmap(self.fd, slots * slot_bytes)
        except BaseException:
            os.close(self.fd)
            raise

    def offset(self, index: int) -> int:
        """Byte offset of slot ``index``."""
        return index * self.slot_bytes

    def free_slot(self) -> int | None:
        """Index of a free slot, or None."""
        for index, slot in enumerate(self.slots):
            if slot.free:
                return index
        return None

    @property
    def occupied(self) -> int:
        """Slots in use."""
        return sum(not slot.free for slot in self.slots)

    def close(self) -> None:
        """Unmap and close (consumers' mappings stay valid)."""
        with contextlib.suppress(BufferError):  # a live tensor view keeps the mapping
            self.buffer.close()
        os.close(self.fd)
