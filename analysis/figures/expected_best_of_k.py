"""Expected best of k trials per insertion point (the protocol study's insertion searches)."""

from __future__ import annotations

from matplotlib.figure import Figure

from analysis.figures import figure
from analysis.figures._best_of_k import BEST_OF_K_CAPTION, BEST_OF_K_COLUMNS, draw_best_of_k
from analysis.figures._sheet import Sheet

__all__ = ["expected_best_of_k"]


@figure(
    "expected_best_of_k",
    inputs={"runs": BEST_OF_K_COLUMNS},
    study="insertion",
    caption=f"{BEST_OF_K_CAPTION} One line per insertion point at e = 2.",
)
def expected_best_of_k(sheet: Sheet) -> Figure:
    """Expected fewest fresh examples to target among k tuned trials, relative to the
    baseline's, per workload and insertion point (tuned studies only).

    Args:
        runs: The runs table (``analysis.records.aggregate``).
        reference: The papers' values (``analysis.reference.load_reference``). Default None.
        study: The study whose runs are drawn. Default "insertion".

    Returns:
        The figure.
    """
    return draw_best_of_k(sheet, by_factor=False)
