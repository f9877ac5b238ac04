"""`analysis.peak` and ``python -m analysis peak``: where the echo-factor curve turns, and
how many distinct views an example's repeats give before augmentation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from test_analysis_claims import searched_runs

from analysis.cli import main
from analysis.peak import distinct_views, factor_table, turns, views_table
from experiments.data.arrays import ImageExamples
from experiments.workloads.cifar10_resnet import Cifar10ResNet

BASELINE = [[4050, 4250], [4450, 4650]]
"""Two searches of two trials: bests 4,000 and 4,400 (crossings refined 50 earlier)."""


def _study(tmp_path, before: dict[int, int], after: dict[int, int]):
    """An echo-factor study whose every search of factor e has the same best."""
    conditions = {("none", 1.0): BASELINE}
    for point, values in (("before_augment", before), ("after_augment", after)):
        for factor, best in values.items():
            conditions[(point, float(factor))] = [[best + 50, best + 250]] * 2
    return searched_runs(tmp_path, conditions, study="echo_factor")


def test_each_factor_is_read_against_the_baseline_and_where_the_curve_turns_is_stated(tmp_path):
    runs = _study(
        tmp_path,
        before={2: 2100, 4: 1050, 8: 700, 16: 420},  # still falling
        after={2: 2100, 4: 1400, 8: 1000, 16: 1600},  # lowest at 8, 16 well above it
    )
    table = factor_table(runs)
    before = table[table["echo_point"] == "before_augment"].set_index("echo_factor")
    assert before.index.tolist() == [1.0, 2.0, 4.0, 8.0, 16.0]  # the baseline as e = 1
    assert before.loc[1.0, "fresh_median"] == 4200  # median of the searches' bests
    assert before.loc[2.0, "fresh_rel"] == pytest.approx(0.5)
    assert before.loc[2.0, "repeat_worth"] == pytest.approx(1.0)  # each repeat as good as fresh
    assert before.loc[4.0, "repeat_worth"] == pytest.approx(1.0)
    assert before.loc[16.0, "repeat_worth"] == pytest.approx((4200 / 420 - 1) / 15)
    assert (before["n"] == 2).all() and (before["reached"] == 2).all()

    found = turns(table, {"cifar10_resnet": 50.0}).set_index("echo_point")["turn"]
    assert found["before_augment"] == "still falling at e = 16, the largest tried"
    assert found["after_augment"] == "turns after e = 8: e = 16 needs +60% fresh examples"


def test_a_largest_factor_within_one_step_reads_flat_and_a_missed_median_says_so(tmp_path):
    runs = _study(tmp_path, before={2: 2100, 4: 1000, 8: 1040}, after={})
    found = turns(factor_table(runs), {"cifar10_resnet": 50.0}).iloc[0]
    assert found["lowest_at"] == 4
    assert found["turn"] == "flat from e = 4: e = 8 within one step of it"

    (tmp_path / "missed").mkdir()
    missed = searched_runs(
        tmp_path / "missed",
        {("none", 1.0): BASELINE, ("after_augment", 2.0): [[2050, 2250], [2450, 2650]],
         ("after_augment", 4.0): [[None, None], [None, None]]},
        study="echo_factor",
    )  # fmt: skip
    found = turns(factor_table(missed), {"cifar10_resnet": 50.0}).iloc[0]
    assert found["turn"] == "turns after e = 2: e = 4 misses the target (median)"


class _RandomImages(Cifar10ResNet):
    """Cifar10ResNet's own augmentation (pad 2, crop back, flip) on random 1x28x28 images."""

    def read(self, split):
        rng = np.random.default_rng(7)
        images = rng.integers(0, 256, size=(300, 1, 28, 28), dtype=np.uint8)
        return ImageExamples(images, np.zeros(300, dtype=np.int64))


def test_distinct_views_count_what_the_workloads_own_augmentation_can_give():
    """Pad 2 gives 5 x 5 crops, each flipped or not: 50 equally likely views, so K draws show
    50 (1 - (49/50)^K) distinct ones on average (13.8 of 16, 23.8 of 32)."""
    views = distinct_views(_RandomImages(), [1, 2, 16, 32], examples=300, seed=3)
    assert views[1] == 1.0
    for factor in (2, 16, 32):
        expected = 50 * (1 - (49 / 50) ** factor)
        assert views[factor] == pytest.approx(expected, rel=0.03)


def test_without_augmentation_every_repeat_is_the_same_view():
    class Plain(_RandomImages):
        def augment(self, example, rng):
            return example

    assert distinct_views(Plain(), [2, 8], examples=20) == {2: 1.0, 8: 1.0}


def test_the_command_prints_both_tables_and_refuses_a_negative_count(tmp_path, capsys):
    runs = _study(tmp_path, before={2: 2100, 4: 1050}, after={})
    path = tmp_path / "runs.csv"
    runs.to_csv(path, index=False)
    main(["peak", "--runs", str(path), "--views-examples", "0"])
    out = capsys.readouterr().out
    assert "| cifar10_resnet | before_augment | 4 | 2 | 2 | 1,050 |" in out
    assert "still falling at e = 4, the largest tried" in out
    assert "views e=" not in out  # no data read with --views-examples 0
    with pytest.raises(SystemExit) as exited:
        main(["peak", "--runs", str(path), "--views-examples", "-1"])
    assert exited.value.code == 2
    assert "--views-examples must be 0 or more" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main(["peak", "--runs", str(path), "--configfile", str(tmp_path / "missing.yaml")])
    assert exited.value.code == 2
    assert "--configfile: no such file" in capsys.readouterr().err


def test_a_workload_whose_data_is_not_here_is_named_not_a_failed_report(tmp_path):
    """A paper-scale study's report on a machine without its datasets: the views are left
    out, saying why, and the other tables stand."""
    table = pd.DataFrame(
        [("cifar10_resnet", "before_augment", e, f) for e, f in ((1.0, 100.0), (2.0, 60.0))],
        columns=["workload", "echo_point", "echo_factor", "fresh_median"],
    )
    views, missing = views_table(table, "paper", 5)
    assert views.empty
    assert missing == ["cifar10_resnet: no views, no data_dir is given at paper scale"]
    views, missing = views_table(table, "paper", 5, data_dirs={"cifar10_resnet": str(tmp_path)})
    assert views.empty and missing[0].startswith("cifar10_resnet: no views, its data is not here")
    assert str(tmp_path) in missing[0]
