"""Source of a throwaway figure, written as its own module by the `toy_figure` fixture (and by
the workflow test into a copy of the project) to exercise the "one new file" recipe: runs per
workload of the insertion study, as bars."""

from __future__ import annotations

from matplotlib.figure import Figure

from analysis.figures import Sheet, figure


@figure(
    "toy_figure",
    inputs={"runs": ["study", "workload"]},
    study="insertion",
    caption="Toy figure: how many runs each workload has in the study.",
)
def toy_figure(sheet: Sheet, *, color: str = "0.4") -> Figure:
    """Runs per workload of the study.

    Args:
        runs: The runs table.
        reference: The papers' values (none are placed). Default None.
        study: The study drawn. Default "insertion".
        color: Colour of the bars. Default "0.4".
    """
    runs = sheet.tables["runs"]
    counts = runs[runs["study"] == sheet.study]["workload"].value_counts().sort_index()
    drawing = Figure(layout="constrained")
    axes = drawing.subplots()
    axes.bar(counts.index, counts.to_numpy(), color=color, label="runs")
    axes.set(xlabel="workload", ylabel="runs")
    if counts.empty:
        sheet.no_data(axes)
    sheet.notes.append(f"{len(counts)} workloads in study {sheet.study!r}.")
    return drawing
