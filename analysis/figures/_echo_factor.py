"""What the two echo-factor figures (``fresh_vs_echo_factor``, ``wall_time_vs_echo_factor``)
share: axis labels, the factors drawn and the ideal lines."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from analysis.figures._common import RELATIVE_COLUMNS, one_config_each

__all__ = ["FACTOR_LABEL", "FRESH_LABEL", "factors", "ideal"]

FRESH_LABEL = "fresh examples to target\n(\u00d7 baseline median)"
FACTOR_LABEL = "echo factor e (repeats per example)"


def factors(summary: pd.DataFrame, max_factor: float, notes: list[str]) -> pd.DataFrame:
    """One configuration per workload, setting, point and factor up to ``max_factor``;
    what is left out is noted."""
    keep = summary["echo_factor"] <= max_factor
    if not keep.all():
        notes.append(f"Echo factors above {max_factor:g} are not drawn.")
    return one_config_each(summary[keep], list(RELATIVE_COLUMNS), notes)


def ideal(axes: Axes, top: float, floor: float | None = None) -> None:
    """The ideal 1/e dashed up to factor ``top``; with ``floor`` (a measured R), the ideal
    wall time max(1/e, 1/R) dotted instead."""
    grid = np.geomspace(1, top, 64)
    if floor is None:
        axes.plot(grid, 1 / grid, "k--", linewidth=1, label="ideal (1/e)")
    else:
        bound = np.maximum(1 / grid, 1 / floor)
        axes.plot(grid, bound, "k:", linewidth=1.2, label="ideal wall time max(1/e, 1/R)")
