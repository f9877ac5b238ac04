"""A loader's batches copied into recycled segments as they arrive (`SegmentCopier`), so that
nothing the producer holds for its consumers sits in /dev/shm.

A DataLoader worker puts each batch it makes in a /dev/shm file (unlinked, but counted
against that tmpfs until freed), and a tensor made in the producer's own process would be
moved there to be shared. Containers often give /dev/shm 64 MB. The producer's loader thread
copies each batch into a memfd segment of its pool (`sharing.segments`) the moment it
arrives and lets the loader's memory go, so the loader needs no more /dev/shm under a
producer than it does alone, however many batches the consumers' window holds. The copy is
one pass over the batch's bytes (measured: `SegmentCopier.seconds`); in return, consumers
keep each segment mapped, as for `Producer.from_dataset`, instead of mapping fresh memory for
every batch. Where a batch cannot fit even once, `out_of_shm` says so.

A DataLoader given to the producer itself is not copied: its workers collate straight into
the pool's segments (`sharing.lending`), so neither /dev/shm nor the copy is needed. The
copy remains for every other loader, e.g. a DataLoader inside an iterable of one's own, and
for a DataLoader whose persistent workers were started before the producer.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from torch.utils.data import DataLoader

from sharing.collate import copy_into
from sharing.lending import Lent, SegmentLender
from sharing.pooled import PooledBatch, into_segment
from sharing.segments import Mappings, SegmentPool

__all__ = ["SHM", "SegmentCopier", "out_of_shm"]

SHM = "/dev/shm"
"""Where torch puts the memory a DataLoader worker shares its batches through."""


class SegmentCopier:
    """Copies batches into the segments of its own pool (from one thread at a time).

    Args:
        loader: The loader whose batches are copied. A DataLoader's workers collate straight
            into the pool's segments instead (`sharing.lending`), while this copier is open.
            Default None.

    Attributes:
        pool: The segments; a batch's segment goes back to it once nobody holds the batch.
        lender: Lends ``loader``'s workers the segments, if ``loader`` is a DataLoader.
        seconds: Time spent copying so far.
        copied: Batches copied so far.
    """

    def __init__(self, loader: Any = None) -> None:
        self.pool = SegmentPool()
        self.seconds = 0.0
        self.copied = 0
        self._mapped = Mappings()
        self.lender = None
        if isinstance(loader, DataLoader):
            self.lender = SegmentLender(self.pool)
            self.lender.wrap(loader)

    def lock(self) -> Any:
        """The lock under which the loader's iterations start (`SegmentLender.iteration_lock`)."""
        return self.lender.iteration_lock() if self.lender else threading.Lock()

    def copy(self, batch: Any) -> PooledBatch | Any:
        """``batch`` in a segment: the one a worker collated it into (`sharing.lending.Lent`),
        else copied into one; as it is if it holds a CUDA tensor (shared over CUDA IPC) or a
        leaf that cannot be shared (which `sharing.layout.describe` names)."""
        if isinstance(batch, Lent):
            return self.lender.adopt(batch)
        start = time.perf_counter()
        try:
            pooled = into_segment(self.pool, self._mapped, lambda out: copy_into(batch, out))
        except TypeError:
            return batch
        self.seconds += time.perf_counter() - start
        self.copied += 1
        return pooled

    def metrics(self) -> dict[str, Any]:
        """``batches_copied`` and ``copy_s``, and ``batches_lent`` (collated by the
        loader's workers into the pool's segments) for a DataLoader."""
        metrics: dict[str, Any] = {"batches_copied": self.copied, "copy_s": self.seconds}
        if self.lender is not None:
            metrics["batches_lent"] = self.lender.lent
        return metrics

    def drop(self, batch: Any) -> None:
        """Let go of a batch the loader yielded that will not be served."""
        if self.lender is not None:
            self.lender.drop(batch)

    def close(self) -> None:
        """Stop lending, release every segment (consumers keep what they have mapped)."""
        if self.lender is not None:
            self.lender.close()
        self._mapped = Mappings()
        self.pool.close()


def out_of_shm(error: BaseException) -> BaseException:
    """``error``, or, if it says that the loader ran out of /dev/shm, an error that names
    /dev/shm's size and the fixes (caused by ``error``).

    Args:
        error (BaseException): What the loader raised.

    Returns:
        BaseException: The error to raise.
    """
    text = str(error)
    if "No space left on device" not in text or "shm" not in text:
        return error
    stat = os.statvfs(SHM)
    size = stat.f_blocks * stat.f_frsize / 2**20
    explained = RuntimeError(
        f"the loader ran out of shared memory: {SHM} holds {size:.0f} MiB in all, and a "
        f"DataLoader worker puts each batch it makes there until the producer has copied it "
        f"out (so up to num_workers x prefetch_factor batches at once, as without a "
        f"producer). Give {SHM} more room (docker run --shm-size=2g; on Kubernetes, an "
        f"emptyDir with medium: Memory mounted at {SHM}), or serve the DataLoader itself, "
        f"Producer(DataLoader(...)), or Producer.from_dataset(dataset, ...): their workers "
        f"collate into the producer's segments, not {SHM}; or make "
        f"fewer batches in flight (num_workers, prefetch_factor) or smaller ones "
        f"(batch_size). The loader said: {text.strip().splitlines()[-1]}"
    )
    explained.__cause__ = error
    return explained
