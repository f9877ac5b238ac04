"""A fast consumer beside a slow one, with and without echo on stall.

One `Producer.from_dataset` (the ``images`` batches of `benchmarks.sharing`, 2 workers)
serves two consumers for ``--batches`` batches: a slow one (``--slow-ms`` per step) and a
fast one (``--fast-ms``). The producer runs at most ``max_lag`` batches ahead of the slowest,
so without echo the fast consumer waits on the slow one; with ``echo_on_stall=F`` it trains on
repeats of its latest batch meanwhile (at most F uses of each). Reported per consumer: steps
per second and the fresh and echoed examples it trained on (counted by the consumer, exact).

    python -m benchmarks.sharing_echo --out benchmarks/reference/sharing_echo.csv
"""

from __future__ import annotations

import argparse
import time

from benchmarks.common import finish_trial, machine_note, print_table, write_csv
from benchmarks.sharing import BATCH, FORK, Images, pool_producer

__all__ = ["main", "run", "train"]


def train(endpoint: str, name: str, step_s: float, echo_on_stall: int, report) -> None:
    """A consumer that spends ``step_s`` per step; reports its steps/s and counts."""
    from sharing import Consumer

    with Consumer(endpoint, echo_on_stall=echo_on_stall, connect_timeout_s=30) as consumer:
        steps, began = 0, time.monotonic()
        for _ in consumer:
            steps += 1
            time.sleep(step_s)
        seconds = time.monotonic() - began
        report.put({
            "consumer": name,
            "echo_on_stall": echo_on_stall,
            "step_ms": 1000 * step_s,
            "steps": steps,
            "steps_per_s": steps / seconds,
            "fresh_examples": consumer.fresh_examples,
            "echoed_examples": consumer.echoed_examples,
        })  # fmt: skip


def run(factor: int, args) -> list[dict]:
    """One trial: the slow consumer without echo, the fast one with ``factor``."""
    report = FORK.Queue()
    endpoint = f"unix:@bench-echo-{time.monotonic_ns()}"
    dataset = Images(BATCH * args.batches)
    producer = FORK.Process(target=pool_producer, args=(dataset, 2, endpoint, 2))
    producer.start()
    consumers = [
        FORK.Process(target=train, args=(endpoint, "slow", args.slow_ms / 1000, 1, report)),
        FORK.Process(target=train, args=(endpoint, "fast", args.fast_ms / 1000, factor, report)),
    ]
    for process in consumers:
        process.start()
    finish_trial(consumers, [producer], args.trial_timeout)
    rows = [report.get(timeout=10) for _ in consumers]
    return [{**row, "fast_echo_on_stall": factor, "machine": machine_note()} for row in rows]


def main(argv: list[str] | None = None) -> list[dict]:
    """Command line: one trial (`run`) per echo factor of the fast consumer in ``--factors``;
    write the CSV and print the table.

    Args:
        argv: Command-line arguments (``--help`` lists them). Default None: ``sys.argv[1:]``.

    Returns:
        The rows written, one per consumer and trial.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="CSV file to write")
    parser.add_argument("--batches", type=int, default=200, help="batches in the epoch (200)")
    parser.add_argument("--slow-ms", type=float, default=20.0, help="slow step, ms (20)")
    parser.add_argument("--fast-ms", type=float, default=5.0, help="fast step, ms (5)")
    parser.add_argument("--factors", type=int, nargs="+", default=[1, 4], help="fast's (1 4)")
    parser.add_argument("--trial-timeout", type=float, default=300.0, help="seconds (300)")
    args = parser.parse_args(argv)
    rows = [row for factor in args.factors for row in run(factor, args)]
    write_csv(rows, args.out)
    print_table(rows, [key for key in rows[0] if key != "machine"])
    print(f"wrote {args.out}")
    return rows


if __name__ == "__main__":
    main()
