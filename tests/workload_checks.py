"""Checks any workload must pass, shared by the workload tests: a short training run through
``python -m experiments.run`` (`run_workload`), a paper-scale run on a tiny fixture of the
workload's real data format (`PaperScale`, `check_paper_scale_run`), and a paper-scale run
without its data (`check_paper_scale_without_data`). ``tests/test_experiments_workloads.py``
runs them over every registered workload."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from experiments import registry
from experiments.run import main
from run_contract.record import validate

SMALL_LM = {
    "d_model": 16,
    "layers": 1,
    "heads": 2,
    "vocab_size": 300,
    "context": 8,
    "eval_windows": 4,
}
"""Hyper-parameters of a tiny Transformer, for the language models' paper-scale cases."""


def cached_bpe(corpus: str) -> Callable[[dict[str, Any], Path], None]:
    """A `PaperScale.check` for a language model trained with `SMALL_LM`: its BPE is cached by
    the data, as a ``transformers`` tokenizer folder named after ``corpus``."""

    def check(record: dict[str, Any], folder: Path) -> None:
        assert (folder / f"{corpus}_bpe_{SMALL_LM['vocab_size']}" / "tokenizer.json").is_file()

    return check


def run_workload(folder: Path, workload: str, *args: str) -> dict[str, Any]:
    """Train ``workload`` on one thread with ``python -m experiments.run``'s options ``args``;
    the run must succeed. Returns its record, written to ``folder / "record.json"``."""
    out = folder / "record.json"
    assert main(["--workload", workload, "--threads", "1", *args, "--out", str(out)]) == 0
    return json.loads(out.read_text())


def _no_more_checks(record: dict[str, Any], folder: Path) -> None:
    """A `PaperScale` with nothing to check beyond the contract."""


@dataclass(frozen=True)
class PaperScale:
    """How a workload's test trains it at paper scale, on the CPU, on a tiny fixture of its
    real data format (declared as ``PAPER_SCALE`` in ``tests/test_experiments_<name>.py``).

    Attributes:
        write_fixture: ``write_fixture(folder)`` writes the data the run reads
            (``--data-dir folder``).
        batch_size: Examples per batch.
        max_fresh: The fresh-example budget.
        eval_every_fresh: The evaluation interval in fresh examples.
        steps: The training steps the run takes.
        missing: What the one-line error of a paper-scale run without data names (a file or
            folder the data must hold).
        hparams: Hyper-parameter overrides (``--hparam``), e.g. a small model. Default none.
        echo: ``(echo point, echo factor)``. Default None: no echo.
        check: ``check(record, folder)`` asserts what else the run must show. Default:
            nothing.
    """

    write_fixture: Callable[[Path], Any]
    batch_size: int
    max_fresh: int
    eval_every_fresh: int
    steps: int
    missing: str
    hparams: Mapping[str, Any] = field(default_factory=dict)
    echo: tuple[str, float] | None = None
    check: Callable[[dict[str, Any], Path], None] = _no_more_checks

    def args(self, folder: Path) -> list[str]:
        """The ``python -m experiments.run`` options of this run, reading ``folder``."""
        args = ["--scale", "paper", "--data-dir", str(folder), "--device", "cpu"]
        for name, value in self.hparams.items():
            args += ["--hparam", f"{name}={value}"]
        args += ["--batch-size", str(self.batch_size), "--max-fresh", str(self.max_fresh)]
        args += ["--eval-every-fresh", str(self.eval_every_fresh)]
        if self.echo is not None:
            args += ["--echo-point", self.echo[0], "--echo-factor", str(self.echo[1])]
        return args


def check_paper_scale_run(folder: Path, workload: str, case: PaperScale) -> dict[str, Any]:
    """Train ``workload`` as ``case`` says; its record must be valid, carry the declared paper
    target and hyper-parameters (with the case's overrides), stop at the budget after
    ``case.steps`` steps and evaluate every ``eval_every_fresh`` fresh examples and at the end,
    and pass ``case.check``. Returns the record."""
    case.write_fixture(folder)
    record = run_workload(folder, workload, *case.args(folder))
    validate(record)
    cls = registry.get(workload)
    assert record["scale"] == "paper"
    assert record["target"] == cls.targets["paper"].as_dict()
    declared = {**cls.default_hparams["paper"], **case.hparams, "batch_size": case.batch_size}
    assert record["hparams"] == declared
    assert record["final"]["fresh_examples"] == case.max_fresh
    assert record["final"]["steps"] == case.steps
    grid = sorted({*range(0, case.max_fresh, case.eval_every_fresh), case.max_fresh})
    assert [row["fresh_examples"] for row in record["eval_curve"]] == grid
    case.check(record, folder)
    return record


def check_paper_scale_without_data(
    folder: Path, capsys: pytest.CaptureFixture[str], workload: str, case: PaperScale
) -> None:
    """A paper-scale run of ``workload`` reading the empty ``folder`` exits with status 1 and
    one line on stderr, which names ``case.missing``."""
    with pytest.raises(SystemExit) as exit_info:
        main(
            ["--workload", workload, "--scale", "paper", "--data-dir", str(folder),
             "--out", str(folder / "r.json")]
        )  # fmt: skip
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and case.missing in err, err
