"""What censored trials cost before they train: landed trials replayed (analysis.cost), and
``python -m analysis cost`` stating it."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis.cost import censored_costs, expected_costs

CONDITION = {
    "study": "insertion", "workload": "w", "echo_point": "none", "echo_factor": 1.0,
    "shuffle_buffer": 0, "batch_size": 32,
}  # fmt: skip


def record(trial: int, metrics: list[float]) -> dict:
    """A trial evaluated every 100 fresh examples (1 s of training each) to a 0.9 target."""
    curve = [
        {"fresh_examples": 100 * i, "steps": i, "wall_s": float(i), "metric": m, "metrics": {}}
        for i, m in enumerate(metrics)
    ]
    reached = metrics[-1] >= 0.9
    return {
        "search": {"trial": trial}, "target": {"metric": "a", "value": 0.9, "direction": "max"},
        "budget": {"max_fresh": 1000}, "eval_curve": curve, "reached": reached,
        "fresh_examples_to_target": curve[-1]["fresh_examples"] if reached else None,
        "final": {"fresh_examples": curve[-1]["fresh_examples"], "wall_s": float(len(curve) - 1)},
    }  # fmt: skip


# search 0: trial 0 reaches at 200; trial 1 would reach at 500 (censored at 200: 2 of 5 s)
# search 1: trial 0 reaches at 400; trial 1 misses its budget (censored at 400: 4 of 10 s)
RECORDS = {
    "r0t0": record(0, [0.1, 0.5, 0.95]),
    "r0t1": record(1, [0.1, 0.2, 0.3, 0.4, 0.5, 0.95]),
    "r1t0": record(0, [0.1, 0.2, 0.3, 0.5, 0.91]),
    "r1t1": record(1, [0.1] * 11),
}


def runs_table() -> pd.DataFrame:
    rows = []
    for name, rec in RECORDS.items():
        total = 10.0 * rec["final"]["wall_s"]  # set-up and evaluation in proportion
        rows.append({**CONDITION, "record": name, "repetition": int(name[1]),
                     "trial": rec["search"]["trial"], "total_s": total})  # fmt: skip
    return pd.DataFrame(rows)


def test_landed_trials_replayed_give_a_censored_trials_cost():
    (costs,) = censored_costs(runs_table(), read=RECORDS.__getitem__).to_dict("records")
    assert (costs["searches"], costs["trials"]) == (2, 2)
    assert costs["full_s"] == pytest.approx((20 + 50 + 40 + 100) / 4)
    # within its own search: r0t1 stops at 200 (20 of 50 s), r1t1 at 400 (40 of 100 s)
    assert costs["within_s"] == pytest.approx((20 + 40) / 2)
    # against the other search's best: r0t0 vs 400 runs on (20), r0t1 vs 400 stops at 400
    # (40), r1t0 vs 200 stops at 200 (20), r1t1 vs 200 stops at 200 (20)
    assert costs["past_s"] == pytest.approx((20 + 40 + 20 + 20) / 4)


def test_each_planned_run_takes_its_conditions_censored_cost_and_a_new_factor_a_scaled_one():
    costs = censored_costs(runs_table(), read=RECORDS.__getitem__)
    echo = {**CONDITION, "echo_point": "before_augment", "echo_factor": 2.0}
    costs = pd.concat([costs, costs.assign(**echo)], ignore_index=True)
    planned = pd.DataFrame(
        [
            {**CONDITION, "trial": 0, "censored": False},
            {**CONDITION, "trial": 1, "censored": True},
            {**CONDITION, "trial": 7, "censored": True},
            {**CONDITION, "trial": None, "censored": False},
            {**echo, "echo_factor": 8.0, "trial": 9, "censored": True},
            {**CONDITION, "workload": "other", "trial": 3, "censored": True},
        ]
    )
    expected = expected_costs(planned, costs).tolist()
    assert expected[:3] == pytest.approx([52.5, 30.0, 25.0])
    assert pd.isna(expected[3]) and pd.isna(expected[5])  # not tuned; nothing landed
    assert expected[4] == pytest.approx(25.0 * 8 / 2)  # e = 2's, times 4 steps per fresh one


def test_a_slower_host_is_measured_per_workload_and_filled_from_the_others():
    from analysis.cost import speed_since

    steps = {"a": ([0.1] * 10, [0.25] * 10), "b": ([0.2] * 10, [0.4] * 10), "c": ([0.3] * 10, [])}
    rows = [
        {"workload": w, "downstream_s_per_step": s, "since": i == 1}
        for w, sides in steps.items()
        for i, side in enumerate(sides)
        for s in side
    ]
    landed = pd.DataFrame(rows)
    speed = speed_since(landed, landed["since"])
    assert speed["ratio"].to_dict() == pytest.approx({"a": 2.5, "b": 2.0, "c": 2.25})
    assert speed["measured"].to_dict() == {"a": True, "b": True, "c": False}
    # one run fewer than `least` on a side: nothing measured, nothing scaled
    assert speed_since(landed, landed["since"], least=11).empty


def test_the_budget_counts_new_and_retrained_runs_and_says_when_it_is_over():
    from analysis.cli import budget_line
    from analysis.cost import trained_since

    before = pd.DataFrame({"record": ["x", "y"], "total_s": [3600.0, 3600.0]})
    landed = pd.DataFrame({"record": ["x", "y", "z"], "total_s": [3600.0, 7200.0, 3600.0]})
    assert trained_since(landed, before).tolist() == [False, True, True]  # y retrained, z new
    line = budget_line(left=2.0, total=5.0, budget=4.5, spent=(2, 3.0))
    assert "3.0 core-hours spent since it began (2 runs) + about 2.0" in line
    assert "= 5.0: OVER the budget of 4.5 core-hours (-0.5)" in line
    assert "within" in budget_line(left=1.0, total=5.0, budget=4.5, spent=(2, 3.0))
    # no budget_since: the budget begins now
    assert "within the budget of 4.5" in budget_line(left=2.0, total=5.0, budget=4.5)


def test_budget_since_without_a_budget_is_a_usage_error(capsys):
    from analysis.cli import main

    with pytest.raises(SystemExit) as stop:
        main(["cost", "--runs", "r.csv", "--budget-since", "b.csv"])
    assert stop.value.code == 2
    assert "--budget-since needs --budget-core-hours" in capsys.readouterr().err


def test_the_cost_command_counts_what_the_budget_spent_and_how_much_slower_it_trains(
    tmp_path, capsys
):
    from analysis.cli import main
    from analysis.records import RUN_COLUMNS

    def rows(names, seconds, per_step):
        return [
            {
                "study": "insertion",
                "record": n,
                "workload": "w",
                "echo_point": "none",
                "echo_factor": 1.0,
                "reached": True,
                "total_s": seconds,
                "eval_s": 1.0,
                "final_wall_s": seconds - 1.0,
                "downstream_s_per_step": per_step,
            }
            for n in names
        ]

    old = rows([f"old{i}" for i in range(10)], 360.0, 0.1)
    before = pd.DataFrame(old + rows(["retrained"], 360.0, 0.1)).reindex(columns=RUN_COLUMNS)
    now = pd.DataFrame(old + rows(["retrained", *(f"new{i}" for i in range(9))], 720.0, 0.25))
    now = now.reindex(columns=RUN_COLUMNS)
    before.to_csv(tmp_path / "before.csv", index=False)
    now.to_csv(tmp_path / "runs.csv", index=False)
    main(["cost", "--runs", str(tmp_path / "runs.csv"), "--budget-core-hours", "3",
          "--budget-since", str(tmp_path / "before.csv")])  # fmt: skip
    out = capsys.readouterr().out
    assert "speed: seconds per step since the budget began over those before it (w 2.50x" in out
    # 10 runs of 720 s since (one retrained in place, nine new): 2.0 core-hours
    assert "budget: 2.0 core-hours spent since it began (10 runs)" in out
    assert "within the budget of 3 core-hours" in out
