"""Expected best of k trials per echo factor (the protocol study's echo-factor searches)."""

from __future__ import annotations

from matplotlib.figure import Figure

from analysis.figures import figure
from analysis.figures._best_of_k import BEST_OF_K_CAPTION, BEST_OF_K_COLUMNS, draw_best_of_k
from analysis.figures._sheet import Sheet

__all__ = ["expected_best_vs_factor"]


@figure(
    "expected_best_vs_factor",
    inputs={"runs": BEST_OF_K_COLUMNS},
    study="echo_factor",
    caption=f"{BEST_OF_K_CAPTION} One line per insertion point and echo factor.",
)
def expected_best_vs_factor(sheet: Sheet) -> Figure:
    """Expected fewest fresh examples to target among k tuned trials, relative to the
    baseline's, per workload, insertion point and echo factor (tuned studies only).

    Args:
        runs: The runs table (``analysis.records.aggregate``).
        reference: The papers' values (``analysis.reference.load_reference``). Default None.
        study: The study whose runs are drawn. Default "echo_factor".

    Returns:
        The figure.
    """
    return draw_best_of_k(sheet, by_factor=True)
