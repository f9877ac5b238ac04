"""The optimizer and schedule each workload trains with: the paper's kinds at paper scale (an
``optimizer`` and a ``schedule`` hyper-parameter), the kinds it always used at cpu scale."""

from __future__ import annotations

import pytest
import torch

from experiments import registry
from experiments.optimizers import build_optimizer
from experiments.schedules import multiplier

# workload -> (optimizer class, Nesterov, a schedule at paper scale) per a secondary summary
# of the data-echoing paper's v3
PAPER = {
    "cifar10_resnet": (torch.optim.SGD, True, True),
    "imagenet_resnet": (torch.optim.SGD, True, True),
    "coco_ssd": (torch.optim.SGD, False, True),
    "lm1b_transformer": (torch.optim.SGD, True, False),
    "common_crawl_transformer": (torch.optim.SGD, True, False),
}
CPU = {  # the paper's optimizers: Nesterov momentum but for SSD's plain momentum
    "cifar10_resnet": (torch.optim.SGD, True),
    "imagenet_resnet": (torch.optim.SGD, True),
    "coco_ssd": (torch.optim.SGD, False),
    "lm1b_transformer": (torch.optim.SGD, True),
    "common_crawl_transformer": (torch.optim.SGD, True),
}
PAPER_BATCH_SIZES = {
    "cifar10_resnet": 128,
    "imagenet_resnet": 1024,
    "coco_ssd": 256,
    "lm1b_transformer": 1024,
    "common_crawl_transformer": 1024,
}


def tiny_model() -> torch.nn.Module:
    return torch.nn.Linear(3, 2)


def test_every_workload_is_covered():
    assert sorted(PAPER) == sorted(CPU) == registry.names()


@pytest.mark.parametrize("name", sorted(PAPER))
def test_a_paper_scale_workload_trains_with_the_papers_optimizer_and_schedule(name):
    kind, nesterov, scheduled = PAPER[name]
    workload = registry.get(name)(scale="paper")  # no data is read to build these
    hp = workload.hp
    assert hp["batch_size"] == PAPER_BATCH_SIZES[name]
    optimizer = workload.optimizer(tiny_model())
    assert type(optimizer) is kind
    group = optimizer.param_groups[0]
    assert group["nesterov"] is nesterov and group["momentum"] == hp["momentum"]
    assert (group["lr"], group["weight_decay"]) == (hp["lr"], hp["weight_decay"])
    schedule = workload.schedule(optimizer)
    assert (schedule is not None) == scheduled
    if scheduled:
        for _ in range(3):
            optimizer.step()
            schedule.step()
        assert group["lr"] == pytest.approx(hp["lr"] * multiplier(hp)(3))
        assert group["lr"] != hp["lr"]  # the schedule moved it (no step 3 keeps the rate)


@pytest.mark.parametrize("name", sorted(CPU))
def test_a_cpu_scale_workload_trains_with_the_papers_optimizer_at_a_constant_rate(name):
    kind, nesterov = CPU[name]
    workload = registry.get(name)(scale="cpu")
    # a schedule comes from a search (over the trial's budget), not from the defaults
    assert "schedule" not in workload.default_hparams["cpu"]
    optimizer = workload.optimizer(tiny_model())
    assert type(optimizer) is kind
    group = optimizer.param_groups[0]
    if kind is torch.optim.AdamW:
        assert group["betas"] == (workload.hp["momentum"], 0.98)
    else:
        assert group["nesterov"] is nesterov
    assert workload.schedule(optimizer) is None


@pytest.mark.parametrize(
    ("name", "kind", "nesterov"),
    [("nesterov", torch.optim.SGD, True), ("momentum", torch.optim.SGD, False),
     ("adamw", torch.optim.AdamW, None)],
)  # fmt: skip
def test_the_optimizer_hyper_parameter_picks_the_kind(name, kind, nesterov):
    hp = {"lr": 0.3, "momentum": 0.8, "weight_decay": 1e-4, "optimizer": name}
    optimizer = build_optimizer(tiny_model(), hp, "adamw" if name != "adamw" else "nesterov")
    group = optimizer.param_groups[0]
    assert type(optimizer) is kind and group["lr"] == 0.3 and group["weight_decay"] == 1e-4
    assert group.get("nesterov") is nesterov
    assert group.get("betas", (0.8, 0.98)) == (0.8, 0.98) and group.get("momentum", 0.8) == 0.8


def test_an_unknown_optimizer_is_refused_naming_the_valid_ones():
    hp = {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.0, "optimizer": "adam"}
    with pytest.raises(ValueError, match="hparam optimizer='adam' is not valid; use nesterov"):
        build_optimizer(tiny_model(), hp, "nesterov")
