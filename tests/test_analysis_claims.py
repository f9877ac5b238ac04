"""The protocol estimator (best trial per search, expected best of k) and the claims table:
the paired sign test returns every verdict at its stated level, and the table decides claims
from records."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_analysis import make_record, tuned_record, write_record

from analysis import aggregate
from analysis.claims import (
    CLAIM_COLUMNS,
    CLAIMS,
    MIXED_NUMERICS,
    NO_DATA,
    NOT_REPRODUCED,
    NOT_RESOLVED,
    REPRODUCED,
    claims_table,
    combine,
    headlines,
    markdown,
)
from analysis.claims.rules import ALPHA, MIN_PAIRS, compare, sign_p
from analysis.cli import main
from analysis.protocol import SEARCHED, best_of_searches, expected_best_curves
from analysis.time_to_target import relative_to_baseline, summarize


def searched_runs(tmp_path: Path, conditions: dict, study: str = "insertion") -> pd.DataFrame:
    """``conditions``: (echo_point, factor) -> per repetition, the trials' fresh values."""
    records = [
        tuned_record(point, factor, repetition, trial, fresh)
        for (point, factor), searches in conditions.items()
        for repetition, trials in enumerate(searches)
        for trial, fresh in enumerate(trials)
    ]
    return aggregate({study: [write_record(tmp_path, r) for r in records]})[0]


# --- the rules --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("x", "y", "margin", "verdict"),
    [
        ([1, 2, 3, 4, 5], [2, 3, 4, 5, 6], 0.0, REPRODUCED),  # 5 of 5 pairs below
        ([1, 2, 3, 4, 5], [2, 3, 4, 5, 6], -0.5, REPRODUCED),  # below by more than the margin
        ([1, 2, 3, 4, 5], [2, 3, 4, 5, 6], -1.0, NOT_RESOLVED),  # every pair a tie
        ([2, 3, 4, 5, 6], [1, 2, 3, 4, 5], 0.0, NOT_REPRODUCED),  # 5 of 5 against
        ([1, 2, 3, 4, 7], [2, 3, 4, 5, 6], 0.0, NOT_RESOLVED),  # 4 of 5: p = 0.19
        ([1, 2, 3], [2, 3, 4], 0.0, NOT_RESOLVED),  # 3 pairs can never reproduce at 5%
        ([6, 7, 8, 9, 10], [5, 6, 7, 8, 9], 1.5, REPRODUCED),  # "at most", within 1.5
        ([], [], 0.0, NO_DATA),
    ],
)
def test_the_paired_sign_test_returns_each_verdict(x, y, margin, verdict):
    assert compare(x, y, margin).verdict == verdict


def test_unreached_runs_count_against_their_side_and_two_misses_tie():
    inf = math.inf
    found = compare([1, 2, inf, 4, 5, inf], [2, 3, 4, inf, 6, inf])
    assert (found.favour, found.against, found.ties) == (4, 1, 1)
    assert (found.reached_x, found.reached_y, found.n_x) == (4, 4, 6)
    assert found.ratios == tuple(sorted([1 / 2, 2 / 3, 5 / 6]))  # pairs where both reached
    assert "reached 4/6 vs 4/6" in found.describe()


def test_the_rule_says_reproduced_at_most_alpha_of_the_time_under_its_null():
    """At the claim's boundary (x and y alike, or x = y + margin) the sign test's false
    positives stay below ALPHA, whatever the noise; the interval covers as stated."""
    rng = np.random.default_rng(0)
    for margin in (0.0, 0.3):
        hits = 0
        for _ in range(4000):
            y = rng.lognormal(size=5)
            x = y * rng.lognormal(sigma=0.5, size=5) + margin
            hits += compare(x, y, margin).verdict == REPRODUCED
        assert hits / 4000 <= ALPHA
        assert hits / 4000 == pytest.approx(sign_p(5, 5), abs=0.012)  # the exact rate
    assert MIN_PAIRS == 5 and sign_p(4, 4) > ALPHA >= sign_p(5, 5)


def test_the_interval_holds_a_value_and_says_its_coverage():
    found = compare([2, 2.4, 3, 3.3, 2.7], [1, 1, 1, 1, 1])
    assert found.interval == (2.0, 3.3) and found.coverage == pytest.approx(0.9375)
    assert found.holds(3.25) and not found.holds(3.4)


@pytest.mark.parametrize(
    ("parts", "p_against", "verdict"),
    [
        ([REPRODUCED, REPRODUCED], [1.0, 1.0], REPRODUCED),
        ([NOT_REPRODUCED], [0.031], NOT_REPRODUCED),
        # one part of three refuted at 0.031 > 0.05 / 3: not enough against the claim
        ([REPRODUCED, NOT_RESOLVED, NOT_REPRODUCED], [1.0, 0.5, 0.031], NOT_RESOLVED),
        ([REPRODUCED, NOT_RESOLVED, NOT_REPRODUCED], [1.0, 0.5, 0.008], NOT_REPRODUCED),
        ([REPRODUCED, NOT_RESOLVED], [1.0, 0.5], NOT_RESOLVED),
        ([REPRODUCED, NO_DATA], [1.0, 1.0], NOT_RESOLVED),  # a part missing: not all reproduced
        ([NOT_REPRODUCED, NO_DATA], [0.031, 1.0], NOT_REPRODUCED),  # one part with data
        ([NO_DATA], [1.0], NO_DATA),
        ([], [], NO_DATA),
    ],
)
def test_combining_parts_refutes_a_claim_at_alpha_over_its_parts(parts, p_against, verdict):
    assert combine(parts, p_against) == verdict


# --- the estimator ----------------------------------------------------------------------


def test_each_search_is_its_trial_with_the_fewest_fresh_examples(tmp_path):
    runs = searched_runs(
        tmp_path,
        {
            ("none", 1.0): [[2000, 1500, None], [1800, 2400, 2200]],
            ("after_augment", 2.0): [[None, None, None], [1000, 900, 1200]],
        },
    )
    best = best_of_searches(runs)
    assert len(best) == 4
    assert (best["hparams"] == SEARCHED).all()
    baseline = best[best["echo_point"] == "none"].set_index("seed")
    # refined crossings (50 below the grid's) are what the table uses
    assert baseline["fresh_examples_to_target"].tolist() == [1450, 1750]
    assert baseline["trials"].tolist() == [3, 3]
    assert baseline["trials_reached"].tolist() == [2, 3]
    echo = best[best["echo_point"] == "after_augment"].set_index("seed")
    assert not echo.loc[0, "reached"] and echo.loc[1, "fresh_examples_to_target"] == 850
    summary = summarize(relative_to_baseline(runs))
    row = summary[summary["echo_point"] == "after_augment"].iloc[0]
    # over searches: n_runs are the 2 searches, the median of the baseline's bests is 1600
    assert (row["n_runs"], row["n_reached"]) == (2, 1)
    assert row["fresh_rel_median"] == pytest.approx(850 / 1600)


def test_runs_without_a_search_pass_through(tmp_path):
    runs = aggregate({"s": [write_record(tmp_path, make_record(seed=s)) for s in range(2)]})[0]
    assert best_of_searches(runs) is runs
    assert expected_best_curves(runs).empty


def test_expected_best_curves_count_a_miss_at_its_cap(tmp_path):
    runs = searched_runs(
        tmp_path, {("none", 1.0): [[None, 1000]], ("after_batch", 2.0): [[800, 900]]}
    )
    curves = expected_best_curves(runs)
    baseline = curves[curves["echo_point"] == "none"].set_index("k")
    cap = runs.loc[~runs["reached"], "final_fresh_examples"].iloc[0]
    assert baseline.loc[1, "expected_best_fresh"] == pytest.approx(cap)  # its first trial
    assert baseline.loc[2, "expected_best_fresh"] == pytest.approx(950)
    assert baseline["p_any_reached"].tolist() == [0.0, 1.0]
    assert set(curves["k"]) == {1, 2}


# --- the claims table -------------------------------------------------------------------


BASELINE = [[2000, 2100, 2600], [2200, 2050, 3000], [1900, 2400, 2500], [2300, 2150, 2700],
            [1950, 2250, 2800]]  # fmt: skip
"""Five searches of three trials: bests 2000, 2050, 1900, 2150, 1950."""
FEWER = [[1100, 1300, 1500], [1200, 1250, 1700], [1000, 1400, 1600], [1150, 1500, 1450],
         [1050, 1600, 1300]]  # fmt: skip


def _insertion(tmp_path: Path, echo: list[list[int | None]]) -> pd.DataFrame:
    return searched_runs(tmp_path, {("none", 1.0): BASELINE, ("before_augment", 2.0): echo})


@pytest.mark.parametrize(
    ("echo", "verdict"),
    [
        (FEWER, REPRODUCED),
        (BASELINE, NOT_RESOLVED),  # every pair a tie: no evidence either way
        ([[2500, 2600, 2700]] * 5, NOT_REPRODUCED),  # every search above its pair
        ([[1500] * 3, [2100] * 3, *[[1500] * 3] * 3], NOT_RESOLVED),  # 4 of 5 pairs
    ],
)
def test_the_claims_table_decides_fewer_fresh_examples_at_e2(tmp_path, echo, verdict):
    table = claims_table(_insertion(tmp_path, echo))
    assert list(table.columns) == CLAIM_COLUMNS
    assert list(table["claim"]) == [claim.name for claim in CLAIMS]
    row = table.set_index("claim").loc["claim_fewer_fresh_at_e2"]
    assert row["verdict"] == verdict
    assert row["rule"] == (
        "per workload: e=2 < baseline, a pair within the resolution tied, paired sign test "
        "both ways (searches or seeds)"
    )
    assert "cifar10_resnet" in row["ours"] and "reached 5/5 vs 5/5" in row["ours"]


def test_claims_without_their_study_have_no_data_and_never_below_is_decided(tmp_path):
    table = claims_table(_insertion(tmp_path, FEWER)).set_index("claim")
    assert table.loc["claim_shuffle_buffer_helps", "verdict"] == NO_DATA
    assert table.loc["claim_shuffle_buffer_helps", "ours"] == "no runs yet"
    # refined bests per search 950..1150 against the baseline's / 2 = 925..1050, pair by pair
    assert table.loc["claim_never_below_1_over_e", "verdict"] == REPRODUCED
    below = [[600, 700, 900]] * 5
    (tmp_path / "below").mkdir()
    table = claims_table(_insertion(tmp_path / "below", below))
    assert table.set_index("claim").loc["claim_never_below_1_over_e", "verdict"] == NOT_REPRODUCED


def test_a_study_pooling_records_of_two_numerics_modes_decides_nothing(tmp_path):
    runs = _insertion(tmp_path, FEWER)
    assert set(runs["numerics"]) == {"unpinned"}
    runs.loc[runs.index[:5], "numerics"] = "portable (torch 2.14.1, MKL 2024.0, oneDNN 3.12.0)"
    table = claims_table(runs).set_index("claim")
    row = table.loc["claim_fewer_fresh_at_e2"]
    assert row["verdict"] == MIXED_NUMERICS
    assert "study insertion pools records of different numerics" in row["ours"]
    assert f"{len(runs) - 5} unpinned, 5 portable" in row["ours"]
    assert table.loc["claim_shuffle_buffer_helps", "verdict"] == NO_DATA  # another study


def test_the_claims_command_writes_the_table_and_its_markdown(tmp_path, capsys):
    from analysis.records import write_tables

    runs = _insertion(tmp_path, FEWER)
    write_tables(runs, pd.DataFrame(), tmp_path / "runs.csv", tmp_path / "curves.csv")
    main(["claims", "--runs", str(tmp_path / "runs.csv"), "--out", str(tmp_path / "claims.csv")])
    table = pd.read_csv(tmp_path / "claims.csv", dtype=str, keep_default_na=False)
    assert table.set_index("claim").loc["claim_fewer_fresh_at_e2", "verdict"] == REPRODUCED
    text = (tmp_path / "claims.md").read_text()
    assert text == markdown(table)
    assert "**reproduced**" in text and "| claim |" in text
    assert "claims.md" in capsys.readouterr().out
    short = (tmp_path / "claims_headlines.md").read_text()
    assert short == headlines(table) and len(short.splitlines()) == 2 + len(table)


def test_study_cost_counts_landed_runs_and_estimates_the_plan(tmp_path):
    from analysis.protocol import CONDITION, study_cost

    runs = searched_runs(tmp_path, {("none", 1.0): [[1000, None]]})
    landed = runs[["study", "record", "workload", "echo_point", "echo_factor"]].to_dict("records")
    planned = pd.DataFrame(
        landed
        + [{"study": "insertion", "record": f"c{i}", "workload": "cifar10_resnet",
            "echo_point": "after_batch", "echo_factor": 2.0} for i in range(8)]
        + [{"study": "insertion", "record": f"l{i}", "workload": "lm1b_transformer",
            "echo_point": "none", "echo_factor": 1.0} for i in range(4)]
    ).assign(shuffle_buffer=0, batch_size="default")  # fmt: skip
    cost = study_cost(runs, planned).set_index("workload")
    assert cost.loc["cifar10_resnet", "planned"] == 10
    assert cost.loc["cifar10_resnet", "landed"] == 2 and cost.loc["cifar10_resnet", "reached"] == 1
    assert cost.loc["cifar10_resnet", "mean_s"] == pytest.approx(10.0)  # make_record's total_s
    assert cost.loc["cifar10_resnet", "estimate_s"] == pytest.approx(100.0)
    assert cost.loc["lm1b_transformer", "landed"] == 0  # nothing landed: the overall mean
    assert cost.loc["lm1b_transformer", "estimate_s"] == pytest.approx(40.0)
    assert cost.loc["cifar10_resnet", "eval_share"] > 0
    by_condition = study_cost(runs, planned, by=CONDITION)
    assert len(by_condition) == 3  # the landed baseline, planned batch echoing, lm1b
    assert by_condition["planned"].tolist() == [2, 8, 4]


def test_the_cost_summary_says_what_is_left_and_when_nothing_is():
    from analysis.cli import remaining_line

    assert "the remaining 8 at their conditions' mean cost: about 0.3 core-hours" in (
        remaining_line(922, 914, 1080.0)
    )
    done = remaining_line(922, 922, -1e-9)  # rounding leaves a sliver of negative seconds
    assert done.endswith("every one has landed") and "core-hours" not in done


def test_a_search_still_training_is_left_out_of_the_claims(tmp_path):
    # the fifth search has 2 of its 3 trials: its (worse) best so far does not count, so
    # 4 searches are left, which cannot reproduce at 5%
    echo = [*FEWER[:4], [5000, 5000]]
    row = claims_table(_insertion(tmp_path, echo)).set_index("claim").loc["claim_fewer_fresh_at_e2"]
    assert row["verdict"] == NOT_RESOLVED and "4 for, 0 against, 0 tied" in row["ours"]


def test_refresh_blocks_shows_each_named_file(tmp_path):
    from analysis.cli import refresh_blocks

    (tmp_path / "x.md").write_text("new\n")
    document = "a\n<!-- generated: x.md -->\nold\n<!-- end generated -->\nb\n"
    assert refresh_blocks(document, tmp_path) == (
        "a\n<!-- generated: x.md -->\nnew\n<!-- end generated -->\nb\n"
    )
    with pytest.raises(ValueError, match=r"names y\.md"):
        refresh_blocks(document.replace("x.md", "y.md"), tmp_path)


def test_readme_shows_the_committed_generated_tables_as_the_code_wrote_them():
    from analysis.cli import GENERATED

    root = Path(__file__).resolve().parents[1]
    blocks = GENERATED.findall((root / "README.md").read_text())
    shown = {b[1] for b in blocks}
    assert {"results/claims_headlines.md", "results/protocol/claims_headlines.md"} <= shown
    for _, name, text, _ in blocks:
        assert text == (root / name).read_text(), f"README's {name} block is not the file"
    # one line per claim keeps the front door short; every part is on the results pages
    assert len((root / "README.md").read_text().splitlines()) <= 220


def test_a_planned_workload_without_searches_keeps_every_workload_undecided(tmp_path):
    runs = _insertion(tmp_path, FEWER)
    plan = {"insertion": {"cifar10_resnet": 3, "coco_ssd": 3}}
    row = claims_table(runs, plan=plan).set_index("claim").loc["claim_fewer_fresh_at_e2"]
    assert row["verdict"] == NOT_RESOLVED and "coco_ssd: e=2 / baseline no pairs" in row["ours"]
    assert claims_table(runs).set_index("claim").loc["claim_fewer_fresh_at_e2", "verdict"] == (
        REPRODUCED
    )


# --- resolution ---------------------------------------------------------------------------


def test_the_resolution_rule_returns_each_verdict(tmp_path):
    """The step between located crossings (refined every 50 fresh examples here) against the
    tuned baseline's median, and evaluation's share of training, against their goals."""
    from analysis.resolution import EVAL_SHARE_GOAL, resolution_table

    for folder in "abc":
        (tmp_path / folder).mkdir()
    fine = searched_runs(tmp_path / "a", {("none", 1.0): [[2000, 1500, None], [1800, 2400, 2200]]})
    fine = fine.assign(eval_s=fine["final_wall_s"] * 0.1)
    row = resolution_table(fine).iloc[0]
    # the searches' bests are 1450 and 1750 (refined): median 1600, so 50 is 1/32 of it
    assert (row["baseline_n"], row["baseline_reached"]) == (2, 2)
    assert row["baseline_median"] == 1600 and row["one_in"] == pytest.approx(32)
    assert row["eval_share"] <= EVAL_SHARE_GOAL and row["verdict"] == "meets"

    coarse = searched_runs(tmp_path / "b", {("none", 1.0): [[600, 700], [650, None]]})
    coarse = coarse.assign(eval_s=coarse["final_wall_s"] * 0.1)
    assert resolution_table(coarse).iloc[0]["verdict"] == "crossing step over 1/20"

    costly = fine.assign(eval_s=fine["final_wall_s"] * 0.3)
    assert resolution_table(costly).iloc[0]["verdict"] == "evaluation over 25% of training"
    both = coarse.assign(eval_s=coarse["final_wall_s"])
    assert resolution_table(both).iloc[0]["verdict"] == (
        "crossing step over 1/20; evaluation over 25% of training"
    )

    unreached = searched_runs(tmp_path / "c", {("none", 1.0): [[None, None]]})
    assert resolution_table(unreached).iloc[0]["verdict"] == "no baseline"


def test_the_resolution_command_prints_the_table_and_its_rule(tmp_path, capsys):
    runs = searched_runs(tmp_path, {("none", 1.0): [[2000, 1500], [1800, 2400]]})
    runs.to_csv(tmp_path / "runs.csv", index=False)
    main(["resolution", "--runs", str(tmp_path / "runs.csv")])
    out = capsys.readouterr().out
    assert "| insertion | cifar10_resnet | 50 |" in out
    assert "Rule: meets when spacing <= 1/20 and eval_share <= 25%" in out
