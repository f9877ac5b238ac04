"""A search's trials censored against their incumbent while training, and a crossing at the
first evaluation located below it: the harness and ``python -m experiments.run`` on a
throwaway workload."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from experiments.run import main
from run_contract.censoring import crossing
from run_contract.identity import RunSpec
from run_contract.record import floored, validate

# Trials of this toy search reach the target at very different points (trial 0 at 32 fresh
# examples, trials 1 and 2 after 128): the later ones pass the incumbent without reaching it.
SEARCH = {"separation": 2.5, "noise": 1.5}


def trial(workload: str, number: int) -> RunSpec:
    return RunSpec(
        workload=workload, hparams=SEARCH, repetition=0, trial=number, seed=number,
        budget_cap=2.0, resolution=16, eval_every_fresh=64,
    )  # fmt: skip


def train(spec: RunSpec, out_dir: Path, *extra: str) -> dict:
    out = spec.path(str(out_dir))
    assert main([*spec.args(), "--threads", "1", *extra, "--out", out]) == 0
    return json.loads(Path(out).read_text())


def untimed(record: dict) -> list:
    return [{k: v for k, v in row.items() if k != "wall_s"} for row in record["eval_curve"]]


def test_censored_trials_stop_past_their_incumbent_and_the_search_best_is_unchanged(
    tmp_path, toy_workload
):
    plain, censored = tmp_path / "plain", tmp_path / "censored"
    full = [train(trial(toy_workload, t), plain) for t in range(3)]
    cut = [train(trial(toy_workload, t), censored, "--censor", str(censored)) for t in range(3)]
    for record in cut:
        validate(record)
    assert "censored" not in cut[0] and cut[0]["reached"]
    best = crossing(full[0])
    for t in (1, 2):
        assert cut[t]["censored"] == {"at_fresh": 64, "incumbent": best, "incumbent_trial": 0}
        assert not cut[t]["reached"] and cut[t]["final"]["fresh_examples"] == 64
        # uncensored, it reached the target later than the incumbent: it could not win
        assert crossing(full[t]) > best
        # the same training up to where it stopped
        assert untimed(cut[t]) == untimed(full[t])[: len(cut[t]["eval_curve"])]
        assert full[t]["final"]["fresh_examples"] > cut[t]["final"]["fresh_examples"]
    found = [crossing(r) for r in cut if crossing(r) is not None]
    assert min(found) == min(crossing(r) for r in full)


def test_a_censored_trial_needs_its_search_earlier_records(tmp_path, toy_workload, capsys):
    spec = trial(toy_workload, 2)
    with pytest.raises(SystemExit) as stop:
        main([*spec.args(), "--censor", str(tmp_path), "--out", spec.path(str(tmp_path))])
    assert stop.value.code == 2
    message = capsys.readouterr().err
    assert "argument --censor" in message and "-t0-seed0.json" in message
    assert "train in order" in message


def test_a_crossing_at_the_first_evaluation_is_located_below_it(tmp_path, toy_workload):
    # Seed 19 of this search reaches the target at 16 fresh examples, misses it at 32 and
    # 48 and reaches it again at 64, the first evaluation: a bisection of the models kept at
    # 16, 32 and 48 tries 32 and 48 and would stop at 64.
    spec = RunSpec(
        workload=toy_workload, hparams=SEARCH, repetition=0, trial=19, seed=19, max_fresh=64,
    )  # fmt: skip
    fine = train(replace(spec, eval_every_fresh=16, stop_at_target=False), tmp_path / "fine")
    reached = [row["metric"] >= 0.9 for row in fine["eval_curve"]]
    assert reached == [False, True, False, False, True]
    coarse = train(replace(spec, eval_every_fresh=64, resolution=16), tmp_path / "coarse")
    validate(coarse)
    refined = coarse["refined"]
    assert coarse["fresh_examples_to_target"] == 64
    assert refined["fresh_examples_to_target"] == 16 and refined["below_first"] is True
    assert refined["evaluations"] == 3  # 32 and 48 by the bisection, then 16
    assert floored(coarse) is None


def test_a_record_floored_at_its_first_evaluation_is_refused_as_stale(tmp_path, toy_workload):
    from experiments import registry

    spec = RunSpec(
        workload=toy_workload, hparams=SEARCH, repetition=0, trial=19, seed=19, max_fresh=64,
        eval_every_fresh=64, resolution=16,
    )  # fmt: skip
    record = train(spec, tmp_path)
    defaults = registry.defaults(toy_workload, "cpu")
    assert spec.mismatches(record, defaults) == []
    # as the bisection alone left it: at the first evaluation, the kept models not all tried
    old = {**record, "fresh_examples_to_target": 64}
    old["refined"] = {k: v for k, v in record["refined"].items() if k != "below_first"}
    old["refined"]["fresh_examples_to_target"] = 64
    assert floored(old) == 64
    (line,) = spec.mismatches(old, defaults)
    assert line.startswith("refined: the crossing sits at the first evaluation (64 fresh")
