"""Do two runs of the same study agree? Records compared field by field, timing left out.

Training on CPU with a fixed seed and thread count is deterministic, so the same study run
twice (locally and through SLURM, say) must give the same fresh examples, steps and metrics;
only times, versions and the revision may differ.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["TIMING_FIELDS", "comparable", "compare_record_dirs"]

TIMING_FIELDS = ("wall_s_to_target", "timing", "versions", "git_revision", "device")


def comparable(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` without its timing fields (and without ``wall_s`` in curves and totals)."""
    kept = {key: value for key, value in record.items() if key not in TIMING_FIELDS}
    kept["eval_curve"] = [
        {key: value for key, value in row.items() if key != "wall_s"}
        for row in record["eval_curve"]
    ]
    kept["final"] = {key: value for key, value in record["final"].items() if key != "wall_s"}
    return kept


def compare_record_dirs(first: str | Path, second: str | Path) -> list[str]:
    """Differences between the run records under ``first/records`` and ``second/records``.

    Args:
        first: An ``out_dir`` of the workflow (records in ``records/<workload>/*.json``).
        second: Another.

    Returns:
        One line per record present in only one of them or differing outside timing fields
        (naming the fields); empty when they agree.

    Raises:
        ValueError: Neither folder holds a record.
    """
    roots = [Path(first) / "records", Path(second) / "records"]
    names = [{p.relative_to(root) for p in root.rglob("*.json")} for root in roots]
    if not names[0] | names[1]:
        raise ValueError(f"no run records under {roots[0]} or {roots[1]}")
    lines = [f"only in {roots[i]}: {n}" for i in (0, 1) for n in sorted(names[i] - names[1 - i])]
    for name in sorted(names[0] & names[1]):
        a, b = (comparable(json.loads((root / name).read_text())) for root in roots)
        fields = sorted(key for key in a.keys() | b.keys() if a.get(key) != b.get(key))
        if fields:
            lines.append(f"{name}: differs in {', '.join(fields)}")
    return lines
