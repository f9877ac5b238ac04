"""The tuned baselines' expected best of k trials against the study's resolution: has the
curve flattened by T, the trials per search? (`analysis.trials`)"""

from __future__ import annotations

from matplotlib.figure import Figure

from analysis.figures import figure
from analysis.figures._best_of_k import BEST_OF_K_COLUMNS, note_untuned
from analysis.figures._common import log2_axis, new_figure, panel
from analysis.figures._sheet import Sheet
from analysis.protocol import expected_best_curves
from analysis.trials import trials_table

__all__ = ["baseline_best_of_k"]


@figure(
    "baseline_best_of_k",
    inputs={"runs": (*BEST_OF_K_COLUMNS, "refine_every_fresh")},
    study="insertion",
    caption="For each workload's tuned baseline, the expected fewest fresh examples to target "
    "among its first k trials (each search's best of its trials 1..k, averaged over its "
    "searches; a trial that missed the target counts at how far it ran). The dashed lines "
    "mark T/2 and T, T the trials per search; the band spans one crossing step above the "
    "expected best of T trials. The curve has flattened by T (the protocol's goal for T) "
    "when its value at T/2 lies inside the band. The curve ends at the trials the searches "
    "ran: nothing past T is extrapolated.",
)
def baseline_best_of_k(sheet: Sheet) -> Figure:
    """The baseline's expected fewest fresh examples to target among its first k trials, per
    workload, with T/2, T and one crossing step marked (tuned studies only).

    Args:
        runs: The runs table (``analysis.records.aggregate``).
        reference: The papers' values (``analysis.reference.load_reference``). Default None.
        study: The study whose runs are drawn. Default "insertion".

    Returns:
        The figure.
    """
    runs = sheet.tables["runs"]
    studied = runs[runs["study"] == sheet.study]
    table = trials_table(studied)
    curves = expected_best_curves(studied)
    curves = curves[curves["echo_point"] == "none"]
    drawing, axes = new_figure(len(table))
    for i, row in enumerate(table.itertuples(index=False)):
        axis = panel(axes, i)
        line = curves[
            (curves["workload"] == row.workload) & (curves["batch_size"] == row.batch_size)
        ]
        axis.plot(line["k"], line["expected_best_fresh"], color="black", label="baseline")
        axis.axhspan(row.best_T, row.best_T + row.step, color="tab:green", alpha=0.2)
        for k in (max(1, row.T // 2), row.T):
            axis.axvline(k, color="0.45", linestyle="--", linewidth=1)
        axis.set_xlim(1, max(2, int(line["k"].max())))
        log2_axis(axis, "x")
        axis.set(
            title=f"{row.workload}\nT/2 -> T gains {row.gain_half:,.0f} (step {row.step:,.0f})",
            xlabel="trials k",
            ylabel="expected best fresh examples",
        )
    if table.empty:
        note_untuned(sheet, axes[0, 0], studied)
    return drawing
