"""Helpers the figure modules share: panels, styles, median with min-max bars, notes, the
papers' reported values drawn beside ours, and the caption sentences several figures use."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogFormatter

from analysis.reference import describe
from analysis.time_to_target import BASELINE_KEY, CONFIG_KEY

__all__ = [
    "BASELINE_UNREACHED",
    "ECHO_POINTS",
    "NOTE_BOX",
    "PAPER_CAPTION",
    "PAPER_LABEL",
    "RELATIVE_CAPTION",
    "RELATIVE_COLUMNS",
    "draw_lines",
    "draw_median",
    "echo_style",
    "finish",
    "log2_axis",
    "mark_unreached",
    "matching",
    "new_figure",
    "note_on",
    "one_config_each",
    "panel",
    "paper_marks",
    "paper_on",
    "plain_log",
]

_PALETTE = sns.color_palette("colorblind", 10)
_ECHO_STYLES = {
    "none": ("baseline (no echo)", "0.45", "o"),
    "after_batch": ("batch echoing", _PALETTE[0], "s"),
    "after_augment": ("example echoing after augmentation", _PALETTE[1], "^"),
    "before_augment": ("example echoing before augmentation", _PALETTE[2], "v"),
}
ECHO_POINTS = tuple(_ECHO_STYLES)
"""Every ``echo_point`` a run can have, in plotting order: "none" (the baseline, no echo
stage), then echo's insertion points from the batch back towards storage, which is
``echo.ECHO_POINTS`` (pipeline order, storage first) reversed. analysis does not import
echo; a test checks the two agree."""
_ORDER = {point: i for i, point in enumerate(ECHO_POINTS)}
_DASHES = ["-", "--", ":", "-."]
PAPER_LABEL = "paper (reported)"
_PAPER_STYLE = {"marker": "*", "markersize": 13, "markeredgecolor": "black", "linestyle": "none"}

RELATIVE_CAPTION = (
    "Relative values divide each run's count to target by the median of its baseline: the "
    "runs of the same study without an echo stage that share its workload, batch size, "
    "upstream cost, workers and target. Markers or bars are the median over seeds (for a "
    "tuned study: over its repeated searches, each its trial with the fewest fresh examples), "
    "error bars the minimum and maximum; 'k/n' marks configurations where only k of n seeds "
    "reached the target (medians use those k)."
)
"""How the relative values of the run-record figures are made, for their captions."""
PAPER_CAPTION = (
    "Black-edged stars are the values the papers report (paper_figures/reference/papers.csv),"
    " coloured by insertion point where the paper names one; reported values with no "
    "matching point, and the papers' claims that carry no number, are listed under the figure."
)
"""How the papers' values are drawn, for every caption."""
BASELINE_UNREACHED = "The baseline never reached the target: no relative values"
"""What a panel says where the baseline of its runs never reached the target."""
NOTE_BOX = {"facecolor": "white", "edgecolor": "0.6", "alpha": 0.9, "boxstyle": "round"}
"""The box behind a note drawn over data, so that lines crossing it do not hide it."""
RELATIVE_COLUMNS = (*BASELINE_KEY, "echo_point", "echo_factor")
"""Columns of the runs table a figure of values relative to the baseline needs."""


def echo_style(point: str) -> dict[str, object]:
    """Colour, marker and label of an echo insertion point.

    Args:
        point: An ``echo_point`` value ("none", "after_batch", ...).
    """
    label, color, marker = _ECHO_STYLES.get(point, (point, "black", "D"))
    return {"color": color, "marker": marker, "label": label}


def new_figure(
    panels: int, *, columns: int = 3, rows: int = 1, size: tuple[float, float] = (3.8, 3.0)
) -> tuple[Figure, np.ndarray]:
    """A figure of ``rows`` x ``panels`` axes, wrapped after ``columns`` panels per row.

    Args:
        panels: Panels per row group (at least 1; e.g. one per workload).
        columns: Most panels side by side. Default 3.
        rows: Axes stacked per panel (e.g. 2: a summary above its curves). Default 1.
        size: Inches per axes (width, height). Default (3.8, 3.0).

    Returns:
        The figure and a 2-D array of axes ``[row group * rows + row, panel column]``;
        panels past ``panels`` are hidden.
    """
    panels = max(panels, 1)
    width = min(panels, columns)
    height = math.ceil(panels / width) * rows
    with sns.axes_style("whitegrid"):
        figure = Figure(figsize=(size[0] * width + 2.6, size[1] * height), layout="constrained")
        axes = figure.subplots(height, width, squeeze=False)
    for index in range(panels, math.ceil(panels / width) * width):
        for row in range(rows):
            axes[(index // width) * rows + row, index % width].set_visible(False)
    return figure, axes


def panel(axes: np.ndarray, index: int, *, rows: int = 1, row: int = 0) -> Axes:
    """The axes of panel ``index`` (its stacked ``row`` of ``rows``) in a ``new_figure``."""
    width = axes.shape[1]
    return axes[(index // width) * rows + row, index % width]


def one_config_each(summary: pd.DataFrame, keys: Sequence[str], notes: list[str]) -> pd.DataFrame:
    """Keep one configuration per ``keys`` (the one with most runs); note what was dropped.

    A figure draws one point per ``keys``; configurations that differ in another column of
    ``CONFIG_KEY`` (say two learning rates) would otherwise be drawn on top of each other.
    """
    if summary.empty:
        return summary
    ordered = summary.sort_values("n_runs", ascending=False, kind="stable")
    duplicated = ordered.duplicated(list(keys), keep="first")
    if duplicated.any():
        varying = [c for c in CONFIG_KEY if c not in keys and ordered[c].nunique() > 1]
        notes.append(
            f"{int(duplicated.sum())} configuration(s) that differ only in {varying} are not "
            "drawn (one per point: the one with most runs)."
        )
    return ordered[~duplicated].sort_values(list(keys), kind="stable")


def draw_median(
    axes: Axes, x: Sequence[float], rows: pd.DataFrame, quantity: str, **style: object
) -> None:
    """Median over seeds as a marker (joined by a line) with min-max error bars.

    Args:
        axes: Where to draw.
        x: The x position of each row.
        rows: Summary rows with ``<quantity>_median``, ``_min`` and ``_max``.
        quantity: The summarized column, e.g. ``fresh_rel``.
        **style: Passed to ``Axes.errorbar`` (color, marker, label, linestyle, ...).
    """
    median = rows[f"{quantity}_median"].to_numpy(float)
    error = np.vstack([median - rows[f"{quantity}_min"], rows[f"{quantity}_max"] - median])
    axes.errorbar(np.asarray(x, float), median, yerr=error, capsize=3, **style)


def mark_unreached(
    axes: Axes, x: Sequence[float], rows: pd.DataFrame, quantity: str, color: object = "0.3"
) -> None:
    """Write ``reached/runs`` next to points where some seeds missed the target, and
    "not reached" (or "no baseline") at the bottom where the value is missing.

    Rows whose baseline never reached the target (``baseline_reached`` 0, see
    ``Sheet.summary``) get no label: ``draw_lines`` says it once per panel.
    """
    bottom = axes.get_xaxis_transform()
    for position, (_, row) in zip(x, rows.iterrows(), strict=True):
        median = row[f"{quantity}_median"]
        if pd.isna(median):
            if row["n_reached"] and row["baseline_reached"] == 0:
                continue
            label = "no baseline" if row["n_reached"] else f"not reached (0/{row['n_runs']})"
            # The label is drawn even where nothing else is: keep its x inside the axes.
            axes.update_datalim([(position, 1.0)], updatey=False)
            axes.autoscale_view(scaley=False)
            axes.text(
                position,
                0.02,
                label,
                transform=bottom,
                rotation=90,
                fontsize=7,
                ha="center",
                va="bottom",
                color=color,
            )
        elif row["n_reached"] < row["n_runs"]:
            axes.annotate(
                f"{row['n_reached']}/{row['n_runs']} reached",
                (position, median),
                fontsize=7,
                xytext=(-5, -3),
                textcoords="offset points",
                color=color,
                ha="right",
                va="top",
            )


def _note_baseline_unreached(axes: Axes, rows: pd.DataFrame, x_column: str) -> None:
    """Say in the middle of ``axes`` that the baseline of ``rows`` never reached the target
    (when it did not), naming the ``x_column`` values concerned when the baselines differ
    along x (batch size)."""
    stranded = rows[rows["baseline_reached"] == 0]
    if stranded.empty:
        return
    where = ""
    if x_column in BASELINE_KEY and rows[x_column].nunique() > 1:
        values = ", ".join(f"{value:g}" for value in sorted(stranded[x_column].unique()))
        where = f" ({x_column.replace('_', ' ')} {values})"
    note_on(axes, f"{BASELINE_UNREACHED}{where}.", bbox=NOTE_BOX)


def note_on(axes: Axes, text: str, **style: object) -> None:
    """A grey note in the middle of an axes (e.g. "no runs").

    Args:
        axes: Where to write.
        text: The note, wrapped at 40 characters.
        **style: Passed to ``Axes.text`` (e.g. ``bbox``). Default: none.
    """
    axes.text(
        0.5,
        0.5,
        textwrap.fill(text, 40),
        transform=axes.transAxes,
        ha="center",
        va="center",
        fontsize=8,
        color="0.35",
        **style,
    )


def log2_axis(axes: Axes, which: str = "x") -> None:
    """Base-2 log scale with plain numbers (1, 2, 4, ...) as tick labels.

    The limits are autoscaled on the log scale, so positive data close to 0 against a wide
    range (an ideal 1/e line down to 1/16, say, whose linear margin reaches below 0) are kept.
    An axis with no positive data yet (every run of a panel missed its target, say) gets the
    limits 1-2 so that the log scale can still be drawn.
    """
    if not np.isfinite(getattr(axes.dataLim, f"minpos{which}")):
        getattr(axes, f"set_{which}lim")(1, 2)
    getattr(axes, f"set_{which}scale")("log", base=2)
    formatter = FuncFormatter(lambda value, _: f"{value:g}")
    getattr(axes, f"{which}axis").set_major_formatter(formatter)


class _PlainLogFormatter(LogFormatter):
    """Labels the ticks `LogFormatter` labels, as plain numbers (6, not 6 x 10^0)."""

    def __call__(self, x: float, pos: int | None = None) -> str:
        return f"{x:.3g}" if super().__call__(x, pos) else ""


def plain_log(axis: Axis) -> None:
    """Label a base-10 log axis with plain numbers, minor ticks too when the range is short."""
    axis.set_major_formatter(_PlainLogFormatter())
    axis.set_minor_formatter(_PlainLogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))


def matching(rows: pd.DataFrame, **given: object) -> pd.Series:
    """Reference rows that agree with every given value, an empty field matching anything."""
    keep = pd.Series(True, index=rows.index)
    for column, value in given.items():
        field = rows[column]
        empty = field.isna() | (field.astype(str) == "")
        keep &= empty | (field == value)
    return keep


def paper_marks(
    axes: Axes, rows: pd.DataFrame, x: Sequence[float], y: Sequence[float] | None = None
) -> None:
    """Draw reference values as black-edged stars, coloured by echo point where given."""
    values = rows["value"].to_numpy(float) if y is None else np.asarray(y, float)
    for position, value, (_, row) in zip(x, values, rows.iterrows(), strict=True):
        color = echo_style(row["echo_point"])["color"] if row["echo_point"] else "white"
        axes.plot([position], [value], color=color, label=PAPER_LABEL, **_PAPER_STYLE)


def paper_on(
    axes: Axes,
    paper: pd.DataFrame,
    x_column: str,
    *,
    y: Callable[[pd.DataFrame], Sequence[float]] | None = None,
    **given: object,
) -> pd.Series:
    """Draw the reference rows that match ``given`` and have an ``x_column`` value.

    Args:
        axes: Where to draw.
        paper: Reference rows of this figure.
        x_column: The reference column giving the x position (rows without it are skipped;
            a column the table lacks places nothing).
        y: Maps the drawn rows to y values. Default None: their ``value``.
        **given: Values the rows must agree with (empty reference fields match anything).

    Returns:
        Which rows of ``paper`` were drawn (boolean, indexed like ``paper``).
    """
    if x_column not in paper.columns:
        return pd.Series(False, index=paper.index)
    x = pd.to_numeric(paper[x_column], errors="coerce")
    drawn = matching(paper, **given) & x.notna()
    if drawn.any():
        rows = paper[drawn]
        paper_marks(axes, rows, x[drawn], None if y is None else y(rows))
    return drawn


def draw_lines(
    axes: Axes,
    rows: pd.DataFrame,
    x_column: str,
    quantity: str,
    *,
    by: Sequence[str] = ("echo_point",),
    dodge: float = 0.04,
) -> None:
    """One median line with min-max bars per group of ``by``, styled by echo point.

    Args:
        axes: Where to draw.
        rows: Summary rows (``Sheet.summary``: with ``baseline_reached``).
        x_column: The column on the x axis.
        quantity: The summarized quantity on the y axis, e.g. ``fresh_rel``.
        by: Columns whose values make one line. Default ("echo_point",); with
            "echo_factor" the label names the factor and factors get their own dash style.
        dodge: Lines are shifted by a factor ``2 ** (dodge * k)`` so that error bars at the
            same x do not overlap. Default 0.04.
    """
    groups = list(rows.groupby(list(by), sort=False, dropna=False))
    groups.sort(key=lambda item: _ORDER.get(item[1]["echo_point"].iloc[0], 9))
    factors = sorted(rows["echo_factor"].unique())
    for k, (_, group) in enumerate(groups):
        group = group.sort_values(x_column)
        point, factor = group["echo_point"].iloc[0], group["echo_factor"].iloc[0]
        style = echo_style(point)
        if "echo_factor" in by and point != "none":
            style["label"] = f"{style['label']}, e = {factor:g}"
            style["linestyle"] = _DASHES[factors.index(factor) % len(_DASHES)]
        x = group[x_column].to_numpy(float) * 2 ** (dodge * (k - (len(groups) - 1) / 2))
        draw_median(axes, x, group, quantity, **style)
        mark_unreached(axes, x, group, quantity, style["color"])
    _note_baseline_unreached(axes, rows, x_column)


def _legend(figure: Figure) -> None:
    seen: dict[str, object] = {}
    for axes in figure.axes:
        for handle, label in zip(*axes.get_legend_handles_labels(), strict=True):
            seen.setdefault(label, handle)
    if PAPER_LABEL in seen:
        seen[PAPER_LABEL] = Line2D([], [], color="white", **_PAPER_STYLE)
    if seen:
        figure.legend(list(seen.values()), list(seen), loc="outside right upper", fontsize=8)


def finish(
    figure: Figure,
    notes: list[str],
    unplaced: pd.DataFrame | None = None,
    claims: pd.DataFrame | None = None,
) -> Figure:
    """Add the figure legend and print ``notes``, unplaced paper values and the papers'
    claims under the axes.

    Args:
        figure: The figure.
        notes: Lines about missing data.
        unplaced: Reference values for this figure that no panel could place. Default None.
        claims: Reference claims (``qualitative`` rows) for this figure. Default None.

    Returns:
        ``figure``.
    """
    _legend(figure)
    lines = list(notes)
    if unplaced is not None and len(unplaced):
        lines.append("Paper values with no matching point here:")
        lines += [f"  - {describe(row)}" for _, row in unplaced.iterrows()]
    if claims is not None and len(claims):
        lines.append("The papers' claims about this figure (no number to draw):")
        lines += [f"  - {describe(row)}" for _, row in claims.iterrows()]
    if lines:
        width, height = figure.get_size_inches()
        wrapped = [part for line in lines for part in textwrap.wrap(line, int(width * 15))]
        extra = 0.16 * len(wrapped) + 0.15
        figure.set_size_inches(width, height + extra)
        share = extra / (height + extra)
        figure.get_layout_engine().set(rect=(0, share, 1, 1 - share))
        figure.text(
            0.01,
            share - 0.05 / (height + extra),
            "\n".join(wrapped),
            fontsize=7,
            va="top",
            ha="left",
            color="0.2",
        )
    return figure
