"""Figure 6: echoing does not hurt the quality reached within a fixed fresh-example budget."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from analysis.figures import figure
from analysis.figures._common import (
    ECHO_POINTS,
    PAPER_CAPTION,
    RELATIVE_COLUMNS,
    draw_median,
    echo_style,
    matching,
    new_figure,
    note_on,
    one_config_each,
    panel,
    paper_marks,
)
from analysis.figures._sheet import Sheet
from analysis.time_to_target import relative_to_baseline, summarize

__all__ = ["no_harm"]

_SHORT = {
    "none": "baseline",
    "after_batch": "batch",
    "after_augment": "example\n(after aug.)",
    "before_augment": "example\n(before aug.)",
}
_FRESH_LABEL = "fresh examples read (count)"
_CURVE_COLUMNS = [
    "study", "record", "workload", "echo_point", "echo_factor", "fresh_examples", "metric",
]  # fmt: skip


def _budget_runs(runs: pd.DataFrame, study: str, notes: list[str]) -> pd.DataFrame:
    selected = runs[runs["study"] == study]
    stopped = selected["stop_at_target"].astype(bool)
    if stopped.any() and not stopped.all():
        notes.append(
            f"{int(stopped.sum())} run(s) that stopped at the target are left out: their best "
            "metric is not the best within the budget."
        )
        return selected[~stopped]
    if stopped.any():
        notes.append(
            "Every run stopped at the target (stop_at_target true): the best metric shown is "
            "the one at the stop, not the best within the budget."
        )
    return selected


def _label(row: pd.Series) -> str:
    short = _SHORT.get(row["echo_point"], row["echo_point"])
    return short if row["echo_point"] == "none" else f"{short}\ne = {row['echo_factor']:g}"


def _style(row: pd.Series) -> dict[str, object]:
    style = echo_style(row["echo_point"])
    if row["echo_point"] != "none":
        style["label"] = f"{style['label']}, e = {row['echo_factor']:g}"
    return style


def _median_curve(group: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Seeds' curves interpolated onto every evaluated fresh-example count; each seed counts
    only inside its own range. Returns the grid and the median, min and max there."""
    grid = np.unique(group["fresh_examples"].to_numpy(float))
    stacked = []
    for _, one in group.groupby("record"):
        one = one.sort_values("fresh_examples")
        x, y = one["fresh_examples"].to_numpy(float), one["metric"].to_numpy(float)
        stacked.append(np.interp(grid, x, y, left=np.nan, right=np.nan))
    values = np.vstack(stacked)
    return grid, np.nanmedian(values, 0), np.nanmin(values, 0), np.nanmax(values, 0)


def _curves_panel(axis: Axes, rows: pd.DataFrame, curves: pd.DataFrame) -> None:
    drawn = 0
    for _, row in rows.iterrows():
        group = curves[
            (curves["echo_point"] == row["echo_point"])
            & (curves["echo_factor"] == row["echo_factor"])
        ]
        if group.empty:
            continue
        grid, median, low, high = _median_curve(group)
        style = _style(row)
        line = axis.plot(
            grid,
            median,
            color=style["color"],
            label=style["label"],
            marker=style["marker"],
            markevery=0.2,
            markersize=5,
        )[0]
        if row["echo_point"] != "none" and row["echo_factor"] != rows["echo_factor"].min():
            line.set_linestyle("--")
        axis.fill_between(grid, low, high, color=style["color"], alpha=0.15, linewidth=0)
        drawn += 1
    if not drawn:
        note_on(axis, "No eval curves for these runs.")


@figure(
    "no_harm",
    inputs={"runs": [*RELATIVE_COLUMNS, "best_metric", "record"], "curves": _CURVE_COLUMNS},
    study="no_harm",
    caption=(
        "Top: the best value of the target metric each run reached within its fixed budget "
        "of fresh examples (runs that trained on to the budget instead of stopping at the "
        "target), for the baseline and each echo configuration; median over seeds with "
        "min-max bars; the dashed line is the target, and the axis says whether higher or "
        "lower is better. Bottom: the metric against fresh examples read, median over seeds "
        f"(seeds interpolated onto common points) with the min-max range shaded. {PAPER_CAPTION}"
    ),
)
def no_harm(sheet: Sheet) -> Figure:
    """Best metric reached within the fresh-example budget: baseline vs each echo setting.

    One column per workload. Top: best metric over each run's eval curve (median over
    seeds, min-max bars) per configuration, the target dashed; the axis says whether higher
    or lower is better. Bottom: the metric against fresh examples read (median over seeds,
    shaded min-max). Runs that stopped at the target are left out when the study also has
    runs that trained to the budget (``stop_at_target`` false).

    Args:
        runs: The runs table (``analysis.records.aggregate``).
        curves: The eval-curves table (``analysis.records.aggregate``).
        reference: The papers' values, placed by workload, echo point and factor. Default
            None.
        study: The study whose runs are drawn. Default "no_harm".

    Returns:
        The figure.
    """
    curves, notes = sheet.tables["curves"], sheet.notes
    selected = _budget_runs(sheet.tables["runs"], sheet.study, notes)
    summary = summarize(relative_to_baseline(selected))
    summary = one_config_each(summary, ["workload", "echo_point", "echo_factor"], notes)
    summary = summary.assign(order=summary["echo_point"].map(ECHO_POINTS.index))
    workloads = sorted(summary["workload"].unique())
    drawing, axes = new_figure(len(workloads), rows=2, size=(4.4, 3.0))
    paper = sheet.paper
    for i, workload in enumerate(workloads):
        top, bottom = panel(axes, i, rows=2, row=0), panel(axes, i, rows=2, row=1)
        rows = summary[summary["workload"] == workload].sort_values(["order", "echo_factor"])
        first = rows.iloc[0]
        for x, (_, row) in enumerate(rows.iterrows()):
            style = _style(row)
            draw_median(top, [x], rows.loc[[row.name]], "best_metric", linestyle="none", **style)
        target = f"target {first['target_value']:g}"
        for axis in (top, bottom):
            axis.axhline(
                first["target_value"], color="black", linestyle="--", linewidth=1, label="target"
            )
        top.set_xticks(range(len(rows)), [_label(row) for _, row in rows.iterrows()], fontsize=7)
        better = "higher" if first["target_direction"] == "max" else "lower"
        top.set(
            title=f"{workload}\nbudget: {int(first['max_fresh']):,} fresh examples",
            xlabel="configuration (echo point, factor e)",
            ylabel=f"best {first['target_metric']} in budget\n({better} is better, {target})",
        )
        mine = curves["record"].isin(selected["record"]) & (curves["study"] == sheet.study)
        _curves_panel(bottom, rows, curves[mine & (curves["workload"] == workload)])
        bottom.set(xlabel=_FRESH_LABEL, ylabel=f"{first['target_metric']} (median over seeds)")
        for j, (_, row) in enumerate(rows.iterrows()):
            hits = matching(paper, workload=workload, echo_factor=row["echo_factor"])
            hits &= paper["echo_point"].eq(row["echo_point"])
            if hits.any():
                paper_marks(top, paper[hits], [j] * int(hits.sum()))
                sheet.place(hits)
    if not workloads:
        sheet.no_data(axes[0, 0])
        axes[0, 0].set(xlabel="configuration (echo point, factor e)", ylabel="best metric")
        axes[1, 0].set(xlabel=_FRESH_LABEL, ylabel="metric")
    return drawing
