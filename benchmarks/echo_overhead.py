"""Overhead of echo stages on a cheap source, PyTorch and tf.data.

Iterates each source bare and through an echo stage with factor 1, 2 and 4 (no shuffle
buffer), rounds interleaved, and reports the median time of each. PyTorch sources: a Python
list (the cheapest possible) and a map-style Dataset of preloaded tensors; tf.data: a
``Dataset.range``, counted in batches inside TensorFlow. In tf.data, ``echo(1)`` without a
counter returns the dataset itself (no stage, nothing to time); ``echo_e1_counted`` is what
asking for counts costs. The figure of merit is the
time ratio of ``Echo(factor=1)`` to the bare source (goal: <= 1.02). ``bare_again`` is an A/A
control: the bare case timed a second time as if it were another stage, so its ratio (ideally
1) shows how far this machine's noise alone moves a ratio in one run.

An epoch of a stage costs a fixed start (epoch bookkeeping, a few tens of microseconds when
that code is out of the CPU's caches) plus its items. ``extra_us_per_epoch`` is the first
(the stage's median time over the bare one's, per epoch); the ratio at the default 2,000,000
items is the second. A smaller ``--items`` makes the fixed start a larger share of a very
short epoch (a Python list's 200,000 items take 3 ms).

    python -m benchmarks.echo_overhead --out benchmarks/results/echo_overhead.csv
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable

import torch
from torch.utils.data import Dataset

from benchmarks.common import machine_note, print_table, write_csv
from echo.torch import Echo

__all__ = ["FACTORS", "TensorTable", "main", "measure", "tf_cases", "torch_cases"]

FACTORS = (1, 2, 4)


class TensorTable(Dataset):
    """A cheap map-style dataset: every index returns a row of a preloaded tensor."""

    def __init__(self, n: int) -> None:
        self.rows = torch.zeros(n, 8).unbind(0)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> torch.Tensor:
        return self.rows[index]


def _drain(iterable) -> int:
    count = 0
    for _ in iterable:
        count += 1
    return count


def torch_cases(n: int) -> dict[tuple[str, str], Callable[[], int]]:
    """(source, stage) -> a function that iterates it once and returns items seen."""
    sources = {"list": list(range(n)), "map_dataset": TensorTable(n)}

    def bare(source):
        if isinstance(source, Dataset):
            return lambda: _drain(map(source.__getitem__, range(len(source))))
        return lambda: _drain(source)

    cases = {}
    for name, source in sources.items():
        cases[(name, "bare")] = bare(source)
        cases[(name, "bare_again")] = bare(source)  # the A/A control
        for factor in FACTORS:
            # Built once: each round is one epoch of it. In source order, like the bare case
            # (the default per-epoch permutation would time the permutation, not the stage).
            stage = Echo(source, factor, shuffle=False)
            cases[(name, f"echo_e{factor}")] = lambda stage=stage: _drain(stage)
    return cases


def tf_cases(n: int) -> dict[tuple[str, str], Callable[[], int]]:
    """(source, stage) -> a function that iterates it once and returns items seen, for tf.data.

    The source is ``Dataset.range(n)``, bare and through `echo.tfdata.echo` (with and without
    a counter), counted in batches inside a traced function. Imports TensorFlow.

    Args:
        n: Items in the source.
    """
    import tensorflow as tf

    from echo.tfdata import EchoCounter, echo

    def count(ds):
        # Counting whole batches in a traced function keeps tf.data's per-element reduce cost
        # and the tracing (done once, at warm-up) out of the timing.
        batches = ds.batch(1024)

        @tf.function
        def total():
            n = tf.constant(0, tf.int64)
            for batch in batches:
                n += tf.cast(tf.shape(batch)[0], tf.int64)
            return n

        return lambda: int(total())

    source = tf.data.Dataset.range(n)
    assert source.apply(echo(1)) is source  # factor 1, no buffer, no counter: no stage at all
    cases = {("tf_range", "bare"): count(source)}
    for factor in FACTORS[1:]:
        cases[("tf_range", f"echo_e{factor}")] = count(source.apply(echo(factor, seed=0)))
    cases[("tf_range", "echo_e1_counted")] = count(source.apply(echo(1, counter=EchoCounter())))
    counted = source.apply(echo(2, seed=0, counter=EchoCounter()))
    cases[("tf_range", "echo_e2_counted")] = count(counted)  # goal: <= 1.1x echo_e2
    return cases


def measure(cases: dict, rounds: int) -> dict[tuple[str, str], tuple[float, int]]:
    """Median seconds and items per case; rounds interleaved (in a rotating order) so drift
    hits all cases alike, garbage collection paused while a case is timed."""
    times: dict[tuple[str, str], list[float]] = {key: [] for key in cases}
    items: dict[tuple[str, str], int] = {}
    for fn in cases.values():
        fn()  # warm-up
    for round_index in range(rounds):
        keys = list(cases)
        keys = keys[round_index % len(keys) :] + keys[: round_index % len(keys)]  # rotate
        for key in keys:
            gc.collect()
            gc.disable()  # a collection landing inside one case's timing is noise
            start = time.perf_counter()
            items[key] = cases[key]()
            times[key].append(time.perf_counter() - start)
            gc.enable()
    return {key: (statistics.median(times[key]), items[key]) for key in cases}


def main(argv: list[str] | None = None) -> list[dict]:
    """Command line: time the PyTorch cases, then the tf.data ones; write the CSV, print it.

    Args:
        argv: Command-line arguments (``--help`` lists them). Default None: ``sys.argv[1:]``.

    Returns:
        The rows written, one per (source, stage).
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="CSV file to write")
    parser.add_argument("--items", type=int, default=2_000_000, help="source size (2000000)")
    parser.add_argument("--tf-items", type=int, default=20_000, help="tf.data source size (20000)")
    parser.add_argument("--rounds", type=int, default=7, help="timed rounds per case (7)")
    parser.add_argument("--no-tf", action="store_true", help="skip the tf.data cases")
    args = parser.parse_args(argv)

    # One framework at a time: TensorFlow's thread pools would disturb the torch timings.
    results = measure(torch_cases(args.items), args.rounds)
    sizes = dict.fromkeys(results, args.items)
    if not args.no_tf:
        tf_results = measure(tf_cases(args.tf_items), args.rounds)
        results |= tf_results
        sizes |= dict.fromkeys(tf_results, args.tf_items)
    rows = []
    for (source, stage), (seconds, items) in results.items():
        bare_seconds = results[(source, "bare")][0]
        rows.append(
            {
                "framework": "tf.data" if source.startswith("tf_") else "torch",
                "source": source,
                "stage": stage,
                "items_out": items,
                "seconds_median": seconds,
                "items_per_s": items / seconds,
                "fresh_per_s": sizes[(source, stage)] / seconds,
                "time_ratio_vs_bare": seconds / bare_seconds,
                "extra_us_per_epoch": (seconds - bare_seconds) * 1e6,
                "machine": machine_note(),
            }
        )
    write_csv(rows, args.out)
    print_table(
        rows,
        ["source", "stage", "items_per_s", "fresh_per_s", "time_ratio_vs_bare",
         "extra_us_per_epoch"],
    )  # fmt: skip
    print(f"wrote {args.out}")
    return rows


if __name__ == "__main__":
    main()
