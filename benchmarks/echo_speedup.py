"""Training steps/s with batch echoing when the input pipeline is the bottleneck.

A simulated pipeline: the upstream (one DataLoader worker process) takes R times the
downstream step time per batch, spent waiting as for slow storage (``--upstream sleep``) or
burning CPU as for decoding (``--upstream spin``); the downstream is a fixed amount of real
compute (single-threaded matmuls calibrated to ``--step-ms``). For each R it measures steps/s
without echo (e=1), with batch echoing at fixed factors, and with `EchoOnStall`, side by side
in one run, and reports each rate relative to e=1 next to the ideal min(e, R). R is taken as
run: the upstream's time per batch over the time per step of the same loop fed from memory
(no input pipeline), measured just before each case in each round.

    python -m benchmarks.echo_speedup --out benchmarks/results/echo_speedup.csv
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from collections.abc import Callable, Iterable

import torch
from torch.utils.data import DataLoader, IterableDataset

from benchmarks.common import join_repeats, machine_note, print_table, write_csv
from echo.torch import Echo, EchoOnStall

__all__ = [
    "SPEEDUP_COLUMNS",
    "ComputeStep",
    "SlowUpstream",
    "cases_for",
    "echo_cases",
    "main",
    "median_rates",
    "paired_rates",
    "rates_by_repeat",
    "run",
    "speedups",
    "steps_per_second",
]

SPEEDUP_COLUMNS = ("steps_per_s", "speedup_vs_e1", "ideal_speedup", "fraction_of_ideal")
"""The columns `speedups` gives each case, besides its mode and factor."""


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


def steps_per_second(
    batches: Iterable,
    step: Callable,
    steps: int,
    *,
    warmup: int = 1,
    finish: Callable[[], None] | None = None,
) -> float:
    """Steps/s over ``steps`` steps, timed after ``warmup`` steps (worker start-up excluded).

    Args:
        batches: Iterable of batches; iterated afresh.
        step: Called with each batch.
        steps: Timed steps.
        warmup: Steps before the clock starts. Default 1.
        finish: Called before each clock reading, e.g. to wait for queued device work.
            Default None.
    """
    iterator = iter(batches)
    for batch in itertools.islice(iterator, warmup):
        step(batch)
    if finish is not None:
        finish()
    start = time.perf_counter()
    for batch in itertools.islice(iterator, steps):
        step(batch)
    if finish is not None:
        finish()
    return steps / (time.perf_counter() - start)


def echo_cases(loader: Iterable, factors: Iterable[int], max_factor: int) -> dict[tuple, object]:
    """``(mode, factor) -> iterable of batches`` over ``loader``: batch echoing at each of
    ``factors`` (``batch_echo``) and `EchoOnStall` capped at ``max_factor``."""
    cases: dict[tuple, object] = {("batch_echo", float(f)): Echo(loader, f) for f in factors}
    cases[("echo_on_stall", float(max_factor))] = EchoOnStall(loader, max_factor=max_factor)
    return cases


def rates_by_repeat(
    cases: dict[tuple, object], rounds: int, rate: Callable
) -> dict[tuple, list[float]]:
    """``rate(batches)`` of each case in each of ``rounds`` rounds; rounds interleave the
    cases, so drift hits every case of a round alike (round ``i`` of one case pairs with
    round ``i`` of another)."""
    rates: dict[tuple, list[float]] = {key: [] for key in cases}
    for _ in range(rounds):
        for key, batches in cases.items():
            rates[key].append(rate(batches))
    return rates


def paired_rates(
    cases: dict[tuple, object], reference: Iterable, rounds: int, rate: Callable
) -> tuple[dict[tuple, list[float]], dict[tuple, list[float]]]:
    """Like `rates_by_repeat`, and ``rate(reference)`` measured just before each case of each
    round, so that each case is paired with the reference run next to it in time (drift of
    the machine between cases hits both of a pair alike).

    Returns:
        ``(rates, references)``: each case's rate per round, and the reference's rate
        measured just before it in that round.
    """
    rates: dict[tuple, list[float]] = {key: [] for key in cases}
    references: dict[tuple, list[float]] = {key: [] for key in cases}
    for _ in range(rounds):
        for key, batches in cases.items():
            references[key].append(rate(reference))
            rates[key].append(rate(batches))
    return rates, references


def median_rates(cases: dict[tuple, object], rounds: int, rate: Callable) -> dict[tuple, float]:
    """Median over ``rounds`` of ``rate(batches)`` for each case (`rates_by_repeat`)."""
    return {k: statistics.median(v) for k, v in rates_by_repeat(cases, rounds, rate).items()}


def speedups(rate: dict[tuple, float], measured_ratio: float) -> list[dict]:
    """One row per echo case of ``rate`` (``in_memory`` left out): its steps/s, its speedup
    over ``("batch_echo", 1.0)`` and the ideal min(e, R) for R = ``measured_ratio``."""
    base = rate[("batch_echo", 1.0)]
    rows = []
    for (mode, factor), value in rate.items():
        if mode == "in_memory":
            continue
        ideal = min(factor, max(measured_ratio, 1.0))
        rows.append(
            {
                "mode": mode,
                "factor": factor,
                "steps_per_s": value,
                "speedup_vs_e1": value / base,
                "ideal_speedup": ideal,
                "fraction_of_ideal": value / base / ideal,
            }
        )
    return rows


def cases_for(ratio: float, step_s: float, args: argparse.Namespace) -> dict[tuple, object]:
    """(mode, factor) -> an iterable of batches, for upstream ratio ``ratio`` (`echo_cases`
    over one DataLoader worker)."""
    loader = DataLoader(
        SlowUpstream(ratio * step_s, args.upstream, (args.batch_size, 16)),
        batch_size=None,
        num_workers=1,
        prefetch_factor=2,
    )
    return echo_cases(loader, args.factors, args.max_factor)


def run(args: argparse.Namespace) -> list[dict]:
    """Measure every case at each upstream ratio R of ``args.ratios``, printing each line.

    Args:
        args: The parsed command line of `main`.

    Returns:
        One row per (R, mode, factor): R as asked and as run, the columns ``SPEEDUP_COLUMNS``
        (`speedups`, of the rounds' medians), each round's steps/s of the case and of the
        loop fed from memory just before it (``*_by_repeat``,
        `benchmarks.common.join_repeats`; `paired_rates`), and the
        settings they were measured with.
    """
    torch.set_num_threads(1)
    step_s = args.step_ms / 1000
    step = ComputeStep(step_s)
    print(f"downstream step: {step.seconds * 1000:.2f} ms measured ({args.step_ms} ms asked)")
    rows = []
    for ratio in args.ratios:
        by_round, memory = paired_rates(
            cases_for(ratio, step_s, args),
            itertools.repeat(torch.zeros(args.batch_size, 16)),  # no input pipeline at all
            args.rounds,
            lambda batches: steps_per_second(batches, step, args.steps),
        )
        rate = {key: statistics.median(values) for key, values in by_round.items()}
        # R as run: the upstream's (exact) wait per batch over the step time of the same
        # training loop fed from memory, over every one of its runs at this R.
        in_memory = statistics.median(itertools.chain.from_iterable(memory.values()))
        measured_ratio = ratio * step_s * in_memory
        for case in speedups(rate, measured_ratio):
            case_key = case["mode"], case["factor"]
            rows.append(
                {
                    "upstream_ratio_R": ratio,
                    "measured_R": measured_ratio,
                    "mode": case["mode"],
                    "factor": case["factor"],
                    "steps": args.steps,
                    "rounds": args.rounds,
                    **{key: case[key] for key in SPEEDUP_COLUMNS},
                    "steps_per_s_by_repeat": join_repeats(by_round[case_key]),
                    "in_memory_steps_per_s": statistics.median(memory[case_key]),
                    "in_memory_steps_per_s_by_repeat": join_repeats(memory[case_key]),
                    "upstream": args.upstream,
                    "step_ms": args.step_ms,
                    "step_ms_measured": step.seconds * 1000,
                    "machine": machine_note(),
                }
            )
            print(
                f"R={ratio:<4} (as run {measured_ratio:.2f}) {case['mode']:<14} "
                f"e={case['factor']:<4} {case['steps_per_s']:7.1f} steps/s "
                f"x{case['speedup_vs_e1']:.2f} (ideal x{case['ideal_speedup']:.2f})",
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
    parser.add_argument(
        "--rounds", type=int, default=3, help="rounds per case; median (3; the claims need >= 5)"
    )
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
