"""Figure 4: fresh examples to target against batch size."""

from __future__ import annotations

from matplotlib.figure import Figure

from analysis.figures import figure
from analysis.figures._common import PAPER_CAPTION, RELATIVE_CAPTION, RELATIVE_COLUMNS, log2_axis
from analysis.figures._sheet import Sheet
from analysis.figures._sweeps import sweep

__all__ = ["batch_size"]


@figure(
    "batch_size",
    inputs={"runs": RELATIVE_COLUMNS},
    study="batch_size",
    caption=(
        "Fresh examples to target relative to the baseline at the same batch size, against "
        "batch size (log2 axis), one line per insertion point and echo factor, ideal 1/e "
        f"dashed. {RELATIVE_CAPTION} {PAPER_CAPTION}"
    ),
)
def batch_size(sheet: Sheet) -> Figure:
    """Fresh examples to target relative to the baseline against batch size.

    One panel per workload, one line per insertion point and echo factor (median over
    seeds, min-max bars); each batch size is compared with the baseline at that batch size.

    Args:
        runs: The runs table (``analysis.records.aggregate``).
        reference: The papers' values, placed by their ``batch_size``. Default None.
        study: The study whose runs are drawn. Default "batch_size".

    Returns:
        The figure.
    """
    drawing, axes = sweep(sheet, "batch_size", "batch size (examples per step)")
    for axis in axes:
        log2_axis(axis, "x")
    return drawing
