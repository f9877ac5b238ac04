"""Study planning: config -> runs (with baselines, dedup, paths, CLI arguments), config checks."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from experiments import registry
from experiments.identity import RunSpec
from experiments.run import config_from_args, parser
from experiments.study import check_config, plan

ROOT = Path(__file__).parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def load(name: str) -> dict:
    return yaml.safe_load((ROOT / "config" / name).read_text())


@pytest.mark.parametrize("name", ["config.yaml", "test.yaml", "paper.yaml"])
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
    from experiments.identity import identity_hash

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
