"""What the two papers report, read from ``paper_figures/reference/papers.csv``.

One row per reported fact: where it comes from (``paper``, ``source``, ``location``,
``page``), the figure of ours it belongs beside (``our_figure``: a figure of the registry,
``analysis.figures.names``, or empty), what it is about (``workload``, ``echo_point``,
``echo_factor``, ``batch_size``, ``consumers``; empty when it does not apply) and the fact
itself (``kind``, ``quantity``, ``value``, ``unit``, ``note``). ``kind`` is one of ``KINDS``:
a ``number`` (a reported value), a ``qualitative`` claim (no value; ``note`` states it) or a
``protocol`` fact (how the paper ran its experiments; never drawn beside a figure).
"""

from __future__ import annotations

import os

import pandas as pd

from analysis._io import require_columns

__all__ = [
    "KINDS",
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
    "echo_factor", "batch_size", "consumers", "kind", "quantity", "value", "unit", "note",
]  # fmt: skip
"""Columns of the reference table, in order."""

KINDS = ("number", "qualitative", "protocol")
"""What a row holds: a reported value with its unit (``number``: ``value`` given), a claim
without a number (``qualitative``: ``value`` empty, ``note`` states it), or how the paper ran
its experiments (``protocol``: batch sizes, optimizers, search budgets; ``value`` optional)."""
_DRAWN = ("number", "qualitative")

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
        ValueError: The file is empty, a column is missing, a numeric column holds text, a
            ``kind`` is not one of ``KINDS``, a ``number`` row has no ``value`` or a
            ``qualitative`` row has one (the message names the column and the row).
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
    _check_kinds(table, path)
    extra = [column for column in table.columns if column not in REFERENCE_COLUMNS]
    return table[REFERENCE_COLUMNS + extra] if len(table) else _empty()


def _check_kinds(table: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    """Raise ValueError naming the first row whose ``kind`` is unknown or does not fit its
    ``value``."""
    bad = ~table["kind"].isin(KINDS)
    if bad.any():
        row = int(bad.idxmax())
        raise ValueError(
            f"reference table {path}: column 'kind' in data row {row + 1} is "
            f"{table.at[row, 'kind']!r}; expected one of {list(KINDS)}"
        )
    has_value = table["value"].notna()
    for kind, wrong, expected in [
        ("number", ~has_value, "the reported number (a claim without one is kind 'qualitative')"),
        ("qualitative", has_value, "empty (a claim with a number is kind 'number')"),
    ]:
        bad = (table["kind"] == kind) & wrong
        if bad.any():
            row = int(bad.idxmax())
            value = table.at[row, "value"]
            shown = "empty" if pd.isna(value) else f"{value:g}"
            raise ValueError(
                f"reference table {path}: column 'value' in data row {row + 1} (kind {kind!r})"
                f" is {shown}; expected {expected}"
            )


def for_figure(reference: pd.DataFrame | None, name: str) -> pd.DataFrame:
    """The reference rows drawn beside one of our figures.

    Args:
        reference: The table from ``load_reference``, or None (no reference: no rows).
        name: The figure, as ``our_figure`` names it. The figure registry, which draws the
            rows, checks that the table names only registered figures.

    Returns:
        The ``number`` and ``qualitative`` rows whose ``our_figure`` is ``name`` (possibly
        none), with a fresh index; ``protocol`` rows are never drawn.
    """
    if reference is None or not len(reference):
        return _empty()
    drawn = (reference["our_figure"] == name) & reference["kind"].isin(_DRAWN)
    return reference[drawn].reset_index(drop=True)


def describe(row: pd.Series) -> str:
    """One line naming a reference row's source, setting and fact, for a figure's footnote.

    A ``number`` reads ``quantity = value unit``; a ``qualitative`` row reads as its ``note``
    (the claim); a ``protocol`` row as ``quantity = value unit`` when it has a value, else
    ``quantity: note``.

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
    value = "" if pd.isna(row["value"]) else f" = {row['value']:g}{unit}"
    if row["kind"] == "qualitative" and row["note"]:
        fact = row["note"]
    elif value or not row["note"]:
        fact = f"{row['quantity']}{value}"
    else:
        fact = f"{row['quantity']}: {row['note']}"
    context = f" ({', '.join(about)})" if about else ""
    return f"{where}{context}: {fact}"
