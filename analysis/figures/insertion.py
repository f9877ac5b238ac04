"""Figure 1: fresh examples to target per insertion point, at one echo factor."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from analysis.figures._common import (
    ECHO_POINTS,
    echo_style,
    finish,
    mark_unreached,
    new_figure,
    note_on,
    one_config_each,
    paper_marks,
    require,
    study_summary,
)
from analysis.reference import for_figure
from analysis.time_to_target import BASELINE_KEY

__all__ = ["fresh_by_echo_point"]


def _placeable(row: pd.Series, workloads: list[str], slots: list[str], factor: float) -> bool:
    wanted = 1.0 if row["echo_point"] == "none" else factor
    return (
        row["workload"] in workloads
        and row["echo_point"] in slots
        and (pd.isna(row["echo_factor"]) or row["echo_factor"] == wanted)
    )


def fresh_by_echo_point(
    runs: pd.DataFrame,
    reference: pd.DataFrame | None = None,
    *,
    study: str = "insertion",
    echo_factor: float = 2.0,
) -> Figure:
    """Fresh examples to target relative to the baseline, per workload and insertion point.

    Bars: median over seeds of each configuration's fresh examples to target divided by the
    median of its baseline; error bars: min and max over seeds. Insertion points a workload
    lacks (language models have no augmentation) are left out and listed under the figure.

    Args:
        runs: The runs table (``analysis.records.aggregate``).
        reference: The papers' values (``analysis.reference.load_reference``). Default None.
        study: The study whose runs are drawn. Default "insertion".
        echo_factor: The echo factor drawn. Default 2.0.

    Returns:
        The figure.
    """
    require(runs, [*BASELINE_KEY, "echo_point", "echo_factor"], "runs")
    notes: list[str] = []
    summary = study_summary(runs, study)
    chosen = summary[(summary["echo_point"] == "none") | (summary["echo_factor"] == echo_factor)]
    chosen = one_config_each(chosen, ["workload", "echo_point"], notes)
    workloads = sorted(chosen["workload"].unique())
    slots = [point for point in ECHO_POINTS if point in set(chosen["echo_point"])]
    figure, axes = new_figure(1, size=(max(4.0, 1.8 * len(workloads) + 1.0), 3.6))
    axis = axes[0, 0]
    width = 0.8 / max(len(slots), 1)
    offset = {point: (j - (len(slots) - 1) / 2) * width for j, point in enumerate(slots)}
    for i, workload in enumerate(workloads):
        for point in slots:
            rows = chosen[(chosen["workload"] == workload) & (chosen["echo_point"] == point)]
            if rows.empty:
                notes.append(f"No runs for {workload} with {point} at e = {echo_factor:g}.")
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
    if workloads:
        axis.axhline(
            1 / echo_factor,
            linestyle="--",
            color="black",
            linewidth=1,
            label=f"ideal (1/e = {1 / echo_factor:g})",
        )
    else:
        note_on(axis, f"No runs in study {study!r}.")
    paper = for_figure(reference, "fresh_by_echo_point")
    placed = pd.Series(
        [_placeable(row, workloads, slots, echo_factor) for _, row in paper.iterrows()],
        index=paper.index,
        dtype=bool,
    )
    if placed.any():
        rows = paper[placed]
        x = [
            workloads.index(w) + offset[p]
            for w, p in zip(rows["workload"], rows["echo_point"], strict=True)
        ]
        paper_marks(axis, rows, x)
    axis.set_xticks(range(len(workloads)), workloads, rotation=20, ha="right")
    axis.set(
        xlabel="workload",
        ylabel=f"fresh examples to target\n(\u00d7 baseline median, e = {echo_factor:g})",
        title=f"Where to insert the echo stage (e = {echo_factor:g})",
    )
    return finish(figure, notes, paper[~placed])
