"""Figure 3: wall time (and fresh examples) to target against the echo factor."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
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
    plain_log,
)
from analysis.figures._echo_factor import FACTOR_LABEL, FRESH_LABEL, factors, ideal
from analysis.figures._sheet import Sheet
from analysis.time_to_target import BASELINE_KEY

__all__ = ["wall_time_vs_echo_factor"]

_WALL_LABEL = "wall time to target\n(\u00d7 baseline median)"


def _setting_title(row: pd.Series) -> str:
    latency = f"{row['upstream_latency_ms']:g} ms/{row['upstream_latency_per']}"
    return (
        f"{row['workload']}, batch {row['batch_size']}: upstream {latency} + "
        f"{row['upstream_cpu_ms']:g} ms CPU/example, {row['num_workers']} workers"
    )


def _is_speedup(rows: pd.DataFrame) -> pd.Series:
    unit = rows["unit"].str.strip().str.lower()
    return rows["quantity"].str.contains("speedup", case=False) | unit.isin(["x", "\u00d7"])


def _wall_panel(axis: Axes, rows: pd.DataFrame, top: float, notes: list[str], title: str) -> None:
    draw_lines(axis, rows, "echo_factor", "wall_rel")
    measured = rows["baseline_R"].dropna()
    if measured.empty:
        notes.append(f"{title}: no measured R for the baseline; ideal drawn as 1/e.")
        ideal(axis, top)
    else:
        ideal(axis, top, float(measured.iloc[0]))
        axis.text(
            0.97,
            0.95,
            f"baseline R = {measured.iloc[0]:.2f} (measured)",
            transform=axis.transAxes,
            ha="right",
            va="top",
            fontsize=8,
        )
    log2_axis(axis, "x")
    log2_axis(axis, "y")
    speedup = axis.secondary_yaxis(
        "right", functions=(lambda v: 1 / np.maximum(v, 1e-9), lambda v: 1 / np.maximum(v, 1e-9))
    )
    plain_log(speedup.yaxis)
    speedup.set_ylabel("speedup (\u00d7, = 1 / relative wall time)")
    axis.set(xlabel=FACTOR_LABEL, ylabel=_WALL_LABEL)


@figure(
    "wall_time_vs_echo_factor",
    inputs={"runs": RELATIVE_COLUMNS},
    study="wall_time",
    caption=(
        "Left: wall time to target (training time, evaluation excluded) relative to the "
        "baseline against the echo factor, with speedup = 1 / relative wall time on the "
        "right axis; the dotted line is the ideal max(1/e, 1/R), where R is the baseline's "
        "measured ratio of upstream time per batch to training-step time (written in each "
        "panel). Right: fresh examples to target relative to the baseline, ideal 1/e dashed. "
        "One row per workload and upstream setting, one line per insertion point. "
        f"{RELATIVE_CAPTION} {PAPER_CAPTION} Reported speedups are drawn at 1/speedup."
    ),
)
def wall_time_vs_echo_factor(sheet: Sheet, *, max_factor: float = 16.0) -> Figure:
    """Wall time and fresh examples to target relative to the baseline against echo factor.

    One row of two panels per workload and upstream setting: wall time (with speedup on the
    right axis, the baseline's measured R written in, ideal max(1/e, 1/R) dotted) and fresh
    examples (ideal 1/e dashed); one line per insertion point.

    Args:
        runs: The runs table (``analysis.records.aggregate``).
        reference: The papers' values; rows whose quantity is a speedup (or unit "x") are
            drawn at 1/value on the wall-time panel, rows whose quantity names fresh
            examples on the other. Default None.
        study: The study whose runs are drawn. Default "wall_time".
        max_factor: The largest echo factor drawn. Default 16.0.

    Returns:
        The figure.
    """
    summary = factors(sheet.summary(), max_factor, sheet.notes)
    settings = summary.drop_duplicates(BASELINE_KEY).reset_index(drop=True)
    drawing, axes = new_figure(2 * len(settings), columns=2, size=(4.4, 3.2))
    paper = sheet.paper
    fresh = paper["quantity"].str.contains("fresh|example", case=False)
    for i, setting in settings.iterrows():
        rows = summary[(summary[BASELINE_KEY] == setting[BASELINE_KEY]).all(axis=1)]
        top, title = max(max_factor, rows["echo_factor"].max()), _setting_title(setting)
        wall, fresh_axis = panel(axes, 2 * i), panel(axes, 2 * i + 1)
        _wall_panel(wall, rows, top, sheet.notes, title)
        sheet.place(
            paper_on(
                wall,
                paper[~fresh],
                "echo_factor",
                workload=setting["workload"],
                y=lambda r: np.where(_is_speedup(r), 1 / r["value"], r["value"]),
            )
        )
        draw_lines(fresh_axis, rows, "echo_factor", "fresh_rel")
        ideal(fresh_axis, top)
        sheet.place(paper_on(fresh_axis, paper[fresh], "echo_factor", workload=setting["workload"]))
        log2_axis(fresh_axis, "x")
        log2_axis(fresh_axis, "y")
        fresh_axis.set(xlabel=FACTOR_LABEL, ylabel=FRESH_LABEL)
        wall.set_title(title, fontsize=9, loc="left")
        fresh_axis.set_title(" ", fontsize=9)
    if settings.empty:
        sheet.no_data(axes[0, 0])
        axes[0, 0].set(xlabel=FACTOR_LABEL, ylabel=_WALL_LABEL)
    return drawing
