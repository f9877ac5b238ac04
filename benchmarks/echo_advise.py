"""Does `echo.advise` measure R honestly, and is its advice as fast as the best fixed factor?

The synthetic pipeline of `benchmarks.echo_speedup`: one DataLoader worker that waits R x the
step time per batch (the step's time as measured), and a step of single-threaded matmuls
(``--step wait``: a step that waits, as the host waits for an accelerator, whose time a busy
machine does not change). For each R, `echo.advise`
measures the loader and the step (R within 15% of the set value is the goal; R "as run", the
upstream wait over the step time measured just before, is reported beside) and advises a
setting for ``--workload``; then, side by side in interleaved rounds, the advised factor runs
for real (batch echoing: in this pipeline all the upstream time is before any echo point, so
every point gives e steps per fresh batch), beside `echo_speedup`'s fixed factors and the
offered `EchoOnStall`. It reports the advised setting's steps/s over the best fixed factor's
(goal >= 0.9).

    python -m benchmarks.echo_advise --out benchmarks/reference/echo_advise.csv
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch.utils.data import DataLoader

from benchmarks.common import join_repeats, machine_note, print_table, write_csv
from benchmarks.echo_speedup import ComputeStep, SlowUpstream, rates_by_repeat, steps_per_second
from echo import advise
from echo.advisor import workloads
from echo.torch import Echo, EchoOnStall

__all__ = ["WaitingStep", "main", "run"]

_COLUMNS = [
    "upstream_ratio_R", "as_run_R", "advise_R", "advise_R_error", "advised_point", "advised_factor",
    "advised_steps_per_s", "best_fixed_factor", "best_fixed_steps_per_s", "advised_over_best",
    "on_stall_max_factor", "on_stall_over_best",
]  # fmt: skip


class WaitingStep(ComputeStep):
    """A step that waits ``seconds`` (``time.sleep``), as the host waits for an accelerator:
    its time does not depend on what else runs on the CPUs."""

    def __init__(self, seconds: float) -> None:
        self.wait = seconds
        self.seconds = self.measure()

    def __call__(self, batch: torch.Tensor | None) -> None:
        time.sleep(self.wait)


def _loader(ratio: float, step_s: float, args: argparse.Namespace) -> DataLoader:
    return DataLoader(
        SlowUpstream(ratio * step_s, args.upstream, (args.batch_size, 16)),
        batch_size=None,
        num_workers=1,
        prefetch_factor=2,
    )


def run(args: argparse.Namespace) -> list[dict]:
    """Advise at each R of ``args.ratios`` and time the advice beside the fixed factors.

    Args:
        args: The parsed command line of `main`.

    Returns:
        One row per R: the set and advised R (median and min-max over advise's windows), the
        step's time alone just before `advise` and just after the rounds, the
        advised setting and its expected time to target, each case's median steps/s and per
        round (``*_by_repeat``, `benchmarks.common.join_repeats`), the advised and
        `EchoOnStall` rates over the best fixed factor's, and the settings.
    """
    torch.set_num_threads(1)
    step = (WaitingStep if args.step == "wait" else ComputeStep)(args.step_ms / 1000)
    step_s = step.seconds  # R is set against the step as measured, not as asked
    print(f"downstream step: {step.seconds * 1000:.2f} ms measured ({args.step_ms} ms asked)")
    rows = []
    for ratio in args.ratios:
        before = step.measure()
        as_run = ratio * step_s / before  # as benchmarks.echo_speedup takes R as run
        advice = advise(
            _loader(ratio, step_s, args), step, workload=args.workload,
            windows=args.windows, batches=args.batches,
        )  # fmt: skip
        setting = advice.setting
        factor = setting.factor if setting is not None else 1.0
        loader = _loader(ratio, step_s, args)
        cases: dict[str, object] = {f"fixed_e{f}": Echo(loader, f) for f in args.factors}
        cases["advised"] = Echo(loader, factor)
        max_factor = advice.on_stall_max_factor or 1
        cases["on_stall"] = EchoOnStall(loader, max_factor=max_factor)
        by_round = rates_by_repeat(
            cases, args.rounds, lambda batches: steps_per_second(batches, step, args.steps)
        )
        step_after = step.measure()  # the step alone again: how far its time moved
        rate = {key: statistics.median(values) for key, values in by_round.items()}
        best = max(args.factors, key=lambda f: rate[f"fixed_e{f}"])
        best_rate = rate[f"fixed_e{best}"]
        measured = advice.measurement
        row = {
            "upstream_ratio_R": ratio,
            "advise_R": measured.R,
            "advise_R_low": min(measured.ratios),
            "advise_R_high": max(measured.ratios),
            "advise_R_error": measured.R / ratio - 1,
            "advise_loader_ms": statistics.median(measured.loader_s) * 1000,
            "advise_step_ms": statistics.median(measured.step_s) * 1000,
            "as_run_R": as_run,
            "step_ms_before": before * 1000,
            "step_ms_after": step_after * 1000,
            "advise_R_error_vs_as_run": measured.R / as_run - 1,
            "workload": args.workload,
            "advised_point": setting.point if setting is not None else "none",
            "advised_factor": factor,
            "expected_time_to_target": setting.time if setting is not None else 1.0,
            "advised_steps_per_s": rate["advised"],
            "best_fixed_factor": best,
            "best_fixed_steps_per_s": best_rate,
            "advised_over_best": rate["advised"] / best_rate,
            "on_stall_max_factor": max_factor,
            "on_stall_steps_per_s": rate["on_stall"],
            "on_stall_over_best": rate["on_stall"] / best_rate,
            **{f"{key}_steps_per_s_by_repeat": join_repeats(v) for key, v in by_round.items()},
            "windows": args.windows,
            "batches": args.batches,
            "steps": args.steps,
            "rounds": args.rounds,
            "upstream": args.upstream,
            "step": args.step,
            "step_ms": args.step_ms,
            "step_ms_measured": step.seconds * 1000,
            "machine": machine_note(),
        }
        rows.append(row)
        print(
            f"R={ratio:<4} (as run {as_run:.2f}) advise measured {measured.R:.2f} "
            f"({row['advise_R_error']:+.1%}); "
            f"advised {row['advised_point']} e={factor:g}: {rate['advised']:.1f} steps/s, "
            f"x{row['advised_over_best']:.2f} of the best fixed e={best} "
            f"({best_rate:.1f}); EchoOnStall(max {max_factor}) x{row['on_stall_over_best']:.2f}",
            flush=True,
        )
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    """Command line: measure (`run`), write the CSV and print the table.

    Args:
        argv: Command-line arguments (``--help`` lists them). Default None: ``sys.argv[1:]``.

    Returns:
        The rows written (`run`).
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="CSV file to write")
    parser.add_argument(
        "--ratios", type=float, nargs="+", default=[2, 4, 8],
        help="upstream/downstream time ratios R (2 4 8)",
    )  # fmt: skip
    parser.add_argument(
        "--factors", type=int, nargs="+", default=[1, 2, 4, 8],
        help="fixed batch echo factors, as benchmarks.echo_speedup's (1 2 4 8)",
    )  # fmt: skip
    parser.add_argument(
        "--workload", choices=list(workloads()), default="imagenet_resnet",
        help="the evidence advise reads (imagenet_resnet)",
    )  # fmt: skip
    parser.add_argument("--windows", type=int, default=5, help="advise's windows (5)")
    parser.add_argument("--batches", type=int, default=8, help="advise's batches per window (8)")
    parser.add_argument("--steps", type=int, default=40, help="timed steps per case (40)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per case; median (3)")
    parser.add_argument("--step-ms", type=float, default=10.0, help="downstream step (10 ms)")
    parser.add_argument(
        "--step", choices=["compute", "wait"], default="compute",
        help="the step: single-threaded matmuls (compute, as benchmarks.echo_speedup's), or a "
        "wait, as the host's for an accelerator (its time independent of CPU load)",
    )  # fmt: skip
    parser.add_argument("--batch-size", type=int, default=64, help="rows per batch (64)")
    parser.add_argument(
        "--upstream", choices=["sleep", "spin"], default="sleep",
        help="how upstream time is spent: waiting (sleep) or CPU (spin)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    args.factors = sorted(set(args.factors))
    rows = run(args)
    write_csv(rows, args.out)
    print()
    print_table(rows, _COLUMNS)
    print(f"wrote {args.out}")
    return rows


if __name__ == "__main__":
    main()
