"""`analysis.figures` and ``python -m analysis``: every figure draws from the tidy tables and
the committed benchmark CSVs, labels its axes, shows the papers' values and says what is
missing; the command line writes tables, figures and the summary."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pytest
from matplotlib.figure import Figure
from test_analysis import make_record, synthetic_study, tuned_record, write_record

from analysis import aggregate
from analysis.cli import main
from analysis.figures import get, names, save
from analysis.figures._common import BASELINE_UNREACHED, ECHO_POINTS, PAPER_LABEL
from analysis.reference import REFERENCE_COLUMNS, load_reference

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks/reference"
SCHEMA = "run_contract/schemas/run_record.schema.json"


TUNED = {
    "baseline_best_of_k": "tuned_insertion",
    "expected_best_of_k": "tuned_insertion",
    "expected_best_vs_factor": "tuned_factor",
}
"""The figures of tuned searches, and the synthetic study of searches each is drawn from."""


def _tuned_study(folder: Path) -> dict[str, list[Path]]:
    """Two searches of three trials per condition, for the expected-best-of-k figures."""
    conditions = {
        "tuned_insertion": [("none", 1.0, 2000), ("after_batch", 2.0, 1800),
                            ("before_augment", 2.0, 1200)],
        "tuned_factor": [("none", 1.0, 2000), ("before_augment", 2.0, 1200),
                         ("before_augment", 4.0, 800)],
    }  # fmt: skip
    studies = {}
    for study, rows in conditions.items():
        records = [
            tuned_record(
                point, factor, repetition, trial, None if trial == 2 else fresh + 100 * trial
            )
            for point, factor, fresh in rows
            for repetition in range(2)
            for trial in range(3)
        ]
        studies[study] = [write_record(folder, record) for record in records]
    return studies


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("figure_records")
    studies = {**synthetic_study(folder), **_tuned_study(folder)}
    runs, curves = aggregate(studies)
    return {
        "runs": runs,
        "curves": curves,
        "sharing": pd.read_csv(BENCHMARKS / "shared_loading.csv"),
        "echo_speedup": pd.read_csv(BENCHMARKS / "echo_speedup.csv"),
        "sharing_ray": pd.read_csv(BENCHMARKS / "sharing_ray.csv"),
        "studies": studies,
    }


def draw(name: str, inputs: dict, reference: pd.DataFrame | None = None, **options) -> Figure:
    if name in TUNED:
        options.setdefault("study", TUNED[name])
    spec = get(name)
    figure = spec.draw(*[inputs[table] for table in spec.inputs], reference, **options)
    figure.savefig(io.BytesIO(), format="png", dpi=40)  # lays out and renders everything
    return figure


def legend_labels(figure: Figure) -> list[str]:
    return [text.get_text() for legend in figure.legends for text in legend.get_texts()]


def texts(figure: Figure) -> str:
    return " ".join(
        [t.get_text() for t in figure.texts] + [t.get_text() for a in figure.axes for t in a.texts]
    )


def reference(**row) -> pd.DataFrame:
    """A reference table with one row (a ``number`` unless ``kind`` is given), read back as
    ``load_reference`` reads papers.csv; extra numeric columns (``R``, ``shuffle_buffer``) as
    floats."""
    row = {"kind": "number", **row}
    columns = [*REFERENCE_COLUMNS, *(c for c in row if c not in REFERENCE_COLUMNS)]
    table = load_reference(io.StringIO(pd.DataFrame([row], columns=columns).to_csv(index=False)))
    extra = columns[len(REFERENCE_COLUMNS) :]
    table[extra] = table[extra].astype(float)
    return table


@pytest.mark.parametrize("name", names())
def test_every_figure_draws_with_labelled_axes(name, inputs):
    figure = draw(name, inputs)
    drawn = [axes for axes in figure.axes if axes.get_visible() and axes.has_data()]
    assert drawn
    for axes in drawn:
        assert axes.get_xlabel() and axes.get_ylabel(), (name, axes.get_title())
    assert legend_labels(figure)


MATCHING_ROWS = {
    "fresh_by_echo_point": dict(
        workload="cifar10_resnet", echo_point="after_batch", echo_factor=2, value=0.6
    ),
    "fresh_vs_echo_factor": dict(
        workload="cifar10_resnet", echo_point="after_augment", echo_factor=4, value=0.35
    ),
    "wall_time_vs_echo_factor": dict(
        workload="cifar10_resnet",
        echo_point="after_batch",
        echo_factor=4,
        quantity="speedup",
        value=3.25,
        unit="x",
    ),
    "batch_size": dict(
        workload="cifar10_resnet", echo_point="after_batch", batch_size=64, value=0.7
    ),
    "shuffle_buffer": dict(
        workload="cifar10_resnet", echo_point="after_augment", shuffle_buffer=16, value=0.7
    ),
    "no_harm": dict(
        workload="lm1b_transformer", echo_point="after_batch", echo_factor=2, value=3.9, unit="nats"
    ),
    "sharing_throughput": dict(consumers=4, quantity="per_consumer_vs_own", value=2, unit="x"),
    "sharing_cpu": dict(workload="cpu", consumers=2, value=0.001, unit="CPU s/sample"),
    "echo_on_stall": dict(R=4, value=3.5, unit="x"),
    "sharing_across_hosts": dict(workload="images", nodes=2, value=5.0),
}


@pytest.mark.parametrize("name", names())
def test_a_reference_row_for_a_figure_is_drawn_as_paper(name, inputs):
    if name in TUNED:  # the papers report no expected-best curves: a row is listed instead
        figure = draw(name, inputs, reference(paper="A", location="Fig. 9", our_figure=name,
                                              quantity="q", value=1.0))  # fmt: skip
        assert "Fig. 9" in texts(figure)
        return
    row = {
        "paper": "A et al.",
        "location": "Fig. 9",
        "our_figure": name,
        "quantity": "q",
        **MATCHING_ROWS[name],
    }
    figure = draw(name, inputs, reference(**row))
    assert PAPER_LABEL in legend_labels(figure)
    assert "Fig. 9" not in texts(figure)  # placed, so not in the footnote


def test_unmatched_reference_rows_are_listed_under_the_figure(inputs):
    rows = reference(
        paper="Choi et al.",
        location="Table 7",
        our_figure="batch_size",
        workload="imagenet_resnet",
        batch_size=1024,
        quantity="fresh_rel",
        value=0.7,
    )
    figure = draw("batch_size", inputs, rows)
    assert PAPER_LABEL not in legend_labels(figure)
    assert "Table 7" in texts(figure) and "imagenet_resnet" in texts(figure)


def test_a_claim_is_listed_under_its_figure_and_a_protocol_fact_is_not_drawn(inputs):
    name = "fresh_vs_echo_factor"
    where = MATCHING_ROWS[name] | {"value": None}  # where a number would be drawn as a star
    claim = reference(paper="C", our_figure=name, kind="qualitative", note="Gains.", **where)
    protocol = reference(paper="C", location="Table 1", our_figure=name, kind="protocol", value=1)
    figure = draw(name, inputs, pd.concat([claim, protocol], ignore_index=True))
    assert PAPER_LABEL not in legend_labels(figure)  # a claim has no value to draw
    assert "claims" in texts(figure) and "Gains." in texts(figure)
    assert "Table 1" not in texts(figure) and "nan" not in texts(figure)


def test_reference_rows_of_other_figures_are_ignored(inputs):
    rows = reference(paper="X", location="Fig. 2", our_figure="no_harm", value=1.0)
    figure = draw("fresh_by_echo_point", inputs, rows)
    assert PAPER_LABEL not in legend_labels(figure) and "Fig. 2" not in texts(figure)


def test_missing_parts_are_noted_rather_than_crashing(inputs, tmp_path):
    figure = draw("fresh_by_echo_point", inputs)  # the language model has no before_augment
    assert "lm1b_transformer with before_augment" in texts(figure)
    assert "2/3 reached" in texts(draw("fresh_vs_echo_factor", inputs))  # seed 2 at e = 16
    lone = aggregate(
        {
            "insertion": [
                write_record(
                    tmp_path,
                    make_record(echo_point="after_batch", echo_factor=2, fresh_to_target=900),
                )
            ]
        }
    )[0]
    assert "no baseline" in texts(draw("fresh_by_echo_point", {**inputs, "runs": lone}))


@pytest.mark.parametrize("name", names())
def test_a_figure_without_data_says_so(name, inputs):
    empty = {key: table.iloc[:0] for key, table in inputs.items() if key != "studies"}
    figure = draw(name, empty)
    assert "no runs in study" in texts(figure).lower() or "has no rows" in texts(figure)
    assert all(axes.get_xlabel() for axes in figure.axes if axes.get_visible())


def test_unfinished_sharing_trials_are_marked(inputs):
    figure = draw("sharing_throughput", inputs)  # tensorsocket, images, 4 consumers: 0 of 4
    assert "did not finish (hollow)" in legend_labels(figure)
    assert "did not finish" in texts(figure)


def test_the_factor_figure_draws_e_32_where_the_protocol_study_turns(tmp_path):
    """The protocol study sweeps before augmentation to e = 32: the factor figure draws it,
    its ideal 1/e line too; a larger factor is left out and said so."""
    records = [
        make_record("cifar10_resnet", point, factor, seed=seed, fresh_to_target=fresh)
        for point, factor, fresh in [("none", 1.0, 3200), ("before_augment", 16.0, 800),
                                     ("before_augment", 32.0, 600), ("before_augment", 64.0, 700)]
        for seed in range(3)
    ]  # fmt: skip
    runs, _ = aggregate({"echo_factor": [write_record(tmp_path, r) for r in records]})
    figure = get("fresh_vs_echo_factor").draw(runs, None)
    lines = [line.get_xdata() for line in figure.axes[0].get_lines() if len(line.get_xdata())]
    measured = [x for x in lines if len(x) < 10]  # the ideal line has 64 points
    assert any(30 < max(x) < 34 for x in measured)  # e = 32 (points are spread a little)
    assert max(max(x) for x in lines) < 34  # e = 64 is not
    assert "Echo factors above 32 are not drawn." in texts(figure)


def test_the_best_of_k_per_factor_names_each_echo_point_once_and_marks_each_factor(inputs):
    figure = draw("expected_best_vs_factor", inputs)
    labels = legend_labels(figure)
    assert labels.count("example echoing before augmentation") == 1
    assert not any("e = " in label for label in labels)
    marks = [t.get_text() for a in figure.axes for t in a.texts]
    assert "e=2" in marks and "e=4" in marks


def test_end_marks_of_lines_that_end_together_are_moved_apart():
    import matplotlib.pyplot as plt

    from analysis.figures._best_of_k import MARK_GAP, _mark_ends

    figure, axis = plt.subplots()
    axis.set_ylim(0, 1)
    _mark_ends(axis, [(0.50, 8, "e=4", "C0"), (0.50, 8, "e=8", "C1"), (0.20, 8, "e=2", "C2")])
    heights = sorted(text.xyann[1] for text in axis.texts)
    assert heights[0] == 0.20 and heights[1] == 0.50  # a mark alone stays at its line's end
    assert heights[2] - heights[1] >= MARK_GAP - 1e-9
    plt.close(figure)


def test_cpu_per_sample_uses_the_batch_size(inputs):
    figure = draw("sharing_cpu", inputs, batch_size=32)
    assert "32-sample batches" in figure.axes[0].get_ylabel()
    sharing_cpu = get("sharing_cpu").draw
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        sharing_cpu(inputs["sharing"], batch_size=0)
    with pytest.raises(ValueError, match="sharing lacks the columns"):
        sharing_cpu(inputs["sharing"].drop(columns="consumers_finished"))


def test_the_same_tables_redraw_byte_identical_files(inputs, tmp_path):
    first = save(draw("echo_on_stall", inputs), tmp_path / "a" / "stall.png")
    again = save(draw("echo_on_stall", inputs), tmp_path / "b" / "stall.png")
    for one, other in zip(first, again, strict=True):
        assert one.read_bytes() == other.read_bytes()


def test_save_writes_png_and_pdf_and_nothing_else(inputs, tmp_path):
    png, pdf = save(draw("echo_on_stall", inputs), tmp_path / "figs" / "stall.png")
    assert png.read_bytes().startswith(b"\x89PNG") and pdf.read_bytes().startswith(b"%PDF")
    assert sorted(p.name for p in png.parent.iterdir()) == ["stall.pdf", "stall.png"]
    with pytest.raises(ValueError, match=r"png_path must end in \.png"):
        save(Figure(), tmp_path / "x.svg")


@pytest.mark.slow
def test_command_line_aggregates_draws_and_summarizes(inputs, tmp_path, capsys):
    studies = {name: [str(p) for p in paths] for name, paths in inputs["studies"].items()}
    study_file = tmp_path / "studies.json"
    others = {k: v for k, v in studies.items() if k != "insertion"}
    study_file.write_text(json.dumps({**others, "unused": []}))
    first, *rest = studies["insertion"]
    runs_csv, curves_csv = tmp_path / "results" / "runs.csv", tmp_path / "results" / "curves.csv"
    main(
        ["aggregate", "--study", f"insertion={first}", *rest[:5], "--study", f"insertion={rest[5]}",
         *rest[6:], "--study-file", str(study_file), "--study-file", str(study_file),
         "--runs-out", str(runs_csv), "--curves-out", str(curves_csv)]
    )  # fmt: skip
    assert len(pd.read_csv(runs_csv)) == len(inputs["runs"])
    out = tmp_path / "figures" / "no_harm.png"
    main(
        [
            "figure",
            "no_harm",
            "--runs",
            str(runs_csv),
            "--curves",
            str(curves_csv),
            "--out",
            str(out),
        ]
    )
    assert out.read_bytes().startswith(b"\x89PNG") and out.with_suffix(".pdf").is_file()
    main(
        [
            "figure",
            "sharing_cpu",
            "--sharing",
            str(BENCHMARKS / "shared_loading.csv"),
            "--out",
            str(tmp_path / "figures" / "sharing_cpu.png"),
        ]
    )
    summary = tmp_path / "results" / "summary.csv"
    main(["summary", "--runs", str(runs_csv), "--out", str(summary), "--markdown"])
    table = pd.read_csv(summary)
    assert {"n_runs", "n_reached", "fresh_rel_median", "wall_rel_max"} <= set(table.columns)
    assert "| study | workload |" in capsys.readouterr().out


def test_a_study_without_records_still_gives_tables_summary_and_figures(tmp_path, capsys):
    study_file = tmp_path / "studies.json"
    study_file.write_text(json.dumps({"insertion": [], "no_harm": []}))
    runs_csv, curves_csv = tmp_path / "runs.csv", tmp_path / "curves.csv"
    main(["aggregate", "--study-file", str(study_file), "--runs-out", str(runs_csv),
          "--curves-out", str(curves_csv)])  # fmt: skip
    out = tmp_path / "no_harm.png"
    main(["figure", "no_harm", "--runs", str(runs_csv), "--curves", str(curves_csv),
          "--out", str(out)])  # fmt: skip
    main(["summary", "--runs", str(runs_csv), "--out", str(tmp_path / "summary.csv")])
    assert out.is_file() and "(0 configurations)" in capsys.readouterr().out


def test_command_line_errors_name_the_missing_option_or_bad_file(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["figure", "sharing_throughput", "--out", str(tmp_path / "x.png")])
    assert exit_info.value.code == 2 and "--sharing" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(
            [
                "figure",
                "no_harm",
                "--runs",
                str(tmp_path / "none.csv"),
                "--curves",
                "c.csv",
                "--out",
                str(tmp_path / "x.png"),
            ]
        )
    assert exit_info.value.code == 2 and "--runs: no such file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["aggregate", "--study", "insertion", "--runs-out", "r", "--curves-out", "c"])
    assert exit_info.value.code == 2 and "NAME=PATH" in capsys.readouterr().err
    record = make_record()
    record["reached"] = "yes"
    bad = write_record(tmp_path, record)
    with pytest.raises(SystemExit) as exit_info:
        main(
            [
                "aggregate",
                "--study",
                f"insertion={bad}",
                "--runs-out",
                str(tmp_path / "r.csv"),
                "--curves-out",
                str(tmp_path / "c.csv"),
            ]
        )
    assert exit_info.value.code == 1
    assert bad.name in capsys.readouterr().err and not (tmp_path / "r.csv").exists()


@pytest.fixture
def unreached_baseline(tmp_path):
    """Runs of every relative-value study where the CIFAR baseline never reached the target
    (its echo runs did) and the language model's did; and the runs CSV."""
    records = []
    for seed in range(3):
        records.append(make_record(seed=seed, fresh_to_target=None))
        records += [
            make_record(echo_point=p, echo_factor=2, seed=seed, fresh_to_target=1400)
            for p in ("after_batch", "after_augment", "before_augment")
        ]
        records.append(make_record("lm1b_transformer", seed=seed, fresh_to_target=2000))
        records.append(
            make_record("lm1b_transformer", "after_batch", 2, seed=seed, fresh_to_target=1400)
        )
    paths = [write_record(tmp_path, record) for record in records]
    studies = ["insertion", "echo_factor", "wall_time", "batch_size", "shuffle_buffer"]
    runs = aggregate({study: paths for study in studies})[0]
    csv = tmp_path / "runs.csv"
    runs.to_csv(csv, index=False)
    return runs, csv


UNREACHED = (
    "baseline never reached the target: cifar10_resnet, batch size 32 in study insertion "
    "(accuracy >= 0.8 in 0 of 3 runs, up to 4,000 fresh examples); its 3 echo "
    "configurations have no relative values"
)


def test_the_summary_names_a_baseline_that_never_reached_the_target(
    unreached_baseline, tmp_path, capsys
):
    main(["summary", "--runs", str(unreached_baseline[1]), "--out", str(tmp_path / "s.csv")])
    lines = capsys.readouterr().out.splitlines()
    assert UNREACHED in lines
    assert not any("lm1b_transformer" in line for line in lines)


def _inside(axes, text) -> bool:
    box = text.get_window_extent()
    frame = axes.get_window_extent()
    return frame.x0 - 1 <= box.x0 and box.x1 <= frame.x1 + 1


@pytest.mark.parametrize(
    "name", ["fresh_by_echo_point", "fresh_vs_echo_factor", "wall_time_vs_echo_factor",
             "batch_size", "shuffle_buffer"]
)  # fmt: skip
def test_a_baseline_that_never_reached_the_target_is_said_in_words(unreached_baseline, name):
    figure = draw(name, {"runs": unreached_baseline[0]})
    footnote = " ".join(texts(figure).split())  # finish wraps the notes
    assert UNREACHED[1:].replace("insertion", get(name).study) in footnote
    cifar = [a for a in figure.axes if a.get_visible() and "cifar10_resnet" in a.get_title()]
    for axes in cifar or figure.axes[:1]:
        notes = [t for t in axes.texts if BASELINE_UNREACHED in t.get_text().replace("\n", " ")]
        assert len(notes) == 1 and _inside(axes, notes[0])
        assert "no baseline" not in [t.get_text() for t in axes.texts]
        assert all(_inside(axes, t) for t in axes.texts)  # e.g. "not reached (0/3)"


def test_a_bar_figure_keeps_the_slot_of_a_workload_without_bars(unreached_baseline):
    figure = draw("fresh_by_echo_point", {"runs": unreached_baseline[0]})
    axes = figure.axes[0]
    low, high = axes.get_xlim()
    assert low <= -0.4 and high >= 1.4  # both workloads' slots, though CIFAR has no bar
    assert [tick.get_text() for tick in axes.get_xticklabels()] == [
        "cifar10_resnet",
        "lm1b_transformer",
    ]


def test_the_echo_points_are_echos_in_plotting_order():
    """analysis does not import echo (see test_analysis); its order is stated, and checked."""
    import echo

    schema = json.loads((Path(__file__).parents[1] / SCHEMA).read_text())
    assert ("none", *reversed(echo.ECHO_POINTS)) == ECHO_POINTS
    assert set(ECHO_POINTS) == set(schema["properties"]["echo_point"]["enum"])


def test_a_log2_axis_keeps_small_positive_values_in_view():
    """A panel with the ideal 1/e down to 1/16 and error bars up to 1.4: its linear margin
    reaches below 0, which once reset the whole axis to 1-2 and hid every point under 1."""
    import numpy as np
    from matplotlib.figure import Figure as Drawing

    from analysis.figures._common import log2_axis

    axes = Drawing().subplots()
    grid = np.geomspace(1, 16, 64)
    axes.plot(grid, 1 / grid)
    axes.errorbar([1, 2, 4], [1.0, 0.6, 0.25], yerr=[[0.2, 0.1, 0.05], [0.36, 0.2, 0.1]])
    log2_axis(axes, "y")
    low, high = axes.get_ylim()
    assert 0 < low <= 1 / 16 and high >= 1.36 and axes.get_yscale() == "log"
    empty = Drawing().subplots()
    empty.plot([1, 2], [np.nan, np.nan])
    log2_axis(empty, "y")
    assert empty.get_ylim() == (1, 2)
