"""Figures 7 and 8: shared data loading, throughput and CPU cost against consumers, from the
``shared_loading`` benchmark CSV (``benchmarks/reference/shared_loading.csv``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from analysis.figures._common import (
    finish,
    log2_axis,
    new_figure,
    note_on,
    panel,
    paper_on,
    plain_log,
    require,
)
from analysis.reference import for_figure

__all__ = ["sharing_cpu", "sharing_throughput"]

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


def _figure(
    sharing: pd.DataFrame,
    reference: pd.DataFrame | None,
    *,
    name: str,
    value: pd.Series,
    labels: tuple[str, str],
) -> Figure:
    notes: list[str] = []
    table = sharing.assign(
        value=value, unfinished=sharing["consumers_finished"] < sharing["consumers"]
    )
    own = table[table["mode"] == "own"].groupby(["workload", "consumers"])["value"].median()
    table = table.merge(own.rename("own"), on=["workload", "consumers"], how="left")
    table["relative"] = table["value"] / table["own"]
    if table["own"].isna().any():
        notes.append(
            "Relative values need the 'own' trial with the same consumers; missing for some trials."
        )
    workloads = list(dict.fromkeys(table["workload"]))
    figure, axes = new_figure(len(workloads), rows=2, size=(4.2, 3.0))
    paper = for_figure(reference, name)
    relative = _is_relative(paper)
    placed = pd.Series(False, index=paper.index)
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
            drawn = paper_on(axis, rows_paper, "consumers", workload=workload)
            placed |= drawn.reindex(paper.index, fill_value=False)
            log2_axis(axis, "x")
            axis.set_xticks(sorted(rows["consumers"].unique()))
            axis.set(xlabel="consumers N (training processes)", ylabel=labels[row])
        panel(axes, i, rows=2).set_title(f"benchmark workload: {workload}")
    if not workloads:
        note_on(axes[0, 0], "The sharing table has no rows.")
        axes[0, 0].set(xlabel="consumers N (training processes)", ylabel=labels[0])
        axes[1, 0].set(xlabel="consumers N (training processes)", ylabel=labels[1])
    return finish(figure, notes, paper[~placed])


def sharing_throughput(sharing: pd.DataFrame, reference: pd.DataFrame | None = None) -> Figure:
    """Per-consumer throughput against the number of consumers, one line per loading mode.

    One column per benchmark workload (``images``, ``cpu``). Top: batches per second each
    consumer receives; bottom: the same relative to every consumer running its own loader
    at the same N. Trials where not every consumer finished are drawn hollow.

    Args:
        sharing: The shared_loading benchmark table (columns ``workload``, ``mode``,
            ``consumers``, ``consumers_finished``, ``per_consumer_batches_per_s``).
        reference: The papers' values, placed by ``consumers``; a row whose unit is a ratio
            ("", "x", "ratio", ...) or whose quantity says relative goes on the bottom
            panel, others on the top. Default None.

    Returns:
        The figure.
    """
    column = "per_consumer_batches_per_s"
    require(sharing, ["workload", "mode", "consumers", "consumers_finished", column], "sharing")
    return _figure(
        sharing,
        reference,
        name="sharing_throughput",
        value=sharing[column],
        labels=("batches/s per consumer", "per-consumer throughput\n(\u00d7 own loader, same N)"),
    )


def sharing_cpu(
    sharing: pd.DataFrame, reference: pd.DataFrame | None = None, *, batch_size: int = 64
) -> Figure:
    """CPU seconds per delivered sample against the number of consumers, per loading mode.

    ``cpu_ms_per_batch_received`` (CPU time of every process of the trial over the batches
    all consumers received) divided by 1000 and by ``batch_size``. Bottom: relative to every
    consumer running its own loader at the same N. Unfinished trials are drawn hollow.

    Args:
        sharing: The shared_loading benchmark table (columns ``workload``, ``mode``,
            ``consumers``, ``consumers_finished``, ``cpu_ms_per_batch_received``).
        reference: The papers' values, placed as in ``sharing_throughput``. Default None.
        batch_size: Samples per batch in the benchmark. Default 64 (what
            ``benchmarks/sharing`` uses).

    Returns:
        The figure.

    Raises:
        ValueError: ``batch_size`` is not a positive integer.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    column = "cpu_ms_per_batch_received"
    require(sharing, ["workload", "mode", "consumers", "consumers_finished", column], "sharing")
    return _figure(
        sharing,
        reference,
        name="sharing_cpu",
        value=sharing[column] / 1000 / batch_size,
        labels=(
            f"CPU s per delivered sample\n({batch_size}-sample batches)",
            "CPU per delivered sample\n(\u00d7 own loader, same N)",
        ),
    )
