"""Figure 7: shared data loading, per-consumer throughput against the number of consumers."""

from __future__ import annotations

from matplotlib.figure import Figure

from analysis.figures import figure
from analysis.figures._common import PAPER_CAPTION
from analysis.figures._sharing import COLUMNS, draw_sharing
from analysis.figures._sheet import Sheet

__all__ = ["sharing_throughput"]

_COLUMN = "per_consumer_batches_per_s"


@figure(
    "sharing_throughput",
    inputs={"sharing": [*COLUMNS, _COLUMN]},
    caption=(
        "Batches per second each training process (consumer) receives against the number "
        "of consumers, per loading mode: each consumer with its own loader, our shared "
        "loader, TensorSocket and the tf.data service; one column per benchmark workload "
        "(images: cheap in-memory 224x224 images, so transport dominates; cpu: samples that "
        "each take about 2 ms of CPU). Bottom: "
        "relative to own loaders at the same number of consumers. Hollow markers: trials "
        f"where not every consumer finished. {PAPER_CAPTION}"
    ),
)
def sharing_throughput(sheet: Sheet) -> Figure:
    """Per-consumer throughput against the number of consumers, one line per loading mode.

    One column per benchmark workload (``images``, ``cpu``). Top: batches per second each
    consumer receives; bottom: the same relative to every consumer running its own loader
    at the same N. Trials where not every consumer finished are drawn hollow.

    Args:
        sharing: The shared_loading benchmark table (columns ``workload``, ``mode``,
            ``consumers``, ``consumers_finished``, ``per_consumer_batches_per_s``).
        reference: The papers' values, placed by ``consumers``; a row whose unit is a ratio
            ("", "x", "ratio", ...) or whose quantity says relative goes on the bottom
            panel, others on the top. Default None.

    Returns:
        The figure.
    """
    return draw_sharing(
        sheet,
        sheet.tables["sharing"][_COLUMN],
        ("batches/s per consumer", "per-consumer throughput\n(\u00d7 own loader, same N)"),
    )
