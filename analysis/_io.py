"""Helpers for the package's files and tables: atomic writes (readers, and an interrupted
workflow, never see half a file) and the check that a table has the columns it needs.

Every file the package writes (tables, summaries, figures) goes through the project's one
writer, `run_contract.files.atomic_write`, and so gets the mode of any file the user creates:
``0o666`` less the umask (0644 under the usual 022)."""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from run_contract.files import atomic_write

__all__ = ["atomic_write", "markdown_table", "require_columns"]


def require_columns(
    table: pd.DataFrame, columns: Iterable[str], what: str, *, hint: str = ""
) -> None:
    """Raise ValueError when ``table`` lacks one of ``columns``.

    Args:
        table: The table.
        columns: The columns it needs.
        what: Names the table in the message (an argument, a file).
        hint: Appended to the message. Default: nothing.

    Raises:
        ValueError: ``"<what> lacks the columns [...]<hint>"``.
    """
    missing = [column for column in columns if column not in table.columns]
    if missing:
        raise ValueError(f"{what} lacks the columns {missing}{hint}")


def markdown_table(table: pd.DataFrame) -> str:
    """A pipe table of ``table``: floats with 3 significant digits (counts of 1000 and more
    in full), NaN as "-".

    Args:
        table: Any table.
    """

    def cell(value: object) -> str:
        if isinstance(value, float):
            if pd.isna(value):
                return "-"
            return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
        return str(value)

    lines = ["| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
    lines += ["| " + " | ".join(map(cell, row)) + " |" for row in table.itertuples(False)]
    return "\n".join(lines)
