"""Figure 1: fresh examples to target per insertion point, at one echo factor."""

from __future__ import annotations

import textwrap

import pandas as pd
from matplotlib.figure import Figure

from analysis.figures import figure
from analysis.figures._common import (
    BASELINE_UNREACHED,
    ECHO_POINTS,
    NOTE_BOX,
    PAPER_CAPTION,
    RELATIVE_CAPTION,
    RELATIVE_COLUMNS,
    echo_style,
    mark_unreached,
    new_figure,
    one_config_each,
    paper_marks,
)
from analysis.figures._sheet import Sheet

__all__ = ["fresh_by_echo_point"]


def _placeable(row: pd.Series, workloads: list[str], slots: list[str], factor: float) -> bool:
    wanted = 1.0 if row["echo_point"] == "none" else factor
    return (
        row["workload"] in workloads
        and row["echo_point"] in slots
        and (pd.isna(row["echo_factor"]) or row["echo_factor"] == wanted)
    )


@figure(
    "fresh_by_echo_point",
    inputs={"runs": RELATIVE_COLUMNS},
    study="insertion",
    caption=(
        "Fresh examples (read from storage) needed to reach the target, relative to the "
        "no-echo baseline, per workload at echo factor e = 2: baseline, batch echoing, and "
        "example echoing after and before augmentation (language models have no "
        "augmentation and show only the points they have). The dashed line is the ideal "
        "1/e = 0.5, where every repeated example is as useful as a fresh one. "
        f"{RELATIVE_CAPTION} {PAPER_CAPTION}"
    ),
)
def fresh_by_echo_point(sheet: Sheet, *, echo_factor: float = 2.0) -> Figure:
    """Fresh examples to target relative to the baseline, per workload and insertion point.

    Bars: median over seeds of each configuration's fresh examples to target divided by the
    median of its baseline; error bars: min and max over seeds. Insertion points a workload
    lacks (language models have no augmentation) are left out and listed under the figure;
    a workload whose baseline never reached the target says so in its place.

    Args:
        runs: The runs table (``analysis.records.aggregate``).
        reference: The papers' values (``analysis.reference.load_reference``). Default None.
        study: The study whose runs are drawn. Default "insertion".
        echo_factor: The echo factor drawn. Default 2.0.

    Returns:
        The figure.
    """
    summary = sheet.summary()
    chosen = summary[(summary["echo_point"] == "none") | (summary["echo_factor"] == echo_factor)]
    chosen = one_config_each(chosen, ["workload", "echo_point"], sheet.notes)
    workloads = sorted(chosen["workload"].unique())
    slots = [point for point in ECHO_POINTS if point in set(chosen["echo_point"])]
    drawing, axes = new_figure(1, size=(max(4.0, 1.8 * len(workloads) + 1.0), 3.6))
    axis = axes[0, 0]
    width = 0.8 / max(len(slots), 1)
    offset = {point: (j - (len(slots) - 1) / 2) * width for j, point in enumerate(slots)}
    for i, workload in enumerate(workloads):
        for point in slots:
            rows = chosen[(chosen["workload"] == workload) & (chosen["echo_point"] == point)]
            if rows.empty:
                sheet.notes.append(f"No runs for {workload} with {point} at e = {echo_factor:g}.")
                continue
            x, median = i + offset[point], rows["fresh_rel_median"].iloc[0]
            style = echo_style(point)
            if pd.notna(median):
                error = [
                    [median - rows["fresh_rel_min"].iloc[0]],
                    [rows["fresh_rel_max"].iloc[0] - median],
                ]
                axis.bar(
                    x,
                    median,
                    width,
                    color=style["color"],
                    label=style["label"],
                    yerr=error,
                    capsize=3,
                    edgecolor="white",
                )
            mark_unreached(axis, [x], rows, "fresh_rel", "black")
        if (chosen.loc[chosen["workload"] == workload, "baseline_reached"] == 0).any():
            axis.text(
                i,
                0.7,
                textwrap.fill(f"{BASELINE_UNREACHED}.", 20),
                transform=axis.get_xaxis_transform(),
                ha="center",
                va="center",
                fontsize=8,
                color="0.35",
                bbox=NOTE_BOX,
            )
    if workloads:
        axis.axhline(
            1 / echo_factor,
            linestyle="--",
            color="black",
            linewidth=1,
            label=f"ideal (1/e = {1 / echo_factor:g})",
        )
    else:
        sheet.no_data(axis)
    if chosen["fresh_rel_median"].isna().any():  # a workload may have no bar: keep its slot
        axis.set_xlim(-0.5, len(workloads) - 0.5)
    placed = pd.Series(
        [_placeable(row, workloads, slots, echo_factor) for _, row in sheet.paper.iterrows()],
        index=sheet.paper.index,
        dtype=bool,
    )
    if placed.any():
        rows = sheet.paper[placed]
        x = [
            workloads.index(w) + offset[p]
            for w, p in zip(rows["workload"], rows["echo_point"], strict=True)
        ]
        paper_marks(axis, rows, x)
    sheet.place(placed)
    axis.set_xticks(range(len(workloads)), workloads, rotation=20, ha="right")
    axis.set(
        xlabel="workload",
        ylabel=f"fresh examples to target\n(\u00d7 baseline median, e = {echo_factor:g})",
        title=f"Where to insert the echo stage (e = {echo_factor:g})",
    )
    return drawing
