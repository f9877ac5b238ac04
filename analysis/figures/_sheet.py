"""What a registered figure's function draws from: its checked tables, the study, the
reference values and claims of the figure, and the notes printed under it."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd
from matplotlib.axes import Axes

from analysis.figures._common import note_on
from analysis.time_to_target import (
    baseline_reached,
    relative_to_baseline,
    summarize,
    unreached_baselines,
)

__all__ = ["Sheet"]


@dataclass
class Sheet:
    """The steps every figure shares, made once by the ``draw`` that `figure` registers.

    Attributes:
        tables: Table name -> the table, already checked for the columns the figure needs.
        study: The study of run records drawn; None for a benchmark figure.
        paper: The reference values of this figure: its ``number`` rows
            (``analysis.reference.for_figure``), which panels may draw.
        claims: Its ``qualitative`` rows: no value to draw, listed under the figure.
        notes: Lines printed under the figure (what is missing, what is not drawn).
        placed: Which rows of ``paper`` some panel drew (boolean, indexed like ``paper``).
    """

    tables: dict[str, pd.DataFrame]
    study: str | None
    paper: pd.DataFrame
    claims: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    placed: pd.Series = field(init=False)

    def __post_init__(self) -> None:
        self.placed = pd.Series(False, index=self.paper.index)

    def summary(self) -> pd.DataFrame:
        """``summarize(relative_to_baseline(...))`` of the study's runs, with a
        ``baseline_reached`` column (``analysis.time_to_target.baseline_reached``); each
        baseline that never reached the target is noted in words."""
        runs = self.tables["runs"]
        summary = summarize(relative_to_baseline(runs[runs["study"] == self.study]))
        self.notes += [f"{line[0].upper()}{line[1:]}." for line in unreached_baselines(summary)]
        return summary.assign(baseline_reached=baseline_reached(summary))

    def place(self, drawn: pd.Series) -> None:
        """Mark reference rows as drawn (``drawn``: boolean, indexed by a subset of
        ``paper``'s index)."""
        self.placed |= drawn.reindex(self.paper.index, fill_value=False)

    def unplaced(self) -> pd.DataFrame:
        """The reference rows no panel drew: listed under the figure."""
        return self.paper[~self.placed]

    def no_data(self, axes: Axes) -> None:
        """Say in the middle of ``axes`` that there is nothing to draw: "No runs in study
        'x'." (a run-record figure) or "The <table> table has no rows."."""
        if self.study is not None:
            note_on(axes, f"No runs in study {self.study!r}.")
        else:
            note_on(axes, f"The {next(iter(self.tables))} table has no rows.")
