"""`echo.advise` / ``python -m echo advise``: measure a job's loader and step, and advise an
echo setting from the protocol study's evidence."""

from __future__ import annotations

import itertools
import math
import time

import pytest

import echo
from echo.__main__ import main
from echo.advisor import NOT_INPUT_BOUND, evidence, measure, recommend, workloads


def make_loader(seconds: float = 0.03):
    """Endless batches, each taking ``seconds`` (a slow storage)."""

    def batches():
        for i in itertools.count():
            time.sleep(seconds)
            yield i

    return batches()


def make_step():
    return lambda batch: time.sleep(0.01)


def make_read():
    return list(range(100))


def make_augment():
    def augment(example, rng):
        time.sleep(0.0005)
        return example + int(rng.integers(2))

    return augment


def test_measure_times_the_loader_and_the_step_apart():
    measured = measure(make_loader(), make_step(), windows=3, batches=4, warmup=1)
    assert len(measured.ratios) == 3
    assert 2 < measured.R < 4  # 30 ms per batch over 10 ms per step (sleeps overshoot)


def test_read_and_augment_split_the_upstream():
    measured = measure(
        make_loader(0.0), make_step(), windows=1, batches=1, read=make_read(),
        augment=make_augment(), examples=20,
    )  # fmt: skip
    assert 0.5 < measured.augment_share <= 1  # reading a list costs nothing beside 0.5 ms


@pytest.mark.parametrize("workload", sorted(workloads()))
def test_the_advised_setting_minimises_ratio_times_the_pipeline_factor(workload):
    R = 4.0
    candidates = recommend(R, workload)
    rows = [row for row in evidence()["rows"] if row["workload"] == workload]
    times = {(r["echo_point"], r["echo_factor"]): r["ratio"] * max(1, r["echo_factor"] / R)
             for r in rows}  # fmt: skip
    assert len(candidates) == len(rows)
    assert candidates[0].time == pytest.approx(min(times.values()))
    assert candidates[0].interval[0] <= candidates[0].time <= candidates[0].interval[1]


def test_between_two_measured_factors_e_equals_r_is_priced_from_both():
    best = recommend(3.0, "imagenet_resnet")[0]
    assert (best.point, best.factor, best.between) == ("before_augment", 3.0, (2.0, 4.0))
    rows = {
        r["echo_factor"]: r
        for r in evidence()["rows"]
        if r["workload"] == "imagenet_resnet" and r["echo_point"] == "before_augment"
    }
    two, four = rows[2.0]["ratio"], rows[4.0]["ratio"]
    assert best.ratio == pytest.approx(two * (four / two) ** math.log2(3 / 2))  # log-log
    assert rows[4.0]["ratio"] < best.ratio < rows[2.0]["ratio"] and best.pipeline == 1.0
    assert "ratio interpolated between e=2 and 4" in best.describe()


def test_the_factor_between_two_covers_the_slowest_window_and_pays_for_it():
    """With R 3 in the median window and 3.3 in the slowest, e = 3.3: the step never waits,
    and the median window's idle upstream is charged (x 3.3 / 3)."""
    best = recommend(3.0, "imagenet_resnet", R_max=3.3)[0]
    assert (best.point, best.factor, best.between) == ("before_augment", 3.3, (2.0, 4.0))
    assert best.pipeline == pytest.approx(1.1)
    with pytest.raises(ValueError, match="R_max must be a number >= R"):
        recommend(3.0, "imagenet_resnet", R_max=2.0)


def test_an_expensive_augmentation_moves_the_advice_after_it():
    cheap = recommend(8.0, "imagenet_resnet")[0]
    assert (cheap.point, cheap.factor) == ("before_augment", 8.0)
    costly = recommend(8.0, "imagenet_resnet", augment_share=0.9)[0]
    assert costly.point == "after_augment"


def test_at_an_upstream_the_step_keeps_up_with_there_is_nothing_to_do():
    advice = echo.advise(make_loader(0.0), make_step(), workload="cifar10_resnet",
                         windows=2, batches=2)  # fmt: skip
    assert advice.measurement.R <= NOT_INPUT_BOUND and advice.setting is None
    assert "Nothing to do" in str(advice) and "cannot make training faster" in str(advice)


def test_the_advice_names_its_evidence_interval_scale_and_echo_on_stall():
    advice = echo.advise(make_loader(0.04), make_step(), workload="imagenet_resnet",
                         windows=2, batches=3)  # fmt: skip
    text = str(advice)
    best = advice.setting
    assert best is not None and best.point == "before_augment"
    # near 4: at most the slowest window's R (a slow window still keeps the step busy); a
    # measured factor just below it may price better than the one interpolated at it
    slowest = max(advice.measurement.ratios)
    assert math.floor(advice.measurement.R) <= best.factor <= round(slowest, 2)
    for expected in ("imagenet_resnet", "image classification", "results/protocol/summary.csv",
                     f"study {best.study}", "cpu scale", f"{best.low:.3f}-{best.high:.3f}",
                     f"EchoOnStall(loader, max_factor={math.ceil(best.factor)})"):  # fmt: skip
        assert expected in text


def test_without_a_workload_each_workload_gets_its_best_setting():
    text = str(echo.advise(make_loader(), make_step(), windows=1, batches=2))
    assert all(name in text for name in workloads())
    assert "Name the nearest one" in text


def test_the_command_line_measures_the_named_functions(capsys):
    named = {
        option: f"{__name__}:make_{option}" for option in ("loader", "step", "read", "augment")
    }
    options = [text for option, spec in named.items() for text in (f"--{option}", spec)]
    status = main(["advise", *options, "--workload", "lm1b_transformer", "--windows", "2",
                   "--batches", "2"])  # fmt: skip
    out = capsys.readouterr().out
    assert status == 0
    assert "R = " in out and "lm1b_transformer" in out and "read " in out and "augment " in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--loader", "nowhere", "--step", "x:y"], "--loader must look like"),
        (["--loader", "no_such_module:f", "--step", "x:y"], "--loader: cannot import"),
        (["--loader", f"{__name__}:nothing", "--step", "x:y"], "has no function 'nothing'"),
    ],
)
def test_the_command_line_names_a_bad_function(capsys, argv, message):
    assert main(["advise", *argv]) == 2
    assert message in capsys.readouterr().err


def test_bad_arguments_are_refused_naming_them():
    with pytest.raises(ValueError, match=r"workload='resnet'.*valid: "):
        echo.advise([1], make_step(), workload="resnet")
    with pytest.raises(ValueError, match="loader ended before 12 batches"):
        measure(iter(range(5)), make_step(), windows=2, batches=5)
    with pytest.raises(ValueError, match="give both or none"):
        measure(make_loader(0.0), make_step(), read=[1])
    with pytest.raises(ValueError, match="windows must be an integer >= 1"):
        measure(make_loader(0.0), make_step(), windows=0)
