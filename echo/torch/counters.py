"""Echo-stage counters that stay exact when the stage runs in DataLoader worker processes."""

from __future__ import annotations

import numpy as np
import torch

from echo.core import EchoCounts

__all__ = ["MAX_WORKERS", "WorkerCountTable"]

MAX_WORKERS = 256
"""Most DataLoader workers one stage can count (one shared-memory row each)."""


class _SharedRow:
    """`EchoCounts` look-alike whose fields live in one row of a shared-memory table."""

    __slots__ = ("_row",)

    def __init__(self, row: np.ndarray) -> None:
        self._row = row

    @property
    def fresh(self) -> int:
        return int(self._row[0])

    @fresh.setter
    def fresh(self, value: int) -> None:
        self._row[0] = value

    @property
    def emitted(self) -> int:
        return int(self._row[1])

    @emitted.setter
    def emitted(self, value: int) -> None:
        self._row[1] = value


class WorkerCountTable:
    """Per-worker (fresh, emitted) counts in shared memory, one row per worker id.

    The table is a shared-memory tensor, so it reaches worker processes whether they are
    forked or spawned (torch shares the storage when the stage is sent to the worker), and the
    counts accumulate across epochs even when workers are re-created each epoch. Each worker
    writes only its own row, so no lock is needed. torch unlinks the segment at creation:
    nothing is left in /dev/shm.
    """

    def __init__(self) -> None:
        self._table = torch.zeros(MAX_WORKERS, 2, dtype=torch.int64).share_memory_()

    def row(self, worker_id: int) -> _SharedRow:
        """The counts of worker ``worker_id`` (0-based), updated in place.

        Raises:
            ValueError: ``worker_id`` is beyond `MAX_WORKERS`.
        """
        if not 0 <= worker_id < MAX_WORKERS:
            raise ValueError(f"num_workers must be <= {MAX_WORKERS} for echo accounting")
        return _SharedRow(self._table[worker_id].numpy())

    def total(self) -> EchoCounts:
        """Sum of every worker's counts."""
        fresh, emitted = (int(v) for v in self._table.sum(dim=0))
        return EchoCounts(fresh, emitted)

    def reset(self) -> None:
        """Zero every row."""
        self._table.zero_()
