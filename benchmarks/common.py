"""Helpers shared by the benchmarks: atomic CSV output and a plain-text table."""

from __future__ import annotations

import csv
import os
import platform
import tempfile
from collections.abc import Sequence
from pathlib import Path

__all__ = ["machine_note", "print_table", "write_csv"]


def write_csv(rows: Sequence[dict], path: str | Path) -> None:
    """Write ``rows`` (dicts with the same keys) to ``path`` atomically: a killed run leaves
    the previous file or none, never half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o644)  # mkstemp makes it owner-only; results are for reading
        with os.fdopen(fd, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
