"""Study planning: config -> runs (with baselines, dedup, paths, CLI arguments, tuned searches),
config checks, ``python -m experiments.study paths``."""

from __future__ import annotations

import copy
import json
import math
import subprocess
import sys
from dataclasses import replace
from itertools import product
from pathlib import Path

import pytest
import yaml

from experiments import registry
from experiments.run import config_from_args, parser
from experiments.search import BUDGET_SCHEDULES
from experiments.study import check_config, load_config, main, plan
from run_contract.identity import RunSpec

ROOT = Path(__file__).parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def load(name: str) -> dict:
    return yaml.safe_load((ROOT / "config" / name).read_text())


@pytest.mark.parametrize("name", ["config.yaml", "test.yaml", "paper.yaml", "protocol.yaml"])
def test_shipped_configs_are_valid(name):
    check_config(load(name), SCHEMA)


def test_full_is_an_overlay_of_the_default_study():
    """``--configfile config/config.yaml config/full.yaml``: Snakemake's own merge."""
    from snakemake.utils import update_config

    config = load("config.yaml")
    update_config(config, load("full.yaml"))
    full = plan(checked(config))
    default = plan(checked(load("config.yaml")))
    assert set(default.runs) < set(full.runs)
    added = {full.runs[path].spec.echo_factor for path in set(full.runs) - set(default.runs)}
    assert added == {16.0}


def checked(config: dict) -> dict:
    return check_config(config, SCHEMA)


def mutated(change) -> dict:
    config = copy.deepcopy(load("config.yaml"))
    change(config)
    return config


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: c["studies"]["insertion"]["workloads"].append("mnist"), "insertion.workloads"),
        (lambda c: c["workloads"].update(mnist={}), "workloads: 'mnist' is not a registered"),
        (lambda c: c["studies"]["insertion"]["echo_factors"].append(0.5), "echo_factors[1]"),
        (lambda c: c["studies"]["insertion"]["echo_points"].append("before_batch"), "points[3]"),
        (lambda c: c.update(seeds=-1), "seeds: -1 is less than the minimum of 1"),
        (lambda c: c.update(seed=3), "'seed' was unexpected"),
        (lambda c: c["studies"].update(insertoin={}), "'insertoin' is not one of"),
        (lambda c: c["studies"]["wall_time"]["upstream"].update(latency_per="epoch"), "per"),
        (lambda c: c["sharing"].update(modes=["own", "joader"]), "sharing.modes[1]"),
        (lambda c: c["studies"]["insertion"].update(search={"trials": 8}), "'repetitions' is a"),
        (
            lambda c: c["studies"]["insertion"].update(search={"trials": 0, "repetitions": 1}),
            "insertion.search.trials: 0 is less than the minimum of 1",
        ),
        (
            lambda c: c["studies"]["insertion"].update(
                search={"trials": 8, "repetitions": 3, "budget_cap": 0}
            ),
            "insertion.search.budget_cap: 0",
        ),
        (lambda c: c["studies"]["insertion"].update(resolution=0), "insertion.resolution: 0"),
        (  # a study's resolution is a key of the study, not of its search
            lambda c: c["studies"]["insertion"].update(
                search={"trials": 8, "repetitions": 3, "resolution": 64}
            ),
            "'resolution' was unexpected",
        ),
    ],
)
def test_bad_config_names_the_key(change, message):
    with pytest.raises(ValueError, match=r"^config: ") as error:
        check_config(mutated(change), SCHEMA)
    assert message in str(error.value)


def small_config(**study) -> dict:
    base = {"workloads": ["lm1b_transformer"], "echo_points": ["after_batch"]}
    return checked(
        {
            "seeds": 2,
            "out_dir": "out",
            "workloads": {"lm1b_transformer": {"hparams": {"lr": 0.01}}},
            "train": {"threads": 1, "device": "cpu"},
            "studies": {"insertion": {**base, "echo_factors": [2], **study}},
        }
    )


def specs(config: dict) -> list[RunSpec]:
    return [run.spec for run in plan(config).runs.values()]


def test_every_study_gets_its_baselines_per_seed_and_batch_size():
    runs = specs(small_config(batch_sizes=[32, None]))
    baselines = [r for r in runs if r.echo_point == "none"]
    assert {(r.batch_size, r.seed) for r in baselines} == {(32, 0), (32, 1), (None, 0), (None, 1)}
    assert all(r.echo_factor == 1 and r.shuffle_buffer == 0 for r in baselines)
    assert len(runs) == 8  # (baseline + e=2) x 2 batch sizes x 2 seeds


def test_a_run_shared_by_two_studies_is_trained_once():
    config = small_config()
    config["studies"]["echo_factor"] = {**config["studies"]["insertion"], "echo_factors": [2, 4]}
    result = plan(config)
    assert len(result.runs) == 6  # baselines and e=2 shared; e=4 new
    assert set(result.studies["insertion"]) < set(result.studies["echo_factor"])


def test_shuffle_buffers_per_echo_point_and_per_workload_overrides():
    config = small_config(
        echo_points=["after_batch", "before_augment"],
        shuffle_buffers={"before_augment": [16, 64]},
        num_workers=1,
        per_workload={"lm1b_transformer": {"echo_points": ["before_augment"]}},
    )
    runs = {(r.echo_point, r.shuffle_buffer) for r in specs(config)}
    assert runs == {("none", 0), ("before_augment", 16), ("before_augment", 64)}
    # a per-workload entry changes only the keys it names (no defaults of its own)
    assert {r.num_workers for r in specs(config)} == {1}


def test_a_per_workload_search_replaces_only_the_keys_it_names():
    config = small_config(
        workloads=["lm1b_transformer", "cifar10_resnet"],
        search={"trials": 3, "repetitions": 2},
        per_workload={"cifar10_resnet": {"search": {"trials": 1}}},
    )
    config["workloads"]["cifar10_resnet"] = {}
    trials = {}
    for run in specs(config):
        trials.setdefault(run.workload, set()).add((run.repetition, run.trial, run.seed))
    assert trials["lm1b_transformer"] == {(r, t, 1000 * r + t) for r in range(2) for t in range(3)}
    # 1 trial, still 2 repetitions; a trial's seed does not depend on the trials per search
    assert trials["cifar10_resnet"] == {(0, 0, 0), (1, 0, 1000)}


@pytest.mark.parametrize(
    ("search", "override", "message"),
    [
        (None, {"trials": 1}, r"\.lm1b_transformer\.search: replaces keys of the study's search"),
        ({"trials": 2, "repetitions": 1}, None, r"\.lm1b_transformer\.search: replaces keys"),
        (
            {"trials": 2, "repetitions": 1},
            {"seeds": 2},
            r"\.lm1b_transformer\.search: .*'seeds' was",
        ),
    ],
)
def test_a_bad_per_workload_search_is_refused_naming_it(search, override, message):
    with pytest.raises(ValueError, match=r"^config: studies\.insertion\.per_workload" + message):
        small_config(search=search, per_workload={"lm1b_transformer": {"search": override}})


def test_paths_encode_the_whole_identity():
    runs = list(plan(small_config(upstream={"latency_ms": 5}, num_workers=1)).runs.items())
    assert len({path for path, _ in runs}) == len(runs)
    path, run = runs[-1]
    assert path == f"out/records/lm1b_transformer/{run.spec.run_id}.json"
    assert "lat5perexample" in run.spec.run_id and "-w1-" in run.spec.run_id
    assert "-hp" in run.spec.run_id  # the config's lr override


def test_the_schema_defaults_are_filled_in_and_match_behaviour():
    config = small_config()
    del config["train"]
    config = checked({**config, "studies": {"insertion": dict(config["studies"]["insertion"])}})
    assert config["train"] == {"threads": 1, "device": "cpu", "num_workers": 0}
    run = next(iter(plan(config).runs.values()))
    args = parser().parse_args([*run.args(), "--out", "x.json"])
    assert args.device == "cpu"  # the documented default, not the CLI's "auto"


def test_plan_checks_a_copy_of_a_raw_config_with_the_schema_defaults_filled_in():
    study = {"workloads": [WORKLOAD], "echo_points": ["before_augment", "after_batch"]}
    study.update(echo_factors=[2], shuffle_buffers={"before_augment": [16]})
    raw = {"workloads": {WORKLOAD: None}, "studies": {"insertion": study}}
    before = copy.deepcopy(raw)
    runs = list(plan(raw).runs.values())
    assert raw == before
    found = {(r.spec.echo_point, r.spec.shuffle_buffer) for r in runs}
    assert found == {("none", 0), ("before_augment", 16), ("after_batch", 0)}
    for run in runs:
        assert (run.spec.max_fresh, run.spec.resolution, run.spec.eval_every_fresh) == (None,) * 3
        assert not run.spec.hparams and run.options.data_dir is None


@pytest.mark.parametrize(
    "spec",
    [
        RunSpec(workload="lm1b_transformer"),
        RunSpec(
            workload="lm1b_transformer",
            echo_point="before_augment",
            echo_factor=1.5,
            shuffle_buffer=64,
            batch_size=16,
            seed=3,
            upstream_latency_ms=2.5,
            upstream_latency_per="batch",
            upstream_cpu_ms=0.1,
            num_workers=1,
            stop_at_target=False,
            max_fresh=640,
            eval_every_fresh=64,
            hparams={"lr": 0.01, "weight_decay": 0.0},
        ),
        RunSpec(workload="lm1b_transformer", echo_point="after_batch", consume="unix:@x y"),
        RunSpec(
            workload="lm1b_transformer",
            echo_point="after_batch",
            echo_factor=2.0,
            budget_cap=0.25,
            resolution=64,
            repetition=2,
            trial=5,
            seed=21,
        ),
        RunSpec(workload="lm1b_transformer", repetition=0, trial=0, resolution=1),
    ],
)
def test_args_parse_back_into_the_same_spec(spec):
    args = parser().parse_args([*spec.args(), "--out", "x.json"])
    assert config_from_args(args, parser()).spec == spec


def test_bad_combinations_name_the_field():
    with pytest.raises(ValueError, match=r"echo_point=none cannot echo \(echo_factor=2"):
        RunSpec(workload="w", echo_factor=2)
    with pytest.raises(ValueError, match=r"echo_point=after_augment cannot be used with consume"):
        RunSpec(workload="w", echo_point="after_augment", consume="unix:@p")
    with pytest.raises(ValueError, match=r"hparams: batch_size is a field of its own"):
        RunSpec(workload="w", hparams={"batch_size": 3})
    with pytest.raises(ValueError, match=r"scale='gpu' is not valid; use cpu, paper"):
        RunSpec(workload="w", scale="gpu")


def test_unknown_workload_in_a_study_is_an_error_naming_it():
    config = small_config()
    config["studies"]["insertion"]["workloads"] = ["coco_ssd"]
    with pytest.raises(ValueError, match=r"studies\.insertion\.workloads: unknown coco_ssd"):
        plan(config)


WORKLOAD = "lm1b_transformer"


def record_for(spec: RunSpec) -> dict:
    """What the harness would write for ``spec`` (its identity and hash; results aside)."""
    from run_contract.identity import identity_hash

    identity = spec.resolve(registry.defaults(spec.workload, spec.scale))
    return {**identity, "config_hash": identity_hash(identity)}


# One changed value per identity field; a field added to RunSpec without an entry fails below.
CHANGED = {
    "workload": "cifar10_resnet",
    "scale": "paper",
    "echo_point": "before_augment",
    "echo_factor": 2.0,
    "shuffle_buffer": 8,
    "batch_size": 7,
    "upstream_latency_ms": 1.0,
    "upstream_latency_per": "batch",
    "upstream_cpu_ms": 1.0,
    "num_workers": 1,
    "max_fresh": 123,
    "eval_every_fresh": 45,
    "budget_cap": 1.5,
    "resolution": 20,
    "hparams": (("lr", 0.5),),
    "consume": "unix:@producer",
    "stop_at_target": False,
    "repetition": 2,
    "trial": 3,
    "seed": 9,
}
PAIRED = {"repetition": {"trial": 0}, "trial": {"repetition": 0}}  # set together


def test_every_identity_field_changes_the_path_or_is_refused():
    from dataclasses import fields, replace

    assert set(CHANGED) == {f.name for f in fields(RunSpec)}
    base = RunSpec(workload=WORKLOAD, echo_point="after_batch", echo_factor=4.0)
    record = record_for(base)
    assert base.mismatches(record, registry.defaults(WORKLOAD, "cpu")) == []
    for name, value in CHANGED.items():
        other = replace(base, **{name: value}, **PAIRED.get(name, {}))
        if other.path("out") == base.path("out"):
            found = other.mismatches(record, registry.defaults(other.workload, other.scale))
            assert any(line.startswith(name) for line in found), name
        # a record written at that path by an older config is refused all the same
        found = other.mismatches(record, registry.defaults(other.workload, other.scale))
        assert found, name


def test_a_record_trained_with_other_hparams_or_interval_is_refused(tmp_path):
    """The issue's case: a config sets lr 0.01 and evaluation every 100 examples."""
    config = small_config()
    config["workloads"] = {WORKLOAD: {"hparams": {"lr": 0.01}, "eval_every_fresh": 100}}
    wanted = next(iter(plan(config).runs.values())).spec
    old = RunSpec(workload=WORKLOAD)  # what the committed record was trained as
    assert wanted.path("out") != old.path("out")
    found = wanted.mismatches(record_for(old), registry.defaults(WORKLOAD, "cpu"))
    assert any(line.startswith("hparams.lr: record has") for line in found)
    assert any(line.startswith("eval_every_fresh: record has") for line in found)


def test_a_record_trained_with_a_default_that_changed_since_is_refused():
    spec = RunSpec(workload=WORKLOAD)
    defaults = registry.defaults(WORKLOAD, "cpu")
    changed = defaults._replace(hparams={**defaults.hparams, "lr": 123.0})
    assert spec.mismatches(record_for(spec), changed) == [
        f"hparams.lr: record has {defaults.hparams['lr']!r}, config asks for 123.0"
    ]


def test_a_record_edited_by_hand_is_refused():
    spec = RunSpec(workload=WORKLOAD)
    record = record_for(spec)
    record["config_hash"] = "0" * 16
    [line] = spec.mismatches(record, registry.defaults(WORKLOAD, "cpu"))
    assert line.startswith("config_hash: record has '0000")


def test_the_committed_records_are_the_runs_the_default_study_asks_for():
    result = plan(checked(load("config.yaml")))
    assert result.runs, "the default study plans no runs"
    for path, run in result.runs.items():
        record = json.loads((ROOT / path).read_text())
        spec = run.spec
        assert spec.mismatches(record, registry.defaults(spec.workload, spec.scale)) == [], path


def test_the_study_module_imports_no_torch():
    code = "import sys, experiments.study; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


SEARCH = {"trials": 3, "repetitions": 2, "budget_cap": 1.5}


def test_a_search_plans_repetitions_times_trials_runs_per_condition():
    config = small_config(search=dict(SEARCH), resolution=64)
    config["workloads"] = {WORKLOAD: {}}  # no override of the searched lr
    runs = specs(config)
    assert len(runs) == 2 * 2 * 3  # (baseline + e=2) x repetitions x trials, not x seeds
    for point in ("none", "after_batch"):
        trials = sorted((r.repetition, r.trial) for r in runs if r.echo_point == point)
        assert trials == list(product(range(2), range(3)))
    assert all(r.seed == r.repetition * 1000 + r.trial for r in runs)
    assert {(r.budget_cap, r.resolution, r.max_fresh) for r in runs} == {(1.5, 64, None)}
    defaults = registry.defaults(WORKLOAD, "cpu")
    hparams: dict[tuple, list] = {}
    for run in runs:
        identity = run.resolve(defaults)
        assert identity["budget"]["max_fresh"] == round(1.5 * defaults.reference_fresh)
        hparams.setdefault((run.repetition, run.trial), []).append(identity["hparams"])
    # a trial has the same hyper-parameters in every condition, and its own in its search;
    # a searched schedule spans the trial's budget, which e = 2 trains in twice the steps
    steps = ("decay_steps", "warmup_steps")
    for baseline, echo in hparams.values():
        assert {k: v for k, v in baseline.items() if k not in steps} == {
            k: v for k, v in echo.items() if k not in steps
        }
        budget = math.ceil(round(1.5 * defaults.reference_fresh) / baseline["batch_size"])
        if baseline.get("schedule", "constant") != "constant":
            assert (baseline["decay_steps"], echo["decay_steps"]) == (budget, 2 * budget)
    assert len({found[0]["lr"] for found in hparams.values()}) == 6
    assert {found[0].get("schedule", "constant") for found in hparams.values()} == set(
        BUDGET_SCHEDULES
    )


def test_a_search_without_a_cap_keeps_the_workloads_budget():
    runs = specs(small_config(search={"trials": 2, "repetitions": 1}))
    assert {(r.budget_cap, r.resolution) for r in runs} == {(None, None)}
    assert all("cap" not in r.run_id and "-r0-t" in r.run_id for r in runs)


def test_a_seeded_study_locates_its_crossings_to_its_resolution():
    """Refinement is not the searches' alone: a fixed-hyper-parameter study can have it."""
    config = small_config(resolution=32, per_workload={WORKLOAD: {"resolution": 16}})
    config["studies"]["echo_factor"] = {
        "workloads": [WORKLOAD], "echo_points": ["after_batch"], "echo_factors": [4],
        "resolution": 32,
    }  # fmt: skip
    runs = plan(checked(config))
    insertion = [runs.runs[path].spec for path in runs.studies["insertion"]]
    plain = [runs.runs[path].spec for path in runs.studies["echo_factor"]]
    assert {(r.resolution, r.trial) for r in insertion} == {(16, None)}  # the override
    assert {r.resolution for r in plain} == {32} and len(plain) == 2 * 2  # seeds, no search
    assert all("-res32-" in r.run_id for r in plain)
    defaults = registry.defaults(WORKLOAD, "cpu")
    assert plain[0].refine_every_fresh(defaults) == defaults.reference_fresh // 32
    assert {r.resolution for r in specs(small_config())} == {None}  # none unless asked for


def test_every_trial_of_the_protocol_study_resolves():
    """Each searched workload declares a search space and reference_fresh at its scale."""
    searched = [run.spec for run in plan(checked(load("protocol.yaml"))).runs.values()]
    searched = [spec for spec in searched if spec.trial is not None]
    assert searched
    for spec in searched:
        defaults = registry.defaults(spec.workload, spec.scale)
        identity = spec.resolve(defaults)
        budget = identity["budget"]["max_fresh"]
        steps = math.ceil(spec.echo_factor * budget / identity["batch_size"])
        assert defaults.search_space.point(spec.repetition, spec.trial, steps).items() <= (
            identity["hparams"].items()
        )
        assert spec.refine_every_fresh(defaults) >= 1


CC = "common_crawl_transformer"


def write_config(path: Path, out_dir: Path) -> Path:
    """Two studies: ``insertion`` searched (two workloads), ``echo_factor`` with seeds."""
    workloads = [WORKLOAD, CC]
    config = {
        "seeds": 1,
        "out_dir": str(out_dir),
        "workloads": {name: {} for name in workloads},
        "studies": {
            "insertion": {"workloads": workloads, "echo_points": ["after_batch"],
                          "echo_factors": [2], "search": dict(SEARCH)},
            "echo_factor": {"workloads": [WORKLOAD], "echo_points": ["before_augment"],
                            "echo_factors": [2, 4]},
        },
    }  # fmt: skip
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def paths(capsys, *args: str) -> list[str]:
    assert main(["paths", *args]) == 0
    return capsys.readouterr().out.splitlines()


def test_paths_prints_a_studys_records(tmp_path, capsys):
    config = write_config(tmp_path / "c.yaml", tmp_path / "out")
    planned = plan(load_config(config))
    insertion = paths(capsys, "--configfile", str(config), "--study", "insertion")
    assert insertion == planned.studies["insertion"] and len(insertion) == 2 * 2 * 6
    assert all(line.startswith(f"{tmp_path}/out/records/") for line in insertion)
    every = paths(capsys, "--configfile", str(config))
    assert every == list(
        dict.fromkeys(planned.studies["insertion"] + planned.studies["echo_factor"])
    )
    only = paths(capsys, "--configfile", str(config), "--workload", CC)
    assert len(only) == 12 and all(f"/{CC}/" in line for line in only)


def test_paths_missing_leaves_out_the_records_written(tmp_path, capsys):
    config = write_config(tmp_path / "c.yaml", tmp_path / "out")
    every = paths(capsys, "--configfile", str(config), "--study", "insertion")
    for written in every[3:5]:
        Path(written).parent.mkdir(parents=True, exist_ok=True)
        Path(written).write_text("{}")
    missing = paths(capsys, "--configfile", str(config), "--study", "insertion", "--missing")
    assert missing == every[:3] + every[5:]


def test_studies_existing_lists_the_records_written_per_study_and_drops_empty_ones(
    tmp_path, capsys
):
    config = write_config(tmp_path / "c.yaml", tmp_path / "out")
    every = paths(capsys, "--configfile", str(config), "--study", "insertion")
    for written in every[3:5]:
        Path(written).parent.mkdir(parents=True, exist_ok=True)
        Path(written).write_text("{}")
    assert main(["studies", "--configfile", str(config), "--existing"]) == 0
    assert json.loads(capsys.readouterr().out) == {"insertion": every[3:5]}
    assert main(["studies", "--configfile", str(config), "--study", "echo_factor"]) == 0
    assert list(json.loads(capsys.readouterr().out)) == ["echo_factor"]


def test_paths_of_merged_config_files(tmp_path, capsys):
    config = write_config(tmp_path / "c.yaml", tmp_path / "out")
    overlay = tmp_path / "search.yaml"
    overlay.write_text("studies: {echo_factor: {search: {trials: 2, repetitions: 1}}}\n")
    assert load_config(config, overlay)["studies"]["echo_factor"]["echo_factors"] == [2, 4]
    alone = paths(capsys, "--configfile", str(config), "--study", "echo_factor")
    merged = paths(capsys, "--configfile", str(config), str(overlay), "--study", "echo_factor")
    assert len(alone) == 3 and len(merged) == 3 * 2
    assert all("-r0-t" in line for line in merged)


def test_cost_without_runs_reads_the_records_landed_under_the_config(tmp_path, capsys):
    from test_analysis import make_record

    from analysis.cli import main as analysis

    config = write_config(tmp_path / "c.yaml", tmp_path / "out")
    every = paths(capsys, "--configfile", str(config), "--study", "insertion")
    for written in every[:2]:
        Path(written).parent.mkdir(parents=True, exist_ok=True)
        Path(written).write_text(json.dumps(make_record(WORKLOAD)))  # total_s 10 each
    analysis(["cost", "--configfile", str(config)])
    out = capsys.readouterr().out
    assert "2 records landed" in out
    # the other planned runs priced at the landed runs' mean, not refused as "nothing landed"
    assert "about 0.1 core-hours" in out


def test_paths_with_a_bad_study_or_config_exits_2_naming_it(tmp_path, capsys):
    config = write_config(tmp_path / "c.yaml", tmp_path / "out")
    with pytest.raises(SystemExit) as exit_info:
        main(["paths", "--configfile", str(config), "--study", "insertoin"])
    assert exit_info.value.code == 2
    assert "--study insertoin: valid: insertion, echo_factor" in capsys.readouterr().err
    # a workload the chosen studies do not train: an error, not an empty list of targets
    for args in (["--workload", "lm1b"], ["--study", "echo_factor", "--workload", CC]):
        with pytest.raises(SystemExit) as exit_info:
            main(["paths", "--configfile", str(config), *args])
        assert exit_info.value.code == 2
        assert f"--workload {args[-1]}: valid: " in capsys.readouterr().err
    config.write_text(config.read_text().replace("trials: 3", "trials: 0"))
    with pytest.raises(SystemExit) as exit_info:
        main(["paths", "--configfile", str(config)])
    assert exit_info.value.code == 2
    assert "config: studies.insertion.search.trials: 0" in capsys.readouterr().err


def test_paths_in_a_fresh_process(tmp_path):
    config = write_config(tmp_path / "c.yaml", tmp_path / "out")
    result = subprocess.run(
        [sys.executable, "-m", "experiments.study", "paths", "--configfile", str(config),
         "--study", "echo_factor"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == plan(load_config(config)).studies["echo_factor"]


def test_paths_into_a_reader_that_stops_early_ends_without_a_traceback(tmp_path):
    config = write_config(tmp_path / "c.yaml", tmp_path / "out")
    command = (
        f"{sys.executable} -m experiments.study paths --configfile {config} | head -n 1; "
        "echo status ${PIPESTATUS[0]}"
    )
    result = subprocess.run(
        ["bash", "-c", command], cwd=ROOT, capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr, result.stderr
    first, status = result.stdout.splitlines()
    assert first == plan(load_config(config)).studies["insertion"][0]
    assert status in ("status 0", "status 141")  # 0 when it all fit in the pipe at once


def test_a_record_of_an_older_workload_revision_is_refused(monkeypatch):
    spec = RunSpec(workload=WORKLOAD, echo_point="after_batch", echo_factor=2.0)
    old = record_for(spec)  # revision 1: no field in the record
    assert "workload_revision" not in old
    monkeypatch.setattr(registry.get(WORKLOAD), "revision", 2)
    defaults = registry.defaults(WORKLOAD, "cpu")
    found = spec.mismatches(old, defaults)
    assert found and found[0].startswith("workload_revision: record has 1")
    new = record_for(spec)
    assert new["workload_revision"] == 2 and new["config_hash"] != old["config_hash"]
    assert spec.mismatches(new, defaults) == []


def test_a_workload_revision_must_be_a_positive_integer(monkeypatch):
    from experiments.registry import _check_declarations

    cls = registry.get(WORKLOAD)
    monkeypatch.setattr(cls, "revision", 0)
    with pytest.raises(ValueError, match="revision must be an integer >= 1, got 0"):
        _check_declarations(WORKLOAD, cls)


def test_check_counts_the_records_numerics_and_names_a_study_that_mixes_them(tmp_path):
    from experiments.study import Plan, numerics_report

    stamp = {"mode": "portable", "versions": {"torch": "2.14.1", "mkl": "2024.0", "onednn": "3.12"}}
    paths = []
    for name, numerics in (("a", None), ("b", None), ("c", stamp)):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"numerics": numerics} if numerics else {}))
        paths.append(str(path))
    studies = Plan(runs={}, studies={"old": paths[:2], "both": paths})
    lines = numerics_report(paths, studies)
    assert lines[0] == ("numerics: 2 unpinned, 1 portable (torch 2.14.1, MKL 2024.0, oneDNN 3.12)")
    assert lines[1] == "study both pools records of 2 numerics: retrain it in one"
    assert lines[2].startswith("2 records were not computed in this process's mode (portable)")


def test_a_censored_search_trains_its_trials_in_order_and_searches_in_parallel():
    config = small_config(search=dict(SEARCH), resolution=64)
    config["workloads"] = {WORKLOAD: {}}
    runs = plan(config).runs
    for path, run in runs.items():
        spec = run.spec
        earlier = [
            other.spec.path("out")
            for other in runs.values()
            if other.spec.trial < spec.trial
            and replace(other.spec, trial=spec.trial, seed=spec.seed) == spec
        ]
        # trial t waits for trials 0 .. t-1 of its own search (condition and repetition)
        assert run.waits_for() == earlier and len(earlier) == spec.trial, path
        assert ("--censor" in run.args()) == (spec.trial > 0), path
    unordered = small_config(search={**SEARCH, "censor": False}, resolution=64)
    unordered["workloads"] = {WORKLOAD: {}}
    assert all(not run.waits_for() for run in plan(unordered).runs.values())
    assert all("--censor" not in run.args() for run in plan(unordered).runs.values())


def test_echo_factors_by_point_sweep_each_point_its_own_factors():
    study = {"echo_points": ["after_batch", "before_augment"],
             "echo_factors": {"after_batch": [2], "before_augment": [2, 32]},
             "shuffle_buffers": {"before_augment": [16]}}  # fmt: skip
    runs = specs(small_config(**study))
    echoed = {(r.echo_point, r.echo_factor) for r in runs if r.echo_point != "none"}
    assert echoed == {("after_batch", 2.0), ("before_augment", 2.0), ("before_augment", 32.0)}
    study["echo_factors"] = {"before_augment": [2, 32]}
    with pytest.raises(ValueError, match=r"insertion\.echo_factors: names no factors for echo "
                       r"point 'after_batch'"):  # fmt: skip
        small_config(**study)
