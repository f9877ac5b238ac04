"""`analysis.trials` and ``python -m analysis trials``: whether a tuned baseline's expected
best of k trials has flattened by T, the trials per search, against the crossing's step."""

from __future__ import annotations

import pandas as pd
import pytest
from test_analysis import make_record, tuned_record, write_record
from test_analysis_claims import searched_runs

from analysis import aggregate
from analysis.cli import main
from analysis.protocol import expected_best_curves
from analysis.trials import FLATTENED, trials_table

FLAT = [[2000, 2010, 2020, 2030], [2005, 2015, 2025, 2035]]
"""Two searches of 4 trials whose values differ by less than the step (50): tuning more
gains nothing the study can resolve."""

STEEP = [[5000, 4000, 3000, 2000], [5500, 4500, 3500, 2500]]
"""Two searches whose best keeps falling by more than a step with every trial they run."""


def test_a_flat_baseline_is_flattened_and_a_steep_one_is_not(tmp_path):
    (tmp_path / "flat").mkdir()
    (tmp_path / "steep").mkdir()
    flat = trials_table(searched_runs(tmp_path / "flat", {("none", 1.0): FLAT})).iloc[0]
    assert (flat["T"], flat["searches"], flat["trials"], flat["trials_reached"]) == (4, 2, 8, 8)
    assert flat["step"] == 50 and flat["verdict"] == FLATTENED

    steep = trials_table(searched_runs(tmp_path / "steep", {("none", 1.0): STEEP})).iloc[0]
    # each search's best of its first 2 trials, then of all 4 (crossings refined 50 earlier)
    assert steep["best_half"] == pytest.approx((3950 + 4450) / 2)
    assert steep["best_T"] == pytest.approx((1950 + 2450) / 2)
    assert steep["gain_half"] == pytest.approx(2000)
    assert steep["verdict"] == "not flattened: T/2 -> T gains 40.0 steps"


def test_the_curves_are_the_searches_own_prefixes_not_draws_from_a_pool(tmp_path):
    """A search whose best came first has flattened at k = 1, whatever its later trials: a
    pool of all trials would have mixed them (and could never go below the pool's best)."""
    runs = searched_runs(tmp_path, {("none", 1.0): [[2000, 5000, 5000, 5000]] * 2})
    curve = expected_best_curves(runs)
    assert curve["expected_best_fresh"].tolist() == [1950.0] * 4
    assert curve["p_any_reached"].tolist() == [1.0] * 4


def test_prefix_minima_are_exact_under_incumbent_censoring(tmp_path):
    """Replays two searches with and without censoring: a trial that passed its search's best
    so far (1,950 or 2,350 fresh examples, refined) stopped at the next evaluation (every 200)
    without reaching; every prefix's best is unchanged."""
    full = [[3000, 2000, 4000, 2600], [2400, 3800, 2200, 5000]]
    stops = {(0, 2): 2000, (0, 3): 2000, (1, 1): 2400, (1, 3): 2200}  # where each was censored
    (tmp_path / "full").mkdir()
    (tmp_path / "censored").mkdir()
    whole = expected_best_curves(searched_runs(tmp_path / "full", {("none", 1.0): full}))
    records = []
    for r, search in enumerate(full):
        for t, fresh in enumerate(search):
            record = tuned_record("none", 1.0, r, t, fresh)
            if (r, t) in stops:  # stopped where it passed the incumbent, without reaching
                record.update(fresh_examples_to_target=None, steps_to_target=None)
                record.update(reached=False, wall_s_to_target=None)
                record["eval_curve"] = [
                    row for row in record["eval_curve"] if row["fresh_examples"] <= stops[r, t]
                ]
                record["final"].update(fresh_examples=stops[r, t])
                record["refined"] = tuned_record("none", 1.0, r, t, None)["refined"]
            records.append(record)
    paths = [write_record(tmp_path / "censored", record) for record in records]
    censored = expected_best_curves(aggregate({"insertion": paths})[0])
    assert censored["trials_reached"].iloc[0] == 4 and whole["trials_reached"].iloc[0] == 8
    assert censored["expected_best_fresh"].tolist() == whole["expected_best_fresh"].tolist()
    assert censored["p_any_reached"].tolist() == whole["p_any_reached"].tolist()


def test_t_comes_from_the_plan_and_nothing_past_the_searches_is_made_up(tmp_path):
    """The config's T, not the most trials landed; searches shorter than T give no best_T."""
    runs = searched_runs(tmp_path, {("none", 1.0): STEEP})
    row = trials_table(runs, {("insertion", "cifar10_resnet"): 8}).iloc[0]
    assert row["T"] == 8
    assert row["best_half"] == pytest.approx((1950 + 2450) / 2)
    assert pd.isna(row["best_T"]) and row["verdict"].startswith("not yet")


def test_a_miss_counts_at_its_cap_and_lowers_the_chance_of_reaching(tmp_path):
    runs = searched_runs(tmp_path, {("none", 1.0): [[2000, None, None, None], [None] * 4]})
    row = trials_table(runs).iloc[0]
    assert row["trials_reached"] == 1
    assert row["p_reached_half"] == pytest.approx(0.5)  # one search of two reached by k = 2
    assert row["best_half"] == pytest.approx((1950 + 4000) / 2)  # the miss at its cap


def test_ratio_shift_is_how_far_echos_relative_best_moves_with_k(tmp_path):
    """An echo condition at exactly half the baseline's every trial keeps the ratio 0.5 at
    every k; one whose gain shows only in its best trial moves with k."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    half = [[(fresh - 50) // 2 + 50 for fresh in search] for search in STEEP]
    steady = searched_runs(tmp_path / "a", {("none", 1.0): STEEP, ("before_augment", 2.0): half})
    assert trials_table(steady).iloc[0]["ratio_shift"] == pytest.approx(0.0, abs=1e-9)

    lucky = [[1050, 5000, 5000, 5000], [5500, 5500, 5500, 5500]]
    moving = searched_runs(tmp_path / "b", {("none", 1.0): STEEP, ("before_augment", 2.0): lucky})
    assert trials_table(moving).iloc[0]["ratio_shift"] > 0.1


def test_nothing_tuned_gives_an_empty_table(tmp_path):
    runs = aggregate({"s": [write_record(tmp_path, make_record(seed=s)) for s in range(3)]})[0]
    assert trials_table(runs).empty


def test_the_trials_command_prints_the_table_and_its_rule(tmp_path, capsys):
    runs = searched_runs(tmp_path, {("none", 1.0): FLAT})
    runs.to_csv(tmp_path / "runs.csv", index=False)
    main(["trials", "--runs", str(tmp_path / "runs.csv")])
    out = capsys.readouterr().out
    assert "| insertion | cifar10_resnet | 32 | 4 | 2 | 8 | 8 |" in out
    assert out.rstrip().endswith("Rule: flattened when gain_half <= step")
