"""CPU seconds of a whole process tree, read from /proc while it runs."""

from __future__ import annotations

import os
import threading

__all__ = ["TreeCpu", "group_members", "stat_fields"]


def stat_fields() -> dict[int, list[bytes]]:
    """Every process now running: pid -> the fields of its /proc/PID/stat after the command
    name (state, ppid, pgrp, ...)."""
    fields = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields[int(entry)] = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
    return fields


def group_members(pgid: int) -> list[int]:
    """The processes now in process group ``pgid``."""
    return [pid for pid, fields in stat_fields().items() if int(fields[2]) == pgid]


class TreeCpu(threading.Thread):
    """Samples the CPU seconds of every process under ``root`` every ``interval_s``.

    Processes that are killed rather than waited for (a loader's workers, say) never reach
    ``RUSAGE_CHILDREN``; sampling sees them. Up to ``interval_s`` of a process's last CPU time
    is missed. Use as a context manager around the work, then read `total`.

    Args:
        root: Pid of the tree's root (included).
        interval_s: Seconds between samples. Default 0.1.
    """

    def __init__(self, root: int, interval_s: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.root, self.interval_s = root, interval_s
        self.cpu: dict[int, float] = {}
        self.parents: dict[int, int] = {}  # of every process seen in the tree
        self._done = threading.Event()
        self._ticks = os.sysconf("SC_CLK_TCK")

    def sample(self) -> None:
        """Record the current CPU seconds of every process in the tree."""
        parents, times = {}, {}
        for pid, fields in stat_fields().items():
            parents[pid] = int(fields[1])
            times[pid] = (int(fields[11]) + int(fields[12])) / self._ticks
        for pid, seconds in times.items():
            ancestor = pid
            while ancestor in parents and ancestor != self.root:
                ancestor = parents[ancestor]
            if ancestor == self.root:
                self.cpu[pid] = max(self.cpu.get(pid, 0.0), seconds)
                self.parents[pid] = parents[pid]

    def run(self) -> None:
        while not self._done.wait(self.interval_s):
            self.sample()

    def __enter__(self) -> TreeCpu:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self.join()

    @property
    def total(self) -> float:
        """CPU seconds of every process seen in the tree."""
        return sum(self.cpu.values())

    def top_ancestor(self, pid: int) -> int:
        """The child of ``root`` that ``pid`` descends from (``root`` for ``root`` itself)."""
        while pid != self.root and self.parents.get(pid, self.root) != self.root:
            pid = self.parents[pid]
        return pid
