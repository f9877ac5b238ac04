"""What the two expected-best-of-k figures share: one panel per workload, one line per tuned
echo condition, its expected fewest fresh examples to target among k trials
(`analysis.protocol.expected_best_curves`) over the baseline's at the same k."""

from __future__ import annotations

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from analysis.figures._common import (
    ECHO_POINTS,
    echo_style,
    log2_axis,
    new_figure,
    note_on,
    panel,
)
from analysis.figures._sheet import Sheet
from analysis.protocol import expected_best_curves
from analysis.time_to_target import BASELINE_KEY

__all__ = ["BEST_OF_K_CAPTION", "BEST_OF_K_COLUMNS", "draw_best_of_k", "note_untuned"]

BEST_OF_K_COLUMNS = (*BASELINE_KEY, "echo_point", "echo_factor", "trial", "final_fresh_examples")
"""Columns of the runs table the figures need."""

BEST_OF_K_CAPTION = (
    "For each tuned condition, the expected fewest fresh examples to target among its first "
    "k trials (each search's best of its trials 1..k, in the order it ran them, averaged "
    "over its searches: exact under incumbent censoring), divided by the baseline's at the "
    "same k: below 1, echoing needs fewer fresh examples even when both are tuned with only "
    "k trials. A trial that missed the target counts at how far it ran, so a ratio drawn "
    "where a baseline search has not yet reached is an estimate at capped values. Solid "
    "where at least 95% of both conditions' searches have reached the target by k, dotted "
    "elsewhere."
)
"""The caption both figures open with."""


def draw_best_of_k(sheet: Sheet, *, by_factor: bool) -> Figure:
    """One panel per workload of ``sheet``'s study, one line per tuned echo condition.

    Args:
        sheet: The figure's sheet (its ``runs`` table).
        by_factor: Mark each line's echo factor at its end (the legend names each insertion
            point once).
    """
    runs = sheet.tables["runs"]
    studied = runs[runs["study"] == sheet.study]
    curves = expected_best_curves(studied)
    workloads = sorted(curves["workload"].unique())
    drawing, axes = new_figure(len(workloads))
    for i, workload in enumerate(workloads):
        axis = panel(axes, i)
        rows = curves[curves["workload"] == workload]
        baseline = rows[rows["echo_point"] == "none"]
        if baseline.empty:
            sheet.notes.append(f"{workload}: no tuned baseline, so no ratios.")
            continue
        base = baseline.groupby("k")[["expected_best_fresh", "p_any_reached"]].first()
        echoes = rows[rows["echo_point"] != "none"]
        order = {point: j for j, point in enumerate(ECHO_POINTS)}
        keys = sorted(
            echoes.groupby(["echo_point", "echo_factor"]).groups,
            key=lambda key: (order.get(key[0], 9), key[1]),
        )
        marks: list[tuple[float, float, str, str]] = []  # (y, x, text, colour) of line ends
        for point, factor in keys:
            line = echoes[(echoes["echo_point"] == point) & (echoes["echo_factor"] == factor)]
            line = line.set_index("k").join(base.add_suffix("_baseline"), how="inner")
            ratio = line["expected_best_fresh"] / line["expected_best_fresh_baseline"]
            sure = (line["p_any_reached"] >= 0.95) & (line["p_any_reached_baseline"] >= 0.95)
            style = echo_style(point)
            style.pop("marker")
            k = line.index.to_numpy(float)
            axis.plot(k, ratio.where(sure), linestyle="-", **style)
            style.pop("label")
            axis.plot(k, ratio.where(~sure | sure.shift(-1, fill_value=False)), ":", **style)
            if by_factor:
                marks.append((float(ratio.iloc[-1]), float(k[-1]), f"e={factor:g}", style["color"]))
        axis.axhline(1.0, color="0.45", linewidth=1, label="baseline (tuned alike)")
        _mark_ends(axis, marks)
        axis.set_xlim(1, max(2, int(rows["k"].max())))  # a linear margin would reach 0
        log2_axis(axis, "x")
        axis.set(
            title=workload,
            xlabel="trials k",
            ylabel="expected best fresh examples\nrelative to the baseline's",
        )
    if not workloads:
        note_untuned(sheet, axes[0, 0], studied)
    return drawing


def note_untuned(sheet: Sheet, axis: Axes, studied: pd.DataFrame) -> None:
    """Say on ``axis`` why a best-of-k figure is empty: no runs in ``sheet``'s study
    (``studied``: its rows of the runs table), or none of them tuned."""
    if studied.empty:
        sheet.no_data(axis)
    else:
        note_on(
            axis,
            f"No tuned searches in study {sheet.study!r} (a study with `search:`, as in "
            "config/protocol.yaml).",
        )
    axis.set(xlabel="trials k", ylabel="expected best fresh examples")


MARK_GAP = 0.045
"""The least vertical distance between two end marks, as a share of the panel's height."""


def _mark_ends(axis: Axes, marks: list[tuple[float, float, str, str]]) -> None:
    """Write each ``(y, x, text, colour)`` at its line's end, moving marks up as little as
    needed so that no two lie closer than `MARK_GAP` of the panel's height."""
    low, high = axis.get_ylim()
    gap = MARK_GAP * (high - low)
    placed = -float("inf")
    for y, x, text, colour in sorted(marks):
        placed = max(y, placed + gap)
        axis.annotate(text, (x, y), xytext=(x, placed), fontsize=7, color=colour)
