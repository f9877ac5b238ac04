"""Learning-rate schedules: each one's multiplier, the errors naming a bad hyper-parameter, and
the `LambdaLR` a workload's schedule hook builds from them."""

from __future__ import annotations

import pytest
import torch

from experiments.schedules import lr_scheduler, multiplier

LINEAR = {"schedule": "linear_decay", "decay_steps": 100, "final_lr_fraction": 0.1}
WARMUP_LINEAR = {
    "schedule": "warmup_linear_decay",
    "warmup_steps": 5,
    "decay_steps": 105,
    "final_lr_fraction": 0.01,
}
WARMUP = {
    "schedule": "warmup_piecewise_exponential",
    "warmup_steps": 4,
    "decay_factor": 0.5,
    "decay_every_steps": 10,
}


@pytest.mark.parametrize(
    ("hparams", "expected"),
    [
        ({}, {0: 1.0, 7: 1.0, 10**6: 1.0}),  # no schedule: constant
        ({"schedule": "constant", "lr": 0.1}, {0: 1.0, 500: 1.0}),
        (LINEAR, {0: 1.0, 10: 0.91, 50: 0.55, 99: 0.109, 100: 0.1, 5000: 0.1}),
        ({**LINEAR, "decay_steps": 37.5}, {0: 1.0, 15: 0.64, 37: 0.112, 38: 0.1}),  # searched
        (WARMUP, {0: 0.25, 1: 0.5, 3: 1.0, 4: 1.0, 13: 1.0, 14: 0.5, 23: 0.5, 24: 0.25}),
        ({**WARMUP, "warmup_steps": 0}, {0: 1.0, 9: 1.0, 10: 0.5, 35: 0.125}),
        # warm-up over steps 0-4, then linear from 1 at step 5 to 0.01 at step 105
        (WARMUP_LINEAR, {0: 0.2, 4: 1.0, 5: 1.0, 55: 0.505, 104: 0.0199, 105: 0.01, 999: 0.01}),
        ({**WARMUP_LINEAR, "warmup_steps": 0}, {0: 1.0, 105: 0.01}),
    ],
)
def test_each_schedule_multiplies_the_rate_as_documented(hparams, expected):
    factor = multiplier(hparams)
    assert {step: factor(step) for step in expected} == pytest.approx(expected)


@pytest.mark.parametrize(
    ("hparams", "message"),
    [
        (
            {"schedule": "cosine"},
            "hparam schedule='cosine' is not valid; use constant, linear_decay, "
            "warmup_linear_decay, warmup_piecewise_exponential",
        ),
        (
            {"schedule": "linear_decay", "decay_steps": 10},
            "schedule 'linear_decay' needs hparam 'final_lr_fraction'; it reads decay_steps, "
            "final_lr_fraction",
        ),
        (
            {k: v for k, v in WARMUP.items() if k != "decay_every_steps"},
            "needs hparam 'decay_every_steps'",
        ),
        ({**LINEAR, "decay_steps": 0}, "hparam decay_steps=0 of schedule 'linear_decay' must be"),
        ({**LINEAR, "final_lr_fraction": 1.5}, "final_lr_fraction=1.5 .* must be a number in"),
        ({**LINEAR, "decay_steps": "long"}, "decay_steps='long'"),
        ({**WARMUP, "decay_factor": 0.0}, r"decay_factor=0.0 .* in \(0, 1\]"),
        ({**WARMUP, "warmup_steps": -1}, "warmup_steps=-1 .* >= 0"),
        ({**WARMUP, "decay_every_steps": float("inf")}, "decay_every_steps=inf"),
    ],
)
def test_a_bad_schedule_or_parameter_is_refused_naming_the_key(hparams, message):
    with pytest.raises(ValueError, match=message):
        multiplier(hparams)
    with pytest.raises(ValueError, match=message):  # as the workload hook builds it
        lr_scheduler(torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1), hparams)


def optimizer(lr: float = 0.2) -> torch.optim.Optimizer:
    return torch.optim.SGD([torch.zeros(2, requires_grad=True)], lr=lr, momentum=0.9)


def test_a_constant_rate_builds_no_scheduler():
    assert lr_scheduler(optimizer(), {}) is None
    assert lr_scheduler(optimizer(), {"schedule": "constant"}) is None


@pytest.mark.parametrize("hparams", [LINEAR, WARMUP, WARMUP_LINEAR])
def test_the_scheduler_sets_the_rate_of_step_k_to_lr_times_its_multiplier(hparams):
    opt = optimizer(lr=0.2)
    scheduler = lr_scheduler(opt, hparams)
    assert isinstance(scheduler, torch.optim.lr_scheduler.LambdaLR)
    factor, rates = multiplier(hparams), []
    for _ in range(30):
        rates.append(opt.param_groups[0]["lr"])
        opt.step()
        scheduler.step()
    assert rates == pytest.approx([0.2 * factor(step) for step in range(30)])
