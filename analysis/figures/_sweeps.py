"""What the two sweep figures (``batch_size``, ``shuffle_buffer``) share: one panel per
workload of fresh examples to target against the swept column."""

from __future__ import annotations

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from analysis.figures._common import draw_lines, new_figure, one_config_each, panel, paper_on
from analysis.figures._sheet import Sheet

__all__ = ["FRESH_LABEL", "sweep"]

FRESH_LABEL = "fresh examples to target\n(\u00d7 baseline median)"


def _ideal(axis: Axes, factors: list[float]) -> None:
    for factor in factors:
        label = "ideal (1/e)" if len(factors) == 1 else f"ideal (1/e), e = {factor:g}"
        axis.axhline(1 / factor, color="black", linestyle="--", linewidth=1, label=label)


def sweep(sheet: Sheet, x_column: str, xlabel: str) -> tuple[Figure, list[Axes]]:
    """Draw the study's fresh examples to target against ``x_column``, one panel per
    workload and one line per insertion point and echo factor.

    Returns:
        The figure and its drawn panels (for the caller to set the x scale).
    """
    keys = ["workload", "echo_point", "echo_factor", x_column]
    summary = one_config_each(sheet.summary(), keys, sheet.notes)
    workloads = sorted(summary["workload"].unique())
    figure, axes = new_figure(len(workloads))
    drawn = []
    for i, workload in enumerate(workloads):
        axis = panel(axes, i)
        rows = summary[summary["workload"] == workload]
        if x_column == "shuffle_buffer":  # baselines have no echo stage, hence no buffer
            rows = rows[rows["echo_point"] != "none"]
            axis.axhline(1, color="0.45", linewidth=1, label="baseline (no echo)")
        draw_lines(axis, rows, x_column, "fresh_rel", by=("echo_point", "echo_factor"))
        _ideal(axis, sorted(set(rows["echo_factor"]) - {1.0}))
        sheet.place(paper_on(axis, sheet.paper, x_column, workload=workload))
        axis.set(title=workload, xlabel=xlabel, ylabel=FRESH_LABEL)
        drawn.append(axis)
    if not workloads:
        sheet.no_data(axes[0, 0])
        axes[0, 0].set(xlabel=xlabel, ylabel=FRESH_LABEL)
    return figure, drawn
