"""Figures 2 and 3: fresh examples and wall time to target against the echo factor."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from analysis.figures._common import (
    draw_lines,
    finish,
    log2_axis,
    new_figure,
    note_on,
    one_config_each,
    panel,
    paper_on,
    plain_log,
    require,
    study_summary,
)
from analysis.reference import for_figure
from analysis.time_to_target import BASELINE_KEY

__all__ = ["fresh_vs_echo_factor", "wall_time_vs_echo_factor"]

_FRESH_LABEL = "fresh examples to target\n(\u00d7 baseline median)"
_FACTOR_LABEL = "echo factor e (repeats per example)"


def _factors(summary: pd.DataFrame, max_factor: float, notes: list[str]) -> pd.DataFrame:
    keep = summary["echo_factor"] <= max_factor
    if not keep.all():
        notes.append(f"Echo factors above {max_factor:g} are not drawn.")
    return one_config_each(summary[keep], [*BASELINE_KEY, "echo_point", "echo_factor"], notes)


def _ideal(axes: Axes, top: float, floor: float | None = None) -> None:
    factors = np.geomspace(1, top, 64)
    if floor is None:
        axes.plot(factors, 1 / factors, "k--", linewidth=1, label="ideal (1/e)")
    else:
        ideal = np.maximum(1 / factors, 1 / floor)
        axes.plot(factors, ideal, "k:", linewidth=1.2, label="ideal wall time max(1/e, 1/R)")


def fresh_vs_echo_factor(
    runs: pd.DataFrame,
    reference: pd.DataFrame | None = None,
    *,
    study: str = "echo_factor",
    max_factor: float = 16.0,
) -> Figure:
    """Fresh examples to target relative to the baseline against the echo factor.

    One panel per workload, one line per insertion point (median over seeds, min-max bars),
    the baseline as one point at e = 1, and the ideal 1/e dashed.

    Args:
        runs: The runs table (``analysis.records.aggregate``).
        reference: The papers' values (``analysis.reference.load_reference``). Default None.
        study: The study whose runs are drawn. Default "echo_factor".
        max_factor: The largest echo factor drawn. Default 16.0.

    Returns:
        The figure.
    """
    require(runs, [*BASELINE_KEY, "echo_point", "echo_factor"], "runs")
    notes: list[str] = []
    summary = _factors(study_summary(runs, study), max_factor, notes)
    workloads = sorted(summary["workload"].unique())
    figure, axes = new_figure(len(workloads))
    paper = for_figure(reference, "fresh_vs_echo_factor")
    placed = pd.Series(False, index=paper.index)
    for i, workload in enumerate(workloads):
        axis = panel(axes, i)
        rows = summary[summary["workload"] == workload]
        draw_lines(axis, rows, "echo_factor", "fresh_rel")
        _ideal(axis, max(max_factor, rows["echo_factor"].max()))
        placed |= paper_on(axis, paper, "echo_factor", workload=workload)
        log2_axis(axis, "x")
        log2_axis(axis, "y")
        axis.set(title=workload, xlabel=_FACTOR_LABEL, ylabel=_FRESH_LABEL)
    if not workloads:
        note_on(axes[0, 0], f"No runs in study {study!r}.")
        axes[0, 0].set(xlabel=_FACTOR_LABEL, ylabel=_FRESH_LABEL)
    return finish(figure, notes, paper[~placed])


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
        _ideal(axis, top)
    else:
        _ideal(axis, top, float(measured.iloc[0]))
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
    axis.set(xlabel=_FACTOR_LABEL, ylabel="wall time to target\n(\u00d7 baseline median)")


def wall_time_vs_echo_factor(
    runs: pd.DataFrame,
    reference: pd.DataFrame | None = None,
    *,
    study: str = "wall_time",
    max_factor: float = 16.0,
) -> Figure:
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
    require(runs, [*BASELINE_KEY, "echo_point", "echo_factor"], "runs")
    notes: list[str] = []
    summary = _factors(study_summary(runs, study), max_factor, notes)
    settings = summary.drop_duplicates(BASELINE_KEY).reset_index(drop=True)
    figure, axes = new_figure(2 * len(settings), columns=2, size=(4.4, 3.2))
    paper = for_figure(reference, "wall_time_vs_echo_factor")
    fresh = paper["quantity"].str.contains("fresh|example", case=False)
    placed = pd.Series(False, index=paper.index)
    for i, setting in settings.iterrows():
        rows = summary[(summary[BASELINE_KEY] == setting[BASELINE_KEY]).all(axis=1)]
        top, title = max(max_factor, rows["echo_factor"].max()), _setting_title(setting)
        wall, fresh_axis = panel(axes, 2 * i), panel(axes, 2 * i + 1)
        _wall_panel(wall, rows, top, notes, title)
        drawn = paper_on(
            wall,
            paper[~fresh],
            "echo_factor",
            workload=setting["workload"],
            y=lambda r: np.where(_is_speedup(r), 1 / r["value"], r["value"]),
        )
        placed |= drawn.reindex(paper.index, fill_value=False)
        draw_lines(fresh_axis, rows, "echo_factor", "fresh_rel")
        _ideal(fresh_axis, top)
        drawn = paper_on(fresh_axis, paper[fresh], "echo_factor", workload=setting["workload"])
        placed |= drawn.reindex(paper.index, fill_value=False)
        log2_axis(fresh_axis, "x")
        log2_axis(fresh_axis, "y")
        fresh_axis.set(xlabel=_FACTOR_LABEL, ylabel=_FRESH_LABEL)
        wall.set_title(title, fontsize=9, loc="left")
        fresh_axis.set_title(" ", fontsize=9)
    if settings.empty:
        note_on(axes[0, 0], f"No runs in study {study!r}.")
        axes[0, 0].set(xlabel=_FACTOR_LABEL, ylabel="wall time to target\n(\u00d7 baseline median)")
    return finish(figure, notes, paper[~placed])
