"""The workload contract and registry: declared targets, registration, discovery, config."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from experiments import Budget, Target, Workload, get, names, register, registry

CONFIG = Path(__file__).parents[1] / "config" / "config.yaml"


def test_target_direction_is_declared_not_guessed():
    assert Target("loss", 2.0, "min").reached({"loss": 1.5})
    assert not Target("loss", 2.0, "max").reached({"loss": 1.5})
    assert Target("accuracy", 0.9, "max").reached({"accuracy": 0.9})
    with pytest.raises(ValueError, match=r"direction='lower'.*max, min"):
        Target("loss", 2.0, "lower")


def test_target_names_missing_metric():
    with pytest.raises(KeyError, match=r"'accuracy'.*\['loss'\]"):
        Target("accuracy", 0.9, "max").reached({"loss": 1.0})


def test_a_new_workload_file_is_discovered(toy_workload):
    assert toy_workload in names()
    cls = get(toy_workload)
    assert cls.name == toy_workload
    assert cls(scale="cpu").target == Target("accuracy", 0.9, "max")


def test_unknown_workload_lists_the_registered_ones(toy_workload):
    with pytest.raises(ValueError, match=f"workload='nope'.*{toy_workload}"):
        get("nope")


def test_unknown_scale_is_an_error(toy_workload):
    with pytest.raises(ValueError, match=r"scale='paper'.*valid: cpu"):
        get(toy_workload)(scale="paper")


def test_a_name_cannot_be_taken_twice(toy_workload):
    class Other(Workload):
        targets = {"cpu": Target("accuracy", 0.5, "max")}
        default_hparams = {"cpu": {"batch_size": 1, "lr": 0.1}}
        budgets = {"cpu": Budget(10, 10)}

    with pytest.raises(ValueError, match=r"'toy_blobs' is already registered"):
        register(toy_workload)(Other)


@pytest.mark.parametrize(
    ("hparams", "budgets", "message"),
    [
        ({"cpu": {"lr": 0.1}}, {"cpu": Budget(10, 10)}, "lacks \\['batch_size'\\]"),
        ({"cpu": {"batch_size": 1, "lr": 0.1}}, {}, "budgets has no entry for scale 'cpu'"),
    ],
)
def test_incomplete_declarations_fail_at_registration(monkeypatch, hparams, budgets, message):
    monkeypatch.setattr(registry, "_WORKLOADS", dict(registry._WORKLOADS))
    cls = type("Half", (Workload,), {"targets": {"cpu": Target("a", 1, "max")}})
    cls.default_hparams, cls.budgets = hparams, budgets
    with pytest.raises(ValueError, match=message):
        register("half")(cls)


def test_config_lists_exactly_the_registered_workloads():
    """Adding a workload is one file plus one config entry: both must exist."""
    config = yaml.safe_load(CONFIG.read_text())
    assert sorted(config["workloads"]) == names()
