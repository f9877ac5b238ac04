"""Echo-stage counters and epochs that stay exact when the stage runs in DataLoader workers."""

from __future__ import annotations

import numpy as np
import torch

from echo.core import EchoCounts

__all__ = ["MAX_WORKERS", "WorkerCountTable"]

MAX_WORKERS = 256
"""Most DataLoader workers one stage can count (one shared-memory row each)."""

_FRESH, _EMITTED, _NEXT_EPOCH, _ACTIVE = range(4)  # a worker row's columns
_ROWS_END = MAX_WORKERS * 4  # the header row follows the worker rows in the flat view
_STARTED, _SET_EPOCH = _ROWS_END, _ROWS_END + 1  # some worker took a row; set_epoch's value


class _SharedRow:
    """One worker's row: `EchoCounts` fields plus its next epoch and an in-epoch flag."""

    __slots__ = ("_row",)

    def __init__(self, row: np.ndarray) -> None:
        self._row = row

    @property
    def fresh(self) -> int:
        return int(self._row[_FRESH])

    @fresh.setter
    def fresh(self, value: int) -> None:
        self._row[_FRESH] = value

    @property
    def emitted(self) -> int:
        return int(self._row[_EMITTED])

    @emitted.setter
    def emitted(self, value: int) -> None:
        self._row[_EMITTED] = value

    @property
    def next_epoch(self) -> int:
        """The epoch this worker runs when next iterated."""
        return int(self._row[_NEXT_EPOCH])

    @next_epoch.setter
    def next_epoch(self, value: int) -> None:
        self._row[_NEXT_EPOCH] = value

    @property
    def active(self) -> bool:
        """Whether this worker is inside an epoch it has not finished."""
        return bool(self._row[_ACTIVE])

    @active.setter
    def active(self, value: bool) -> None:
        self._row[_ACTIVE] = int(value)


class WorkerCountTable:
    """Per-worker counts, next epoch and in-epoch flag in shared memory, one row per worker,
    and a header row: whether any worker has taken a row, and the epoch last set for all.

    The table is a shared-memory tensor, so it reaches worker processes whether they are
    forked or spawned (torch shares the storage when the stage is sent to the worker), and the
    counts and epochs carry across epochs even when workers are re-created each epoch: a new
    worker process starts from the epoch its predecessor finished, so epochs advance without
    ``set_epoch`` (and ``set_epoch`` reaches persistent workers too). Each worker writes only
    its own row, so no lock is needed. torch unlinks the segment at creation: nothing is left
    in /dev/shm.
    """

    def __init__(self) -> None:
        self._table = torch.zeros(MAX_WORKERS + 1, 4, dtype=torch.int64).share_memory_()
        self._view = memoryview(self._table.numpy()).cast("B").cast("q")

    def __getstate__(self) -> dict:
        return {"_table": self._table}  # the tensor travels as shared memory; the view is remade

    def __setstate__(self, state: dict) -> None:
        self._table = state["_table"]
        self._view = memoryview(self._table.numpy()).cast("B").cast("q")

    def row(self, worker_id: int) -> _SharedRow:
        """The row of worker ``worker_id`` (0-based), updated in place.

        Raises:
            ValueError: ``worker_id`` is beyond `MAX_WORKERS`.
        """
        if not 0 <= worker_id < MAX_WORKERS:
            raise ValueError(f"num_workers must be <= {MAX_WORKERS} for echo accounting")
        self._view[_STARTED] = 1
        return _SharedRow(self._table[worker_id].numpy())

    # Reads go through a flat memoryview of the shared storage (row-major, 4 per row): a
    # torch or NumPy reduction on this small table costs 60-100 us once its machinery is out
    # of the CPU's caches (after another stage's epoch, say), which a pass-through stage
    # would pay at the start of every epoch; a memoryview's C loop costs a few. Until a worker
    # takes a row (a stage used without workers) the header answers without a scan at all.
    def total(self) -> EchoCounts:
        """Sum of every worker's counts."""
        if not self._view[_STARTED]:
            return EchoCounts(0, 0)
        view = self._view
        return EchoCounts(sum(view[_FRESH:_ROWS_END:4]), sum(view[_EMITTED:_ROWS_END:4]))

    def next_epoch(self) -> int:
        """The latest next epoch of any worker (the epoch last set, 0 by default, before any
        worker ran)."""
        if not self._view[_STARTED]:
            return self._view[_SET_EPOCH]
        return max(self._view[_NEXT_EPOCH:_ROWS_END:4])

    def any_active(self) -> bool:
        """Whether some worker is inside an unfinished epoch."""
        return bool(self._view[_STARTED]) and any(self._view[_ACTIVE:_ROWS_END:4])

    def set_epoch(self, epoch: int) -> None:
        """Make every worker run ``epoch`` when next iterated."""
        self._table[:MAX_WORKERS, _NEXT_EPOCH] = epoch
        self._view[_SET_EPOCH] = epoch

    def reset(self, epoch: int = 0) -> None:
        """Zero every count and flag (no worker has taken a row); every worker runs ``epoch``
        next."""
        self._table.zero_()
        self.set_epoch(epoch)
