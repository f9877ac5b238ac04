"""Training steps/s with batch echoing when the input pipeline is the bottleneck.

A simulated pipeline: the upstream (one DataLoader worker process) takes R times the
downstream step time per batch, spent waiting as for slow storage (``--upstream sleep``) or
burning CPU as for decoding (``--upstream spin``); the downstream is a fixed amount of real
compute (single-threaded matmuls calibrated to ``--step-ms``). For each R it measures steps/s
without echo (e=1), with batch echoing at fixed factors, and with `EchoOnStall`, side by side
in one run, and reports each rate relative to e=1 next to the ideal min(e, R). R is taken as
run: the upstream's time per batch over the time per step of the same loop fed from memory
(no input pipeline), measured beside the cases.

    python -m benchmarks.echo_speedup --out benchmarks/results/echo_speedup.csv
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time

import torch
from torch.utils.data import DataLoader, IterableDataset

from benchmarks.common import machine_note, print_table, write_csv
from echo.torch import Echo, EchoOnStall


class SlowUpstream(IterableDataset):
    """Endless batches, each taking ``seconds`` of upstream time to produce."""

    def __init__(self, seconds: float, mode: str, batch_shape: tuple[int, ...]) -> None:
        self.seconds, self.mode, self.batch_shape = seconds, mode, batch_shape

    def __iter__(self):
        batch = torch.zeros(self.batch_shape)
        while True:
            if self.mode == "sleep":
                time.sleep(self.seconds)
            else:
                end = time.perf_counter() + self.seconds
                while time.perf_counter() < end:
                    pass
            yield batch.clone()


class ComputeStep:
    """A fixed amount of single-threaded matmul work taking about ``seconds``."""

    def __init__(self, seconds: float, size: int = 192) -> None:
        self.a = torch.randn(size, size)
        for _ in range(50):  # warm-up: the first matmuls pay for allocation and start-up
            self.a @ self.a
        count, start = 0, time.perf_counter()
        while time.perf_counter() - start < 0.3:
            self.a @ self.a
            count += 1
        per_matmul = (time.perf_counter() - start) / count
        self.repeats = max(1, round(seconds / per_matmul))
        self.seconds = self.measure()

    def measure(self, steps: int = 20) -> float:
        """Median seconds of one step, as measured now."""
        times = []
        for _ in range(steps):
            start = time.perf_counter()
            self(None)
            times.append(time.perf_counter() - start)
        return sorted(times)[steps // 2]

    def __call__(self, batch: torch.Tensor | None) -> None:
        for _ in range(self.repeats):
            self.a @ self.a


def steps_per_second(batches, step: ComputeStep, steps: int) -> float:
    """Steps/s over ``steps`` steps, timed from the first batch (worker start-up excluded)."""
    iterator = iter(batches)
    step(next(iterator))
    start = time.perf_counter()
    for batch in itertools.islice(iterator, steps):
        step(batch)
    return steps / (time.perf_counter() - start)


def cases_for(ratio: float, step_s: float, args: argparse.Namespace) -> dict[tuple, object]:
    """(mode, factor) -> an iterable of batches, for upstream ratio ``ratio``."""
    loader = DataLoader(
        SlowUpstream(ratio * step_s, args.upstream, (args.batch_size, 16)),
        batch_size=None,
        num_workers=1,
        prefetch_factor=2,
    )
    cases: dict[tuple, object] = {
        ("in_memory", 1.0): itertools.repeat(torch.zeros(args.batch_size, 16))
    }
    for factor in args.factors:
        cases[("batch_echo", float(factor))] = Echo(loader, factor)
    cases[("echo_on_stall", float(args.max_factor))] = EchoOnStall(
        loader, max_factor=args.max_factor
    )
    return cases


def run(args: argparse.Namespace) -> list[dict]:
    torch.set_num_threads(1)
    step_s = args.step_ms / 1000
    step = ComputeStep(step_s)
    print(f"downstream step: {step.seconds * 1000:.2f} ms measured ({args.step_ms} ms asked)")
    rows = []
    for ratio in args.ratios:
        cases = cases_for(ratio, step_s, args)
        rates: dict[tuple, list[float]] = {key: [] for key in cases}
        for _ in range(args.rounds):  # rounds interleaved: drift hits every case alike
            for key, batches in cases.items():
                rates[key].append(steps_per_second(batches, step, args.steps))
        rate = {key: statistics.median(values) for key, values in rates.items()}
        # R as run: the upstream's (exact) wait per batch over the step time of the same
        # training loop fed from memory (no input pipeline at all).
        measured_ratio = ratio * step_s * rate[("in_memory", 1.0)]
        base = rate[("batch_echo", 1.0)]
        for (mode, factor), value in rate.items():
            if mode == "in_memory":
                continue
            ideal = min(factor, max(measured_ratio, 1.0))
            rows.append(
                {
                    "upstream_ratio_R": ratio,
                    "measured_R": measured_ratio,
                    "mode": mode,
                    "factor": factor,
                    "steps": args.steps,
                    "rounds": args.rounds,
                    "steps_per_s": value,
                    "speedup_vs_e1": value / base,
                    "ideal_speedup": ideal,
                    "fraction_of_ideal": value / base / ideal,
                    "in_memory_steps_per_s": rate[("in_memory", 1.0)],
                    "upstream": args.upstream,
                    "step_ms": args.step_ms,
                    "step_ms_measured": step.seconds * 1000,
                    "machine": machine_note(),
                }
            )
            print(
                f"R={ratio:<4} (as run {measured_ratio:.2f}) {mode:<14} e={factor:<4} "
                f"{value:7.1f} steps/s x{value / base:.2f} (ideal x{ideal:.2f})",
                flush=True,
            )
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="CSV file to write")
    parser.add_argument(
        "--ratios",
        type=float,
        nargs="+",
        default=[0.5, 1, 2, 4, 8],
        help="upstream/downstream time ratios R (0.5 1 2 4 8)",
    )
    parser.add_argument(
        "--factors",
        type=int,
        nargs="+",
        default=[1, 2, 4, 8],
        help="batch echo factors; must include 1 (1 2 4 8)",
    )
    parser.add_argument("--max-factor", type=int, default=8, help="EchoOnStall cap (8)")
    parser.add_argument("--steps", type=int, default=40, help="timed steps per case (40)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per case; median (3)")
    parser.add_argument("--step-ms", type=float, default=10.0, help="downstream step (10 ms)")
    parser.add_argument("--batch-size", type=int, default=64, help="rows per batch (64)")
    parser.add_argument(
        "--upstream",
        choices=["sleep", "spin"],
        default="sleep",
        help="how upstream time is spent: waiting (sleep) or CPU (spin)",
    )
    args = parser.parse_args(argv)
    if 1 not in args.factors:
        parser.error("--factors must include 1, the baseline")
    args.factors = sorted(set(args.factors))

    rows = run(args)
    write_csv(rows, args.out)
    print()
    print_table(
        rows,
        [
            "upstream_ratio_R",
            "measured_R",
            "mode",
            "factor",
            "steps_per_s",
            "speedup_vs_e1",
            "ideal_speedup",
            "fraction_of_ideal",
        ],
    )
    print(f"wrote {args.out}")
    return rows


if __name__ == "__main__":
    main()
