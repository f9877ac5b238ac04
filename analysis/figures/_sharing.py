"""What the two shared-loading figures (``sharing_throughput``, ``sharing_cpu``) share: one
column per benchmark workload of a value per loading mode against consumers, drawn from the
``shared_loading`` benchmark CSV (``benchmarks/reference/shared_loading.csv``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from analysis.figures._common import log2_axis, new_figure, panel, paper_on, plain_log
from analysis.figures._sheet import Sheet

__all__ = ["COLUMNS", "draw_sharing"]

COLUMNS = ["workload", "mode", "consumers", "consumers_finished"]
"""Columns of the sharing table both figures need, besides the drawn one."""

_MODES = ("own", "shared", "tensorsocket", "tfdata_service")
_LABELS = {
    "own": "own loader per consumer (independent)",
    "shared": "shared loader (sharing.Producer)",
    "tensorsocket": "TensorSocket",
    "tfdata_service": "tf.data service",
}
_COLORS = dict(zip(_MODES, sns.color_palette("dark", 4), strict=True))
_MARKERS = dict(zip(_MODES, "osD^", strict=True))
_RELATIVE_UNITS = {"", "x", "\u00d7", "ratio", "relative", "fraction"}
_UNFINISHED = "did not finish (hollow)"


def _is_relative(paper: pd.DataFrame) -> pd.Series:
    unit = paper["unit"].str.strip().str.lower()
    named = paper["quantity"].str.contains("relative|ratio|_vs_| vs ", case=False)
    return unit.isin(_RELATIVE_UNITS) | named


def _mode_lines(axis: Axes, table: pd.DataFrame, column: str) -> None:
    """One line per mode through the finished trials; unfinished ones hollow, at the
    bottom of the axis (with a note) when they have no positive value."""
    modes = [m for m in _MODES if m in set(table["mode"])]
    modes += sorted(set(table["mode"]) - set(modes))
    stranded = []
    for mode in modes:
        rows = table[table["mode"] == mode].sort_values("consumers")
        style = {"color": _COLORS.get(mode, "black"), "marker": _MARKERS.get(mode, "v")}
        done = rows[~rows["unfinished"]]
        axis.plot(done["consumers"], done[column], label=_LABELS.get(mode, mode), **style)
        for _, row in rows[rows["unfinished"]].iterrows():
            if np.isfinite(row[column]) and row[column] > 0:
                axis.plot(row["consumers"], row[column], markerfacecolor="none", **style)
                axis.annotate(
                    "did not finish",
                    (row["consumers"], row[column]),
                    fontsize=7,
                    xytext=(-6, 0),
                    textcoords="offset points",
                    ha="right",
                )
            else:
                stranded.append((row["consumers"], style))
    bottom = axis.get_ylim()[0]
    axis.set_ylim(bottom, axis.get_ylim()[1])
    for consumers, style in stranded:
        axis.plot(consumers, bottom, markerfacecolor="none", clip_on=False, **style)
        axis.annotate(
            "did not finish",
            (consumers, bottom),
            fontsize=7,
            xytext=(-6, 2),
            textcoords="offset points",
            ha="right",
            color=style["color"],
        )
    if (table["unfinished"]).any():
        axis.plot(
            [],
            [],
            marker="o",
            markerfacecolor="none",
            color="0.3",
            linestyle="none",
            label=_UNFINISHED,
        )


def draw_sharing(sheet: Sheet, value: pd.Series, labels: tuple[str, str]) -> Figure:
    """Draw ``value`` (one per row of the sharing table) against consumers, one line per
    mode: top the value, bottom relative to "own" loaders at the same consumers.

    Args:
        sheet: The figure's sheet (its ``sharing`` table).
        value: The drawn quantity, indexed like the table.
        labels: The y labels of the top and bottom panels.
    """
    sharing = sheet.tables["sharing"]
    table = sharing.assign(
        value=value, unfinished=sharing["consumers_finished"] < sharing["consumers"]
    )
    own = table[table["mode"] == "own"].groupby(["workload", "consumers"])["value"].median()
    table = table.merge(own.rename("own"), on=["workload", "consumers"], how="left")
    table["relative"] = table["value"] / table["own"]
    if table["own"].isna().any():
        sheet.notes.append(
            "Relative values need the 'own' trial with the same consumers; missing for some trials."
        )
    workloads = list(dict.fromkeys(table["workload"]))
    figure, axes = new_figure(len(workloads), rows=2, size=(4.2, 3.0))
    paper = sheet.paper
    relative = _is_relative(paper)
    for i, workload in enumerate(workloads):
        rows = table[table["workload"] == workload]
        for row, (column, rows_paper) in enumerate(
            [("value", paper[~relative]), ("relative", paper[relative])]
        ):
            axis = panel(axes, i, rows=2, row=row)
            axis.set_yscale("log")
            plain_log(axis.yaxis)
            _mode_lines(axis, rows, column)
            if column == "relative":
                axis.axhline(1, color="0.5", linewidth=1, linestyle=":")
            sheet.place(paper_on(axis, rows_paper, "consumers", workload=workload))
            log2_axis(axis, "x")
            axis.set_xticks(sorted(rows["consumers"].unique()))
            axis.set(xlabel="consumers N (training processes)", ylabel=labels[row])
        panel(axes, i, rows=2).set_title(f"benchmark workload: {workload}")
    if not workloads:
        sheet.no_data(axes[0, 0])
        axes[0, 0].set(xlabel="consumers N (training processes)", ylabel=labels[0])
        axes[1, 0].set(xlabel="consumers N (training processes)", ylabel=labels[1])
    return figure
