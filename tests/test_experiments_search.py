"""Search spaces and their seeded Sobol trials, a workload's declared space at discovery, and
a trial's identity (`RunSpec` repetition/trial, budget_cap, resolution)."""

from __future__ import annotations

import errno
import math
import subprocess
import sys
from collections import Counter
from itertools import product
from pathlib import Path

import pytest
import torch

from experiments import MOMENTUM, Dimension, SearchSpace, registry
from experiments.harness import Run, RunConfig
from experiments.search import (
    BUDGET_SCHEDULES,
    FINAL_LR_FRACTION,
    SCHEDULE,
    Choice,
    budget_schedule,
    sobol_block,
)
from run_contract.identity import FieldError, RunOptions, RunSpec, identity_hash, run_columns

TOY = Path(__file__).parent / "toy_workload.py"
SPACE = SearchSpace(
    {"lr": Dimension(0.02, 0.5), "momentum": MOMENTUM, "warmup": Dimension(0.0, 0.2, "linear")}
)


def unit(dimension: Dimension, value: float) -> float:
    """Where ``value`` lies on the unit interval that ``dimension`` maps onto its range."""
    low, high = dimension.low, dimension.high
    if dimension.scaling == "linear":
        return (value - low) / (high - low)
    if dimension.scaling == "log":
        return math.log(value / low) / math.log(high / low)
    return math.log((1 - low) / (1 - value)) / math.log((1 - low) / (1 - high))


def test_a_trial_is_the_same_point_whenever_it_is_drawn():
    later = [SPACE.point(2, trial) for trial in (5, 0, 3)]
    again = SearchSpace(dict(SPACE.dimensions))
    assert later == [again.point(2, 5), again.point(2, 0), again.point(2, 3)]
    assert set(later[0]) == {"lr", "momentum", "warmup"}


def test_a_searchs_points_are_drawn_once_per_machine_and_read_back_without_scipy(tmp_path):
    from scipy.stats import qmc

    drawn = qmc.Sobol(3, scramble=True, seed=4).random_base2(3)
    assert (sobol_block(3, 4, 3, cache=tmp_path) == drawn).all()
    (entry,) = (tmp_path / "sobol").iterdir()
    assert entry.name.startswith("sobol-d3-seed4-m3-scipy")
    # a run process reads the block back: scipy.stats (seconds of CPU) is never imported
    code = (
        "import sys; from experiments.search import sobol_block; "
        f"block = sobol_block(3, 4, 3, cache={str(tmp_path)!r}); "
        "print('scipy.stats' in sys.modules, block.tolist() == {drawn!r})"
    ).replace("{drawn!r}", repr(drawn.tolist()))
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    assert out.stdout.split() == ["False", "True"], out.stderr[-2000:]


def test_a_search_point_is_drawn_in_memory_where_the_cache_cannot_be_written(tmp_path, monkeypatch):
    from scipy.stats import qmc

    import experiments.data.cache

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(experiments.data.cache, "build_once", full)
    block = sobol_block(2, 1, 2, cache=tmp_path)
    assert (block == qmc.Sobol(2, scramble=True, seed=1).random_base2(2)).all()


def test_repetitions_are_different_searches():
    for trial in range(8):
        assert SPACE.point(0, trial) != SPACE.point(1, trial) != SPACE.point(2, trial)


def test_every_point_lies_inside_every_dimensions_range():
    for repetition, trial in product(range(3), range(40)):
        point = SPACE.point(repetition, trial)
        for name, dimension in SPACE.dimensions.items():
            assert dimension.low <= point[name] <= dimension.high, (repetition, trial, name)


@pytest.mark.parametrize("repetition", [0, 1, 7])
def test_the_first_8_trials_of_a_search_cover_each_range_evenly(repetition):
    """Sobol balance: on the unit scale, each half of the interval holds 4 of the first 8
    trials, each quarter 2 and each eighth 1, in every dimension."""
    points = [SPACE.point(repetition, trial) for trial in range(8)]
    for name, dimension in SPACE.dimensions.items():
        u = [unit(dimension, point[name]) for point in points]
        for cells in (2, 4, 8):
            counts = [sum(int(x * cells) == cell for x in u) for cell in range(cells)]
            assert counts == [8 // cells] * cells, (name, cells, u)


def test_the_momentum_is_one_minus_a_log_uniform_value():
    assert MOMENTUM.value(0.0) == pytest.approx(0.5)
    assert MOMENTUM.value(0.5) == pytest.approx(0.9)  # 1 - the geometric mean of 0.5 and 0.02
    assert MOMENTUM.value(1 - 1e-12) == pytest.approx(0.98)
    momenta = [SPACE.point(0, trial)["momentum"] for trial in range(64)]
    assert all(0.5 <= m <= 0.98 for m in momenta)
    # log(1 - momentum) is uniform over [log 0.02, log 0.5]: 16 of 64 trials per quarter
    low, high = math.log(0.02), math.log(0.5)
    quarters = [int(4 * (math.log(1 - m) - low) / (high - low)) for m in momenta]
    assert [quarters.count(q) for q in range(4)] == [16] * 4
    assert Dimension(0.01, 1.0).value(0.5) == pytest.approx(0.1)  # log-uniform
    assert Dimension(0.0, 0.2, "linear").value(0.5) == pytest.approx(0.1)


@pytest.mark.parametrize(
    ("dimensions", "message"),
    [
        ({"lr": Dimension(0.01, 1.0)}, "must cover 'momentum' with scaling 'one_minus_log'"),
        ({"momentum": MOMENTUM}, "must cover 'lr' with scaling 'log'"),
        ({"lr": Dimension(0.01, 1.0, "linear"), "momentum": MOMENTUM}, "'lr' with scaling 'log'"),
        ({"lr": Dimension(0.01, 1.0), "momentum": Dimension(0.5, 0.9)}, "'momentum' with"),
    ],
)
def test_a_space_without_lr_or_momentum_is_refused(dimensions, message):
    with pytest.raises(ValueError, match=message):
        SearchSpace(dimensions)


@pytest.mark.parametrize(
    ("low", "high", "scaling", "message"),
    [
        (1.0, 0.5, "log", r"low < high, got \[1.0, 0.5\]"),
        (0.5, 0.5, "linear", "low < high"),
        (0.0, math.inf, "linear", "finite"),
        (math.nan, 1.0, "linear", "finite"),
        (0.0, 1.0, "log", "low > 0, got 0.0"),
        (-1.0, 1.0, "log", "low > 0"),
        (0.5, 1.0, "one_minus_log", r"0 <= low < high < 1, got \[0.5, 1.0\]"),
        (-0.1, 0.9, "one_minus_log", "0 <= low"),
        (0.1, 1.0, "cubic", "scaling='cubic' is not valid; use one of"),
    ],
)
def test_bad_bounds_are_refused(low, high, scaling, message):
    with pytest.raises(ValueError, match=message):
        Dimension(low, high, scaling)


@pytest.mark.parametrize(
    ("repetition", "trial", "name"), [(-1, 0, "repetition"), (0, -1, "trial"), (True, 0, "rep"),
                                      (0, 1.0, "trial")]
)  # fmt: skip
def test_a_bad_repetition_or_trial_is_refused_naming_it(repetition, trial, name):
    with pytest.raises(ValueError, match=f"^{name}.* must be an integer >= 0"):
        SPACE.point(repetition, trial)


def test_check_default_names_the_dimension():
    SPACE.check_default({"lr": 0.1, "momentum": 0.9, "warmup": 0.0, "batch_size": 16})
    with pytest.raises(ValueError, match=r"default lr=0\.9 lies outside .* \[0\.02, 0\.5\]"):
        SPACE.check_default({"lr": 0.9, "momentum": 0.9, "warmup": 0.0})
    with pytest.raises(ValueError, match=r"default momentum=0\.99 lies outside .* \[0\.5, 0\.98"):
        SPACE.check_default({"lr": 0.1, "momentum": 0.99, "warmup": 0.0})
    with pytest.raises(ValueError, match=r"covers 'warmup', which has no default"):
        SPACE.check_default({"lr": 0.1, "momentum": 0.9})


@pytest.fixture
def user_package(tmp_path, monkeypatch):
    """An empty workload package on the path; discovery's tables are restored afterwards."""
    package = tmp_path / "search_workloads"
    package.mkdir()
    (package / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.discover()  # the project's own workloads register into the real tables first
    monkeypatch.setattr(registry, "_WORKLOADS", dict(registry._WORKLOADS))
    monkeypatch.setattr(registry, "_BROKEN", dict(registry._BROKEN))
    yield package
    for module in [m for m in sys.modules if m.split(".")[0] == "search_workloads"]:
        del sys.modules[module]


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            '"lr": 0.1,',
            '"lr": 5.0,',
            "workload 'wide_blobs': search_spaces['cpu']: the default lr=5.0 lies outside its "
            "search range [0.02, 0.5]",
        ),
        (', "momentum": MOMENTUM}', "}", "a search space must cover 'momentum'"),
    ],
)
def test_a_workload_whose_space_is_wrong_is_set_aside_naming_it(
    user_package, capsys, old, new, message
):
    source = TOY.read_text().replace("toy_blobs", "wide_blobs")
    assert old in source
    (user_package / "wide_blobs.py").write_text(source.replace(old, new))
    (user_package / "good_blobs.py").write_text(TOY.read_text().replace("toy_blobs", "good_blobs"))
    registry.discover("search_workloads")
    warning = capsys.readouterr().err.strip()
    assert warning.count("\n") == 0 and "wide_blobs.py" in warning and message in warning
    assert "good_blobs" in registry.names() and "wide_blobs" not in registry.names()
    with pytest.raises(ValueError, match=r"workload 'wide_blobs' is broken: .*wide_blobs\.py"):
        registry.get("wide_blobs")


def test_a_trial_takes_its_hyper_parameters_from_the_search_space(toy_workload):
    defaults = registry.defaults(toy_workload, "cpu")
    point = defaults.search_space.point(1, 3)
    spec = RunSpec(workload=toy_workload, repetition=1, trial=3, hparams={"noise": 0.5})
    identity = spec.resolve(defaults)
    assert identity["hparams"] == {**defaults.hparams, **point, "noise": 0.5}
    assert point["lr"] != defaults.hparams["lr"] and point["momentum"] != 0.9
    assert identity["search"] == {"repetition": 1, "trial": 3}
    assert "search" not in RunSpec(workload=toy_workload).resolve(defaults)
    # ...and the run trains with them
    optimizer = Run(RunConfig(spec, RunOptions(device="cpu"))).optimizer
    assert optimizer.param_groups[0]["lr"] == point["lr"]
    assert optimizer.param_groups[0]["momentum"] == point["momentum"]


def test_a_trials_record_is_refused_once_its_search_space_changed(toy_workload):
    defaults = registry.defaults(toy_workload, "cpu")
    spec = RunSpec(workload=toy_workload, repetition=0, trial=1)
    identity = spec.resolve(defaults)
    record = {**identity, "config_hash": identity_hash(identity)}
    assert spec.mismatches(record, defaults) == []
    assert run_columns(record)["repetition"] == 0 and run_columns(record)["trial"] == 1
    narrower = SearchSpace({"lr": Dimension(0.02, 0.1), "momentum": MOMENTUM})
    found = spec.mismatches(record, defaults._replace(search_space=narrower))
    assert [line.split(":")[0] for line in found] == ["hparams.lr"]


@pytest.mark.parametrize("kwargs", [{"trial": 0}, {"repetition": 0}])
def test_a_trial_needs_its_repetition(kwargs):
    with pytest.raises(FieldError, match="trial and repetition go together") as error:
        RunSpec(workload="w", **kwargs)
    assert error.value.field == "trial" and error.value.flag == "--trial"


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"repetition": 0, "trial": -1}, "trial"),
        ({"repetition": -1, "trial": 0}, "repetition"),
        ({"budget_cap": 0.0}, "budget_cap"),
        ({"budget_cap": -1.0}, "budget_cap"),
        ({"resolution": 0}, "resolution"),
    ],
)
def test_bad_search_fields_are_refused_naming_them(kwargs, name):
    with pytest.raises(FieldError, match=name) as error:
        RunSpec(workload="w", **kwargs)
    assert error.value.field == name


def test_a_budget_cap_excludes_max_fresh():
    with pytest.raises(FieldError, match=r"budget_cap=1\.5 .* excludes max_fresh") as error:
        RunSpec(workload="w", budget_cap=1.5, max_fresh=1000)
    assert error.value.field == "budget_cap"


def test_overriding_a_searched_hyper_parameter_is_refused(toy_workload):
    defaults = registry.defaults(toy_workload, "cpu")
    for key, value in (("lr", 0.1), ("momentum", 0.8)):
        spec = RunSpec(workload=toy_workload, repetition=0, trial=2, hparams={key: value})
        with pytest.raises(FieldError, match=f"hparam '{key}' is searched by trial=2") as error:
            spec.resolve(defaults)
        assert error.value.field == "hparams"


def test_a_trial_needs_a_declared_search_space(toy_workload):
    defaults = registry.defaults(toy_workload, "cpu")._replace(search_space=None)
    with pytest.raises(FieldError, match="'toy_blobs' declares no search space") as error:
        RunSpec(workload=toy_workload, repetition=0, trial=0).resolve(defaults)
    assert error.value.field == "trial"


@pytest.mark.parametrize(("cap", "max_fresh"), [(1.5, 384), (0.3, 77), (2, 512)])
def test_the_budget_cap_is_in_units_of_reference_fresh(toy_workload, cap, max_fresh):
    defaults = registry.defaults(toy_workload, "cpu")
    assert defaults.reference_fresh == 256
    budget = RunSpec(workload=toy_workload, budget_cap=cap).resolve(defaults)["budget"]
    assert budget == {"max_fresh": max_fresh, "eval_every_fresh": 64, "cap": float(cap)}
    assert isinstance(budget["cap"], float)  # an int cap hashes as its float


@pytest.mark.parametrize(("resolution", "every"), [(None, None), (16, 16), (64, 4), (1000, 1)])
def test_the_resolution_spaces_the_kept_models(toy_workload, resolution, every):
    defaults = registry.defaults(toy_workload, "cpu")
    spec = RunSpec(workload=toy_workload, resolution=resolution)
    assert spec.refine_every_fresh(defaults) == every
    assert spec.resolve(defaults)["budget"].get("resolution") == resolution


@pytest.mark.parametrize("field", ["budget_cap", "resolution"])
def test_a_workload_without_reference_fresh_refuses_the_protocols_budget(field):
    spec = RunSpec(workload="lm1b_transformer", scale="paper", **{field: 2})
    defaults = registry.defaults("lm1b_transformer", "paper")
    assert defaults.reference_fresh is None
    with pytest.raises(FieldError, match=f"^{field} is in units .* at scale 'paper'") as error:
        spec.resolve(defaults)
    assert error.value.field == field and "'lm1b_transformer'" in str(error.value)


def test_each_trial_and_repetition_has_its_own_record():
    specs = [RunSpec(workload="w", repetition=r, trial=t) for r, t in product(range(2), range(3))]
    specs += [RunSpec(workload="w"), RunSpec(workload="w", budget_cap=1.5, resolution=64)]
    paths = [spec.path("out") for spec in specs]
    assert len(set(paths)) == len(paths)
    assert "-r1-t2-seed0" in specs[5].run_id
    assert "-cap1.5-res64-" in specs[-1].run_id


# --- the searched schedule ---------------------------------------------------------------

SCHEDULED = SearchSpace({"lr": Dimension(0.02, 0.5), "momentum": MOMENTUM, "schedule": SCHEDULE})


def test_a_searched_schedule_spans_the_trials_budget():
    points = [SCHEDULED.point(0, trial, budget_steps=200) for trial in range(8)]
    # about a third of a balanced net's points each: constant, decay, warm-up plus decay
    counts = Counter(p["schedule"] for p in points)
    assert set(counts) == set(BUDGET_SCHEDULES) and min(counts.values()) >= 2
    for point in points:
        assert point == {**point, **budget_schedule(point["schedule"], 200)}
    warm = next(p for p in points if p["schedule"] == "warmup_linear_decay")
    assert (warm["decay_steps"], warm["warmup_steps"]) == (200, 10)
    assert warm["final_lr_fraction"] == FINAL_LR_FRACTION
    constant = next(p for p in points if p["schedule"] == "constant")
    assert set(constant) == {"lr", "momentum", "schedule"}
    # the same trial at twice the budget: the same choice, twice the steps
    again = SCHEDULED.point(0, points.index(warm), budget_steps=400)
    assert (again["lr"], again["decay_steps"]) == (warm["lr"], 400)
    with pytest.raises(ValueError, match="pass the trial's budget_steps"):
        SCHEDULED.point(0, 0)


def test_a_schedule_choice_is_checked_and_a_default_may_leave_it_out():
    SCHEDULED.check_default({"lr": 0.1, "momentum": 0.9})  # absent: constant
    with pytest.raises(ValueError, match=r"default schedule='cosine' lies outside its search"):
        SCHEDULED.check_default({"lr": 0.1, "momentum": 0.9, "schedule": "cosine"})
    with pytest.raises(ValueError, match=r"must be experiments\.search\.SCHEDULE"):
        SearchSpace({"lr": Dimension(0.1, 1), "momentum": MOMENTUM, "schedule": Choice(("a", "b"))})
    with pytest.raises(ValueError, match="two or more distinct options"):
        Choice(("a", "a"))
    with pytest.raises(ValueError, match="absent='c' is not one of"):
        Choice(("a", "b"), absent="c")
    with pytest.raises(ValueError, match="budget_steps must be an integer >= 1"):
        budget_schedule("linear_decay", 0)
    assert "schedule one of constant/linear_decay/warmup_linear_decay" in SCHEDULED.describe()


@pytest.mark.parametrize("workload", ["lm1b_transformer", "cifar10_resnet"])
def test_a_protocol_trial_trains_with_its_schedule_over_its_budget(workload):
    """At cpu scale a trial's schedule is chosen by its point and spans the steps in which it
    would use up its budget (echoed batches count as steps), so e = 2 decays over twice the
    steps; the harness builds that schedule."""
    defaults = registry.defaults(workload, "cpu")
    trial = next(
        t for t in range(16)
        if defaults.search_space.point(0, t, 1)["schedule"] == "warmup_linear_decay"
    )  # fmt: skip
    for factor in (1.0, 2.0):
        point = "none" if factor == 1 else "after_batch"
        spec = RunSpec(
            workload=workload, repetition=0, trial=trial, budget_cap=1.5, echo_point=point,
            echo_factor=factor,
        )  # fmt: skip
        hparams = spec.resolve(defaults)["hparams"]
        steps = math.ceil(factor * round(1.5 * defaults.reference_fresh) / hparams["batch_size"])
        assert (hparams["decay_steps"], hparams["warmup_steps"]) == (steps, round(0.05 * steps))
    run = Run(RunConfig(spec, RunOptions(device="cpu")))
    assert isinstance(run.schedule, torch.optim.lr_scheduler.LambdaLR)
    assert run.optimizer.param_groups[0]["lr"] == pytest.approx(
        hparams["lr"] / hparams["warmup_steps"]
    )
