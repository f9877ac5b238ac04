"""Figure 2: fresh examples to target against the echo factor."""

from __future__ import annotations

from matplotlib.figure import Figure

from analysis.figures import figure
from analysis.figures._common import (
    PAPER_CAPTION,
    RELATIVE_CAPTION,
    RELATIVE_COLUMNS,
    draw_lines,
    log2_axis,
    new_figure,
    panel,
    paper_on,
)
from analysis.figures._echo_factor import FACTOR_LABEL, FRESH_LABEL, factors, ideal
from analysis.figures._sheet import Sheet

__all__ = ["fresh_vs_echo_factor"]


@figure(
    "fresh_vs_echo_factor",
    inputs={"runs": RELATIVE_COLUMNS},
    study="echo_factor",
    caption=(
        "Fresh examples to target relative to the baseline against the echo factor e "
        "(log2 axes, up to 32), one panel per workload and one line per insertion point; "
        "the baseline is the point at e = 1 and the dashed line the ideal 1/e. "
        f"{RELATIVE_CAPTION} {PAPER_CAPTION}"
    ),
)
def fresh_vs_echo_factor(sheet: Sheet, *, max_factor: float = 32.0) -> Figure:
    """Fresh examples to target relative to the baseline against the echo factor.

    One panel per workload, one line per insertion point (median over seeds, min-max bars),
    the baseline as one point at e = 1, and the ideal 1/e dashed.

    Args:
        runs: The runs table (``analysis.records.aggregate``).
        reference: The papers' values (``analysis.reference.load_reference``). Default None.
        study: The study whose runs are drawn. Default "echo_factor".
        max_factor: The largest echo factor drawn. Default 32.0 (the protocol study's e = 32
            before augmentation, where the curve may turn).

    Returns:
        The figure.
    """
    summary = factors(sheet.summary(), max_factor, sheet.notes)
    workloads = sorted(summary["workload"].unique())
    drawing, axes = new_figure(len(workloads))
    for i, workload in enumerate(workloads):
        axis = panel(axes, i)
        rows = summary[summary["workload"] == workload]
        draw_lines(axis, rows, "echo_factor", "fresh_rel")
        ideal(axis, max(max_factor, rows["echo_factor"].max()))
        sheet.place(paper_on(axis, sheet.paper, "echo_factor", workload=workload))
        log2_axis(axis, "x")
        log2_axis(axis, "y")
        axis.set(title=workload, xlabel=FACTOR_LABEL, ylabel=FRESH_LABEL)
    if not workloads:
        sheet.no_data(axes[0, 0])
        axes[0, 0].set(xlabel=FACTOR_LABEL, ylabel=FRESH_LABEL)
    return drawing
