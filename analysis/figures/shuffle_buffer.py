"""Figure 5: fresh examples to target against the size of the shuffle buffer after echoing."""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from analysis.figures import figure
from analysis.figures._common import PAPER_CAPTION, RELATIVE_CAPTION, RELATIVE_COLUMNS
from analysis.figures._sheet import Sheet
from analysis.figures._sweeps import sweep

__all__ = ["shuffle_buffer"]


@figure(
    "shuffle_buffer",
    inputs={"runs": [*RELATIVE_COLUMNS, "shuffle_buffer"]},
    study="shuffle_buffer",
    caption=(
        "Fresh examples to target relative to the baseline against the size of the shuffle "
        "buffer after the echo stage (symmetric-log axis; 0 keeps an example's copies "
        "adjacent), one line per insertion point and echo factor; the grey line is the "
        f"baseline (1) and the dashed line the ideal 1/e. {RELATIVE_CAPTION} {PAPER_CAPTION}"
    ),
)
def shuffle_buffer(sheet: Sheet) -> Figure:
    """Fresh examples to target relative to the baseline against the echo shuffle buffer.

    One panel per workload, one line per insertion point and echo factor (median over
    seeds, min-max bars) on a symmetric-log x axis so that 0 (no shuffling) shows.

    Args:
        runs: The runs table (``analysis.records.aggregate``).
        reference: The papers' values; placed only if the reference has a
            ``shuffle_buffer`` column. Default None.
        study: The study whose runs are drawn. Default "shuffle_buffer".

    Returns:
        The figure.
    """
    drawing, axes = sweep(
        sheet,
        "shuffle_buffer",
        "shuffle buffer after echo\n(items: examples, or batches for batch echoing)",
    )
    for axis in axes:
        axis.set_xscale("symlog", linthresh=1)
        axis.set_xlim(-0.4, max(2.0, 2 * axis.dataLim.x1))
        axis.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    return drawing
