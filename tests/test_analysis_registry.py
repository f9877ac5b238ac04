"""The figure registry (`analysis.figures._registry`): a figure is one module with one
``@figure`` registration, and the command line, the reference table, the workflow and the
report find it there."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from matplotlib.figure import Figure
from project_copy import project_copy
from test_analysis import make_record, write_record

from analysis import aggregate
from analysis.cli import main
from analysis.figures import Sheet, _registry, figure, get, names
from analysis.reference import REFERENCE_COLUMNS, for_figure

ROOT = Path(__file__).resolve().parents[1]
TOY_CAPTION = "Toy figure: how many runs each workload has in the study."


def _runs(tmp_path: Path) -> pd.DataFrame:
    records = [
        make_record(workload, seed=seed) for workload in ("a_net", "b_net") for seed in (0, 1)
    ]
    return aggregate({"insertion": [write_record(tmp_path, r) for r in records]})[0]


def test_every_figure_lives_in_a_module_named_after_it():
    for name in names():
        spec = get(name)
        assert spec.name == name and spec.caption
        assert spec.draw.__module__ == f"analysis.figures.{name}"
        assert set(spec.inputs) <= set(_registry.TABLES)


def test_a_new_figure_module_is_registered_drawn_and_offered_by_the_cli(
    toy_figure, tmp_path, capsys
):
    spec = get(toy_figure)
    assert toy_figure in names() and spec.study == "insertion" and spec.inputs == ("runs",)
    assert spec.caption == TOY_CAPTION
    assert for_figure(None, toy_figure).empty  # the reference table may name it
    drawn = spec.draw(_runs(tmp_path), color="red")
    assert isinstance(drawn, Figure)
    assert "2 workloads in study 'insertion'." in drawn.texts[0].get_text()  # notes: finish
    assert "runs" in [t.get_text() for legend in drawn.legends for t in legend.get_texts()]
    with pytest.raises(SystemExit):
        main(["figure", "--help"])
    assert toy_figure in capsys.readouterr().out
    csv = tmp_path / "runs.csv"
    _runs(tmp_path).to_csv(csv, index=False)
    main(["figure", toy_figure, "--runs", str(csv), "--out", str(tmp_path / "toy.png")])
    assert (tmp_path / "toy.png").read_bytes().startswith(b"\x89PNG")
    assert (tmp_path / "toy.pdf").is_file()


def test_a_reference_naming_an_unregistered_figure_is_refused_when_drawing(toy_figure, tmp_path):
    row = dict.fromkeys(REFERENCE_COLUMNS, "") | {"our_figure": "no_harms", "kind": "qualitative"}
    message = r"our_figure 'no_harms' is not a registered figure; valid: .*\bno_harm\b"
    with pytest.raises(ValueError, match=message):
        get(toy_figure).draw(_runs(tmp_path), reference=pd.DataFrame([row]))


def test_a_registered_figure_checks_its_tables_and_arguments(toy_figure, tmp_path):
    draw = get(toy_figure).draw
    with pytest.raises(ValueError, match=r"runs lacks the columns \['workload'\]"):
        draw(pd.DataFrame({"study": ["insertion"]}))
    with pytest.raises(TypeError, match="colour"):
        draw(_runs(tmp_path), colour="red")
    assert "insertion" not in draw(_runs(tmp_path), study="other").texts[0].get_text()


@pytest.mark.parametrize(
    ("name", "inputs", "module", "message"),
    [
        ("other", {"runs": []}, "toy_figures.toy_figure", "module of the same name"),
        ("toy_figure", {"tables": []}, "toy_figures.toy_figure", r"inputs \['tables'\]"),
        ("toy_figure", {"runs": []}, "elsewhere.toy_figure", "already registered"),
    ],
)
def test_registration_errors_name_the_figure(toy_figure, name, inputs, module, message):
    def draw(sheet: Sheet) -> Figure:
        return Figure()

    draw.__module__ = module
    with pytest.raises(ValueError, match=message):
        figure(name, inputs=inputs, caption="c")(draw)


def test_options_must_be_keyword_only(toy_figure):
    def toy_figure_positional(sheet: Sheet, color: str = "red") -> Figure:
        return Figure()

    toy_figure_positional.__module__ = "toy_figures.toy_figure"
    with pytest.raises(ValueError, match="keyword-only options"):
        figure(toy_figure, inputs={"runs": []}, caption="c")(toy_figure_positional)


def test_an_unknown_figure_lists_the_registered_ones():
    valid = "valid: baseline_best_of_k, batch_size"
    with pytest.raises(ValueError, match=f"figure='nope' is not registered; {valid}"):
        get("nope")


@pytest.mark.skipif(shutil.which("git") is None, reason="copies the checkout with git ls-files")
@pytest.mark.slow
def test_a_new_figure_file_appears_in_snakemake_figures_and_the_report(tmp_path):
    project = project_copy(tmp_path / "project")
    shutil.copy(ROOT / "tests/toy_figure.py", project / "analysis/figures/toy_figure.py")
    for table in ("runs.csv", "eval_curves.csv"):  # newer than the records: no aggregate job
        os.utime(project / "results" / table)
    snakemake = [str(Path(sys.executable).with_name("snakemake"))]
    env = {**os.environ, "PYTHONPATH": str(project)}

    def run(*args: str) -> str:
        done = subprocess.run(
            [*snakemake, *args], cwd=project, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout + done.stderr

    planned = run("-n", "figures", "--config", "figures_dir=fresh")
    assert "fresh/toy_figure.png" in planned and "fresh/no_harm.png" in planned
    run("--cores", "1", "paper_figures/toy_figure.png")
    assert (project / "paper_figures/toy_figure.pdf").is_file()
    run("--report", "report.html")
    report = (project / "report.html").read_text()
    assert "toy_figure.png" in report and TOY_CAPTION in report
