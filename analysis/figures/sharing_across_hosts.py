"""Sharing across simulated hosts through Ray, from the ``sharing_ray`` benchmark CSV
(``benchmarks/reference/sharing_ray.csv``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from analysis.figures import figure
from analysis.figures._common import PAPER_CAPTION, matching, new_figure, paper_marks
from analysis.figures._sheet import Sheet

__all__ = ["sharing_across_hosts"]

_MODES = ("own", "ray", "tfdata_service")
_LABELS = {
    "own": "own loader per consumer",
    "ray": "sharing over Ray (ray:NAME)",
    "tfdata_service": "tf.data service (cross-trainer cache)",
}
_ROWS = (
    ("per_consumer_batches_per_s", "batches/s per consumer"),
    ("cpu_ms_per_batch", "CPU ms per batch received\n(every process of the cluster)"),
    ("copies_per_node_per_batch", "copies of a batch\nmoved to each node"),
)


@figure(
    "sharing_across_hosts",
    inputs={
        "sharing_ray": [
            "workload",
            "mode",
            "nodes",
            "consumers_per_node",
            *(column for column, _ in _ROWS),
        ]
    },
    caption=(
        "Loading shared across simulated hosts (Ray cluster nodes with their own object "
        "stores, on one machine) against each consumer's own loader and tf.data service, "
        "for 4 consumers laid out as nodes x consumers per node; one column per benchmark "
        "workload. Top: batches per second each consumer receives; middle: CPU per batch of "
        "every process of the cluster; bottom: copies of each batch moved to each consumer "
        "node (Ray: counted by Ray's object store; tf.data service: one per trainer by "
        f"design). {PAPER_CAPTION}"
    ),
)
def sharing_across_hosts(sheet: Sheet) -> Figure:
    """Throughput, CPU per batch and copies per node, per layout and loading mode.

    Args:
        sharing_ray: The sharing_ray benchmark table (columns ``workload``, ``mode``,
            ``nodes``, ``consumers_per_node``, ``per_consumer_batches_per_s``,
            ``cpu_ms_per_batch``, ``copies_per_node_per_batch``).
        reference: The papers' values; a row with a ``nodes`` column is placed on the top
            panel of its workload, at the layout with that many nodes (neither paper
            measured this, so the committed table has none). Default None.

    Returns:
        The figure.
    """
    table = sheet.tables["sharing_ray"].copy()
    table["layout"] = table["nodes"].astype(str) + "x" + table["consumers_per_node"].astype(str)
    workloads = sorted(set(table["workload"]), key=lambda w: (w != "images", w))
    drawing, axes = new_figure(len(workloads), columns=2, rows=len(_ROWS), size=(4.2, 2.6))
    colors = dict(zip(_MODES, sns.color_palette("dark", len(_MODES)), strict=True))
    for column, workload in enumerate(workloads):
        rows = table[table["workload"] == workload]
        layouts = list(dict.fromkeys(rows.sort_values("nodes")["layout"]))
        modes = [m for m in _MODES if m in set(rows["mode"])]
        width = 0.8 / max(len(modes), 1)
        for row, (value, label) in enumerate(_ROWS):
            axis = axes[row, column]
            for offset, mode in enumerate(modes):
                by_layout = rows[rows["mode"] == mode].set_index("layout")[value]
                heights = [by_layout.get(layout, np.nan) for layout in layouts]
                positions = np.arange(len(layouts)) + (offset - (len(modes) - 1) / 2) * width
                axis.bar(
                    positions, heights, width, color=colors[mode],
                    label=_LABELS[mode] if column == 0 and row == 0 else None,
                )  # fmt: skip
            axis.set_xticks(np.arange(len(layouts)), layouts)
            axis.set_ylabel(label)
            if row == 0:
                axis.set_title(workload)
            axis.set_xlabel("consumer nodes x consumers per node")
        _place_paper(sheet, axes[0, column], workload, rows.sort_values("nodes")["nodes"])
    if not workloads:
        sheet.no_data(axes[0, 0])
        for axis in axes.flat:
            axis.set_xlabel("consumer nodes x consumers per node")
    return drawing


def _place_paper(sheet: Sheet, axis: object, workload: str, nodes: object) -> None:
    """Draw the reference rows of ``workload`` that name a drawn layout's ``nodes``."""
    paper = sheet.paper
    if "nodes" not in paper.columns:
        return
    position = {int(n): i for i, n in enumerate(dict.fromkeys(nodes))}
    wanted = pd.to_numeric(paper["nodes"], errors="coerce")
    drawn = matching(paper, workload=workload) & wanted.isin(list(position))
    if drawn.any():
        paper_marks(axis, paper[drawn], [position[int(n)] for n in wanted[drawn]])
    sheet.place(drawn)
