"""`analysis.trials` and ``python -m analysis trials``: whether a tuned baseline's expected
best of k trials has flattened by T, the trials per search, against the crossing's step."""

from __future__ import annotations

import pandas as pd
import pytest
from test_analysis import make_record, write_record
from test_analysis_claims import searched_runs

from analysis import aggregate
from analysis.cli import main
from analysis.protocol import expected_best_of_k
from analysis.trials import FLATTENED, trials_table

FLAT = [[2000, 2010, 2020, 2030], [2005, 2015, 2025, 2035]]
"""Two searches of 4 trials whose values differ by less than the step (50): tuning more
gains nothing the study can resolve."""

STEEP = [[2000, 3000, 4000, 5000], [2500, 3500, 4500, 5500]]
"""Two searches whose best keeps falling by more than a step with every trial drawn."""

STEEP_POOL = [fresh - 50 for search in STEEP for fresh in search]
"""STEEP's crossings as the runs table has them (refined 50 fresh examples earlier)."""


def test_a_flat_baseline_is_flattened_and_a_steep_one_is_not(tmp_path):
    (tmp_path / "flat").mkdir()
    (tmp_path / "steep").mkdir()
    flat = trials_table(searched_runs(tmp_path / "flat", {("none", 1.0): FLAT})).iloc[0]
    assert (flat["T"], flat["pool"], flat["pool_reached"], flat["step"]) == (4, 8, 8, 50)
    assert flat["gain_half"] <= flat["step"] and flat["verdict"] == FLATTENED

    steep = trials_table(searched_runs(tmp_path / "steep", {("none", 1.0): STEEP})).iloc[0]
    best_2, best_4, best_8 = expected_best_of_k(STEEP_POOL, [2, 4, 8])
    assert steep["best_half"] == pytest.approx(best_2)
    assert steep["best_T"] == pytest.approx(best_4)
    assert steep["best_2T"] == pytest.approx(best_8)
    assert steep["gain_half"] == pytest.approx(best_2 - best_4)
    assert steep["verdict"] == f"not flattened: T/2 -> T gains {(best_2 - best_4) / 50:.1f} steps"


def test_t_comes_from_the_plan_and_2t_past_the_pool_is_not_made_up(tmp_path):
    """The config's T, not the most trials landed; 2T draws past the pool's size give NaN."""
    runs = searched_runs(tmp_path, {("none", 1.0): STEEP})
    row = trials_table(runs, {("insertion", "cifar10_resnet"): 8}).iloc[0]
    assert row["T"] == 8
    assert row["best_half"] == pytest.approx(expected_best_of_k(STEEP_POOL, 4)[0])
    assert pd.isna(row["best_2T"]) and pd.isna(row["gain_double"])


def test_a_miss_counts_at_its_cap_and_lowers_the_chance_of_reaching(tmp_path):
    runs = searched_runs(tmp_path, {("none", 1.0): [[2000, None, None, None], [None] * 4]})
    row = trials_table(runs).iloc[0]
    assert row["pool_reached"] == 1
    assert row["p_reached_half"] == pytest.approx(1 - (7 / 8) ** 2)
    assert row["best_half"] > 2000  # the misses' caps weigh in


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
    assert "| insertion | cifar10_resnet | 32 | 4 | 8 | 8 |" in out
    assert out.rstrip().endswith("Rule: flattened when gain_half <= step")
