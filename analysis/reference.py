"""The numbers the two papers report, read from ``paper_figures/reference/papers.csv``.

One row per reported number: where it comes from (``paper``, ``source``, ``location``,
``page``), the figure of ours it belongs beside (``our_figure``), what it is about
(``workload``, ``echo_point``, ``echo_factor``, ``batch_size``, ``consumers``; empty when it
does not apply) and the number itself (``quantity``, ``value``, ``unit``, ``note``).
``our_figure`` names a figure of the registry (``analysis.figures.names``).
"""

from __future__ import annotations

import os

import pandas as pd

from analysis._io import require_columns

__all__ = [
    "REFERENCE_COLUMNS",
    "REFERENCE_PATH",
    "describe",
    "for_figure",
    "load_reference",
]

REFERENCE_PATH = "paper_figures/reference/papers.csv"
"""Where the reference table lives, relative to the repository root."""

REFERENCE_COLUMNS = [
    "paper", "source", "location", "page", "our_figure", "workload", "echo_point",
    "echo_factor", "batch_size", "consumers", "quantity", "value", "unit", "note",
]  # fmt: skip
"""Columns of the reference table, in order."""

_NUMERIC = ["echo_factor", "batch_size", "consumers", "value"]


def _empty() -> pd.DataFrame:
    table = pd.DataFrame({column: pd.Series(dtype=str) for column in REFERENCE_COLUMNS})
    table[_NUMERIC] = table[_NUMERIC].astype(float)
    return table


def load_reference(path: str | os.PathLike[str] = REFERENCE_PATH) -> pd.DataFrame:
    """Read the reference table; it may have no data rows.

    Args:
        path: The CSV file. Default ``paper_figures/reference/papers.csv`` (relative to the
            working directory).

    Returns:
        The table with the columns ``REFERENCE_COLUMNS`` (in that order; extra columns are
        kept after them): ``echo_factor``, ``batch_size``, ``consumers`` and ``value`` as
        floats (NaN when empty), the other columns as strings ("" when empty).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: The file is empty, a column is missing, or a numeric column holds text
            (the message names the column and the row).
    """
    try:
        table = pd.read_csv(path, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        raise ValueError(f"reference table {path} is empty: it needs at least its header") from None
    require_columns(table, REFERENCE_COLUMNS, f"reference table {path}")
    for column in _NUMERIC:
        text = table[column].str.strip()
        numbers = pd.to_numeric(text.mask(text == ""), errors="coerce")
        bad = numbers.isna() & (text != "")
        if bad.any():
            row = int(bad.idxmax())
            raise ValueError(
                f"reference table {path}: column {column!r} in data row {row + 1} is "
                f"{table.at[row, column]!r}; expected a number or empty"
            )
        table[column] = numbers.astype(float)
    extra = [column for column in table.columns if column not in REFERENCE_COLUMNS]
    return table[REFERENCE_COLUMNS + extra] if len(table) else _empty()


def for_figure(reference: pd.DataFrame | None, name: str) -> pd.DataFrame:
    """The reference rows drawn beside one of our figures.

    Args:
        reference: The table from ``load_reference``, or None (no reference: no rows).
        name: A registered figure (``analysis.figures.names``).

    Returns:
        The rows whose ``our_figure`` is ``name`` (possibly none), with a fresh index.

    Raises:
        ValueError: ``name`` is not a registered figure.
    """
    from analysis.figures import names  # the figures import this module

    if name not in names():
        raise ValueError(f"name must be one of {names()}, got {name!r}")
    if reference is None or not len(reference):
        return _empty()
    return reference[reference["our_figure"] == name].reset_index(drop=True)


def describe(row: pd.Series) -> str:
    """One line naming a reference row's source and number, for a figure's footnote.

    Args:
        row: One row of the reference table.
    """
    about = [
        f"{column}={row[column]:g}" if isinstance(row[column], float) else str(row[column])
        for column in ("workload", "echo_point", "echo_factor", "batch_size", "consumers")
        if not (pd.isna(row[column]) or row[column] == "")
    ]
    where = ", ".join(str(row[c]) for c in ("paper", "location") if str(row[c]))
    unit = f" {row['unit']}" if row["unit"] else ""
    context = f" ({', '.join(about)})" if about else ""
    return f"{where}: {row['quantity']} = {row['value']:g}{unit}{context}"
