"""Study planning: config -> runs (with baselines, dedup, paths, CLI arguments), config checks."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from experiments.run import parser
from experiments.study import RunSpec, check_config, mismatches, plan

ROOT = Path(__file__).parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def load(name: str) -> dict:
    return yaml.safe_load((ROOT / "config" / name).read_text())


@pytest.mark.parametrize("name", ["config.yaml", "test.yaml", "full.yaml", "paper.yaml"])
def test_shipped_configs_are_valid(name):
    check_config(load(name), SCHEMA)


def mutated(change) -> dict:
    config = copy.deepcopy(load("config.yaml"))
    change(config)
    return config


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: c["studies"]["insertion"]["workloads"].append("mnist"), "insertion.workloads"),
        (lambda c: c["workloads"].update(mnist={}), "workloads: 'mnist'"),
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
    return {
        "seeds": 2,
        "out_dir": "out",
        "workloads": {"lm1b_transformer": {"hparams": {"lr": 0.01}}},
        "train": {"threads": 1, "device": "cpu"},
        "studies": {"insertion": {**base, "echo_factors": [2], **study}},
    }


def test_every_study_gets_its_baselines_per_seed_and_batch_size():
    runs = plan(small_config(batch_sizes=[32, None])).runs.values()
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
        per_workload={"lm1b_transformer": {"echo_points": ["before_augment"]}},
    )
    runs = {(r.echo_point, r.shuffle_buffer) for r in plan(config).runs.values()}
    assert runs == {("none", 0), ("before_augment", 16), ("before_augment", 64)}


def test_paths_encode_the_whole_identity():
    specs = list(plan(small_config(upstream={"latency_ms": 5}, num_workers=1)).runs.items())
    assert len({path for path, _ in specs}) == len(specs)
    path, spec = specs[-1]
    assert path == f"out/records/lm1b_transformer/{spec.run_id}.json"
    assert "lat5perexample" in spec.run_id and "-w1-" in spec.run_id


def test_args_parse_back_into_the_same_configuration():
    spec = RunSpec(
        workload="lm1b_transformer",
        scale="cpu",
        echo_point="before_augment",
        echo_factor=1.5,
        shuffle_buffer=64,
        batch_size=16,
        seed=3,
        upstream_latency_ms=2.5,
        upstream_latency_per="batch",
        num_workers=1,
        stop_at_target=False,
        max_fresh=640,
        options=(("hparams", {"lr": 0.01}), ("threads", 1)),
    )
    args = parser().parse_args([*spec.args(), "--out", "x.json"])
    assert (args.echo_point, args.echo_factor, args.shuffle_buffer) == ("before_augment", 1.5, 64)
    assert (args.batch_size, args.seed, args.max_fresh, args.num_workers) == (16, 3, 640, 1)
    assert (args.upstream_latency_ms, args.upstream_latency_per) == (2.5, "batch")
    assert args.stop_at_target is False and args.hparam == [("lr", 0.01)]


def test_unknown_workload_in_a_study_is_an_error_naming_it():
    config = small_config()
    config["studies"]["insertion"]["workloads"] = ["coco_ssd"]
    with pytest.raises(ValueError, match=r"studies\.insertion\.workloads: unknown coco_ssd"):
        plan(config)


def record_for(spec: RunSpec) -> dict:
    return {
        "workload": spec.workload,
        "scale": spec.scale,
        "echo_point": spec.echo_point,
        "echo_factor": spec.echo_factor,
        "shuffle_buffer": spec.shuffle_buffer,
        "seed": spec.seed,
        "batch_size": 64,
        "budget": {"max_fresh": 40000, "eval_every_fresh": 1600},
        "upstream": {"latency_ms": 0.0, "latency_per": "example", "cpu_ms": 0.0},
        "num_workers": 0,
    }


def test_a_record_matches_its_run_or_says_which_field_differs():
    spec = next(iter(plan(small_config()).runs.values()))
    record = record_for(spec)
    assert mismatches(spec, record) == []
    record["seed"] = 7
    assert mismatches(spec, record) == [f"seed: record has 7, config asks for {spec.seed}"]
