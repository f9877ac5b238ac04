"""Figures 4 and 5: fresh examples to target against batch size and shuffle buffer size."""

from __future__ import annotations

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from analysis.figures._common import (
    draw_lines,
    finish,
    log2_axis,
    new_figure,
    note_on,
    one_config_each,
    panel,
    paper_on,
    require,
    study_summary,
)
from analysis.reference import for_figure
from analysis.time_to_target import BASELINE_KEY

__all__ = ["batch_size", "shuffle_buffer"]

_FRESH_LABEL = "fresh examples to target\n(\u00d7 baseline median)"
_KEYS = ["workload", "echo_point", "echo_factor"]


def _ideal(axis: Axes, factors: list[float]) -> None:
    for factor in factors:
        label = "ideal (1/e)" if len(factors) == 1 else f"ideal (1/e), e = {factor:g}"
        axis.axhline(1 / factor, color="black", linestyle="--", linewidth=1, label=label)


def _sweep(
    runs: pd.DataFrame,
    reference: pd.DataFrame | None,
    *,
    name: str,
    study: str,
    x_column: str,
    xlabel: str,
) -> tuple[Figure, list[Axes], pd.DataFrame]:
    require(runs, [*BASELINE_KEY, *_KEYS, x_column], "runs")
    notes: list[str] = []
    summary = one_config_each(study_summary(runs, study), [*_KEYS, x_column], notes)
    workloads = sorted(summary["workload"].unique())
    figure, axes = new_figure(len(workloads))
    paper = for_figure(reference, name)
    placed = pd.Series(False, index=paper.index)
    drawn = []
    for i, workload in enumerate(workloads):
        axis = panel(axes, i)
        rows = summary[summary["workload"] == workload]
        if x_column == "shuffle_buffer":  # baselines have no echo stage, hence no buffer
            rows = rows[rows["echo_point"] != "none"]
            axis.axhline(1, color="0.45", linewidth=1, label="baseline (no echo)")
        draw_lines(axis, rows, x_column, "fresh_rel", by=("echo_point", "echo_factor"))
        _ideal(axis, sorted(set(rows["echo_factor"]) - {1.0}))
        placed |= paper_on(axis, paper, x_column, workload=workload)
        axis.set(title=workload, xlabel=xlabel, ylabel=_FRESH_LABEL)
        drawn.append(axis)
    if not workloads:
        note_on(axes[0, 0], f"No runs in study {study!r}.")
        axes[0, 0].set(xlabel=xlabel, ylabel=_FRESH_LABEL)
    return figure, drawn, notes, paper[~placed]


def batch_size(
    runs: pd.DataFrame, reference: pd.DataFrame | None = None, *, study: str = "batch_size"
) -> Figure:
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
    figure, axes, notes, unplaced = _sweep(
        runs,
        reference,
        name="batch_size",
        study=study,
        x_column="batch_size",
        xlabel="batch size (examples per step)",
    )
    for axis in axes:
        log2_axis(axis, "x")
    return finish(figure, notes, unplaced)


def shuffle_buffer(
    runs: pd.DataFrame, reference: pd.DataFrame | None = None, *, study: str = "shuffle_buffer"
) -> Figure:
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
    figure, axes, notes, unplaced = _sweep(
        runs,
        reference,
        name="shuffle_buffer",
        study=study,
        x_column="shuffle_buffer",
        xlabel="shuffle buffer after echo\n(items: examples, or batches for batch echoing)",
    )
    for axis in axes:
        axis.set_xscale("symlog", linthresh=1)
        axis.set_xlim(-0.4, max(2.0, 2 * axis.dataLim.x1))
        axis.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    return finish(figure, notes, unplaced)
