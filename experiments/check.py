"""``python -m experiments.check --workload W``: check a workload against its contract, fast.

It reads both splits and checks they are sized and indexable, builds the pipeline and the
model, runs three training steps on one batch and one evaluation, checks the evaluation
returns the target's metric, and estimates the time to the target from the measured step and
evaluation times (an upper bound: the whole fresh-example budget). Each problem is one line
naming it.

Example::

    python -m experiments.check --workload cifar10_resnet
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

import torch

from experiments import registry
from experiments.data import MissingDataError
from experiments.devices import resolve_device, to_device
from experiments.pipeline import read_split, workload_pipeline
from experiments.workload import SPLITS
from run_contract.identity import SCALES, RunSpec

__all__ = ["check", "main"]


def check(workload: str, scale: str = "cpu", data_dir: str | None = None) -> list[str]:
    """Check ``workload`` at ``scale``; return the report's lines.

    Raises:
        ValueError: A broken or unknown workload, an unknown scale, or a contract breach
            (the message names it).
        TypeError: ``read`` returns something that is not sized and indexable.
        experiments.data.MissingDataError: The data source is not installed.
    """
    cls = registry.get(workload)
    defaults = registry.defaults(workload, scale)
    hp = RunSpec(workload=workload, scale=scale).resolve(defaults)["hparams"]
    instance = cls(scale=scale, data_dir=data_dir, hparams=hp)
    lines = [f"{workload}: {cls.description or '(no description)'}"]
    for split in SPLITS:
        lines.append(f"read({split!r}): {len(read_split(instance, split))} examples")
    torch.manual_seed(0)
    device = resolve_device("auto")
    model = instance.build_model().to(device)
    optimizer = instance.optimizer(model)
    instance.schedule(optimizer)  # a bad schedule hyper-parameter fails here, named
    batch = to_device(next(iter(workload_pipeline(instance, seed=0))).batch, device)
    times = []
    for _ in range(3):  # the first step warms up; the estimate takes the fastest later one
        start = time.perf_counter()
        loss = float(instance.train_step(model, optimizer, batch))
        times.append(time.perf_counter() - start)
    step_s = min(times[1:])
    start = time.perf_counter()
    model.eval()
    with torch.no_grad():
        metrics = instance.evaluate(model, device)
    eval_s = time.perf_counter() - start
    target = instance.target
    if target.metric not in metrics:
        raise ValueError(
            f"evaluate() returned no {target.metric!r} (the target's metric); it returned "
            f"{sorted(metrics)}"
        )
    steps = -(-defaults.max_fresh // hp["batch_size"])
    evaluations = -(-defaults.max_fresh // defaults.eval_every_fresh) + 1
    lines += [
        f"training step ({hp['batch_size']} examples, {device.type}): {step_s * 1000:.0f} ms "
        f"(first {times[0] * 1000:.0f} ms), loss {loss:.4g}",
        f"one evaluation: {eval_s:.2f} s, {target.metric} {float(metrics[target.metric]):.4g} "
        f"(target {target.value:g}, {target.direction})",
        f"time to target: at most ~{steps * step_s + evaluations * eval_s:.0f} s (the budget of "
        f"{defaults.max_fresh} fresh examples: {steps} steps, {evaluations} evaluations)",
    ]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Command line; exit status 0 when the workload passes, 1 with one line when not."""
    p = argparse.ArgumentParser(prog="python -m experiments.check", description=__doc__)
    p.add_argument("--workload", required=True, help="registered workload (or a broken one)")
    p.add_argument("--scale", choices=SCALES, default="cpu", help="workload scale (default cpu)")
    p.add_argument("--data-dir", help="the workload's data folder (required at paper scale)")
    args = p.parse_args(argv)
    try:
        lines = check(args.workload, args.scale, args.data_dir)
    except (ValueError, TypeError, MissingDataError) as error:
        print(f"{p.prog}: {args.workload}: {error}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
