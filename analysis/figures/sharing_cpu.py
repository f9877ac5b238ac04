"""Figure 8: shared data loading, CPU seconds per delivered sample against consumers."""

from __future__ import annotations

from matplotlib.figure import Figure

from analysis.figures import figure
from analysis.figures._common import PAPER_CAPTION
from analysis.figures._sharing import COLUMNS, draw_sharing
from analysis.figures._sheet import Sheet

__all__ = ["sharing_cpu"]

_COLUMN = "cpu_ms_per_batch_received"


@figure(
    "sharing_cpu",
    inputs={"sharing": [*COLUMNS, _COLUMN]},
    caption=(
        "CPU seconds (all processes of a trial) per sample delivered to a consumer against "
        "the number of consumers, per loading mode, from the benchmark's CPU milliseconds "
        "per batch received divided by its 64 samples per batch; bottom: relative to own "
        "loaders at the same number of consumers. Hollow markers: unfinished trials. "
        f"{PAPER_CAPTION}"
    ),
)
def sharing_cpu(sheet: Sheet, *, batch_size: int = 64) -> Figure:
    """CPU seconds per delivered sample against the number of consumers, per loading mode.

    ``cpu_ms_per_batch_received`` (CPU time of every process of the trial over the batches
    all consumers received) divided by 1000 and by ``batch_size``. Bottom: relative to every
    consumer running its own loader at the same N. Unfinished trials are drawn hollow.

    Args:
        sharing: The shared_loading benchmark table (columns ``workload``, ``mode``,
            ``consumers``, ``consumers_finished``, ``cpu_ms_per_batch_received``).
        reference: The papers' values, placed as in ``sharing_throughput``. Default None.
        batch_size: Samples per batch in the benchmark. Default 64 (what
            ``benchmarks/sharing`` uses).

    Returns:
        The figure.

    Raises:
        ValueError: ``batch_size`` is not a positive integer.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    return draw_sharing(
        sheet,
        sheet.tables["sharing"][_COLUMN] / 1000 / batch_size,
        (
            f"CPU s per delivered sample\n({batch_size}-sample batches)",
            "CPU per delivered sample\n(\u00d7 own loader, same N)",
        ),
    )
