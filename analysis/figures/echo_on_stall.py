"""Figure 9: EchoOnStall against fixed echo factors, from the ``echo_speedup`` benchmark CSV
(``benchmarks/reference/echo_speedup.csv``)."""

from __future__ import annotations

import numpy as np
import seaborn as sns
from matplotlib.figure import Figure

from analysis.figures import figure
from analysis.figures._common import PAPER_CAPTION, log2_axis, new_figure, paper_on
from analysis.figures._sheet import Sheet

__all__ = ["echo_on_stall"]

_XLABEL = "measured R = upstream / downstream time per batch (ratio)"
_YLABEL = "training steps/s\n(\u00d7 no echo, e = 1)"


@figure(
    "echo_on_stall",
    inputs={"echo_speedup": ["measured_R", "mode", "factor", "speedup_vs_e1"]},
    caption=(
        "Training steps per second relative to no echoing against the measured ratio R of "
        "upstream to downstream time per batch (simulated upstream latency), for batch "
        "echoing with fixed factors and for EchoOnStall, which echoes only while the next "
        "fresh batch is late (up to its maximum factor). Dashed: the ideal min(e, R). "
        f"{PAPER_CAPTION}"
    ),
)
def echo_on_stall(sheet: Sheet) -> Figure:
    """Speedup in steps per second over e = 1 against the measured R, per echo mode.

    One line per fixed echo factor (batch echoing) and one for EchoOnStall (echoes only
    while the upstream is late, up to its maximum factor); each with its ideal
    min(e, R) dashed in the same colour.

    Args:
        echo_speedup: The echo_speedup benchmark table (columns ``measured_R``, ``mode``,
            ``factor``, ``speedup_vs_e1``; ``ideal_speedup`` is used when present, else
            min(factor, R)).
        reference: The papers' values; placed only if the reference has an ``R`` column.
            Default None.

    Returns:
        The figure.
    """
    drawing, axes = new_figure(1, size=(5.5, 3.8))
    axis = axes[0, 0]
    groups = list(sheet.tables["echo_speedup"].groupby(["mode", "factor"], sort=True))
    colors = sns.color_palette("viridis", len(groups))
    for color, ((mode, factor), rows) in zip(colors, groups, strict=True):
        rows = rows.sort_values("measured_R")
        stall = mode == "echo_on_stall"
        label = f"EchoOnStall (max e = {factor:g})" if stall else f"fixed e = {factor:g}"
        label = "no echo (e = 1)" if factor == 1 and not stall else label
        axis.plot(
            rows["measured_R"],
            rows["speedup_vs_e1"],
            marker="D" if stall else "o",
            color="crimson" if stall else color,
            label=label,
            alpha=0.8 if stall else 1,
            linewidth=3 if stall else 1.2,
            zorder=2 if stall else 3,
        )
        if "ideal_speedup" in rows:
            ideal = rows["ideal_speedup"]
        else:
            ideal = np.minimum(factor, rows["measured_R"])
        axis.plot(
            rows["measured_R"],
            ideal,
            linestyle="--",
            alpha=0.5,
            color="crimson" if stall else color,
        )
    if groups:
        axis.plot([], [], "k--", alpha=0.5, label="ideal min(e, R)")
    else:
        sheet.no_data(axis)
    sheet.place(paper_on(axis, sheet.paper, "R"))
    log2_axis(axis, "x")
    axis.set(xlabel=_XLABEL, ylabel=_YLABEL, title="Echoing when the input pipeline stalls")
    return drawing
