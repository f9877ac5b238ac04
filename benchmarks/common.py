"""Helpers shared by the benchmarks: atomic CSV output and a plain-text table."""

from __future__ import annotations

import csv
import os
import platform
import time
from collections.abc import Sequence
from pathlib import Path

from experiments.files import atomic_write

__all__ = ["finish_trial", "machine_note", "print_table", "write_csv"]


def write_csv(rows: Sequence[dict], path: str | Path) -> None:
    """Write ``rows`` (dicts with the same keys) to ``path`` atomically: a killed run leaves
    the previous file or none, never half a file (`experiments.files.atomic_write`)."""

    def dump(temporary: Path) -> None:
        with temporary.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)

    atomic_write(path, dump)


def print_table(rows: Sequence[dict], columns: Sequence[str]) -> None:
    """Print ``columns`` of ``rows`` as an aligned table (floats with 3 significant digits)."""

    def cell(value: object) -> str:
        return f"{value:.3g}" if isinstance(value, float) else str(value)

    cells = [[cell(row[c]) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    print("  ".join(c.rjust(w) for c, w in zip(columns, widths, strict=True)))
    for r in cells:
        print("  ".join(v.rjust(w) for v, w in zip(r, widths, strict=True)))


def machine_note() -> str:
    """One line naming the machine a result was measured on."""
    return f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"


def finish_trial(processes: Sequence, helpers: Sequence, timeout_s: float) -> None:
    """Wait for a trial's ``processes`` (``multiprocessing.Process``) for ``timeout_s`` in all,
    killing any still running then; then stop its ``helpers`` (a producer, a server):
    SIGTERM, and SIGKILL for one still alive 10 s later."""
    deadline = time.monotonic() + timeout_s
    for process in processes:
        process.join(max(0.1, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join()
    for helper in helpers:
        helper.terminate()
        helper.join(10)
        if helper.is_alive():
            helper.kill()
            helper.join()
