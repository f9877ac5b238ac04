"""A fast consumer beside a slow one, with and without echo on stall, on both backends.

One producer serves the ``images`` batches of `benchmarks.sharing` (2 loader workers) to two
consumers for ``--batches`` batches: a slow one (``--slow-ms`` per step) and a fast one
(``--fast-ms``). The producer runs at most ``max_lag`` batches ahead of the slowest, so without
echo the fast consumer waits on the slow one; with ``echo_on_stall=F`` it trains on repeats of
its latest batch meanwhile (at most F uses of each). Backends (``--backends``):

* ``local``: `Producer.from_dataset` on a ``unix:`` endpoint, consumers in processes of this
  machine;
* ``ray``: `Producer(loader, endpoint="ray:NAME")` on the head node of a
  `ray.cluster_utils.Cluster`, the slow and the fast consumer each an actor on its own
  simulated node (every batch crosses to each node through Ray's object store).

Reported per consumer: steps per second and the fresh and echoed examples it trained on
(counted by the consumer, exact).

    python -m benchmarks.sharing_echo --out benchmarks/reference/sharing_echo.csv
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from typing import Any

from benchmarks.common import finish_trial, machine_note, print_table, write_csv
from benchmarks.sharing import BATCH, FORK, Images, pool_producer

__all__ = ["BACKENDS", "main", "run", "train"]

BACKENDS: tuple[str, ...] = ("local", "ray")
"""The sharing backends compared."""

_ROLES = (("slow", "slow_ms"), ("fast", "fast_ms"))


def train(endpoint: str, name: str, step_s: float, echo_on_stall: int) -> dict[str, Any]:
    """A consumer that spends ``step_s`` per step; its steps/s and counts.

    Args:
        endpoint (str): The producer's endpoint (``unix:@NAME`` or ``ray:NAME``).
        name (str): ``slow`` or ``fast``, for the row.
        step_s (float): Seconds of (simulated) training per step.
        echo_on_stall (int): The consumer's ``echo_on_stall`` (1: no echo).

    Returns:
        dict: The consumer's row.
    """
    from sharing import Consumer

    with Consumer(endpoint, echo_on_stall=echo_on_stall, connect_timeout_s=30) as consumer:
        steps, began = 0, time.monotonic()
        for _ in consumer:
            steps += 1
            time.sleep(step_s)
        seconds = time.monotonic() - began
        return {
            "consumer": name,
            "echo_on_stall": echo_on_stall,
            "step_ms": 1000 * step_s,
            "steps": steps,
            "steps_per_s": steps / seconds,
            "fresh_examples": consumer.fresh_examples,
            "echoed_examples": consumer.echoed_examples,
        }


def _role(name: str, key: str, factor: int, args: argparse.Namespace) -> tuple:
    """`train`'s arguments after the endpoint for consumer ``name``: only the fast one echoes."""
    return name, getattr(args, key) / 1000, factor if name == "fast" else 1


def _train_into(report, *args) -> None:
    report.put(train(*args))


def _local(factor: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    """One trial on the local backend: processes, a ``unix:`` endpoint."""
    report = FORK.Queue()
    endpoint = f"unix:@bench-echo-{time.monotonic_ns()}"
    producer = FORK.Process(
        target=pool_producer, args=(Images(BATCH * args.batches), 2, endpoint, 2)
    )
    producer.start()
    consumers = [
        FORK.Process(target=_train_into, args=(report, endpoint, *_role(name, key, factor, args)))
        for name, key in _ROLES
    ]
    for process in consumers:
        process.start()
    finish_trial(consumers, [producer], args.trial_timeout)
    return [report.get(timeout=10) for _ in consumers]


def _ray(factor: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    """One trial on the Ray backend: the producer on the head node, a consumer per node."""
    import ray

    from benchmarks.sharing_ray import serving_actor

    serving = serving_actor().remote()
    endpoint = f"ray:bench-echo-{os.getpid()}-{time.monotonic_ns()}"
    ray.get(serving.ray.remote(endpoint, "images", args.batches, 0, 2, 2))
    remote_train = ray.remote(num_cpus=0)(train)
    calls = [
        remote_train.options(resources={f"node{index}": 1}).remote(
            endpoint, *_role(name, key, factor, args)
        )
        for index, (name, key) in enumerate(_ROLES)
    ]
    try:
        return ray.get(calls, timeout=args.trial_timeout)
    finally:
        ray.get(serving.stop.remote())
        ray.kill(serving)


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every (backend, fast consumer's factor) trial; their rows, one per consumer."""
    rows = []
    for backend in args.backends:
        with contextlib.ExitStack() as stack:
            if backend == "ray":
                from benchmarks.sharing_ray import cluster_nodes
                from sharing.ray_backend import simulated_cluster

                stack.enter_context(simulated_cluster(*cluster_nodes(len(_ROLES))))
            for factor in args.factors:
                trial = (_ray if backend == "ray" else _local)(factor, args)
                rows += [
                    {"backend": backend, **row, "fast_echo_on_stall": factor,
                     "machine": machine_note()}
                    for row in trial
                ]  # fmt: skip
                fast = next(row for row in trial if row["consumer"] == "fast")
                print(
                    f"{backend} fast echo_on_stall={factor}: {fast['steps_per_s']:.1f} steps/s",
                    flush=True,
                )
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    """Command line: one trial per backend in ``--backends`` and echo factor of the fast
    consumer in ``--factors``; write the CSV and print the table.

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
    parser.add_argument(
        "--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS),
        help="sharing backends (local ray)",
    )  # fmt: skip
    parser.add_argument("--trial-timeout", type=float, default=300.0, help="seconds (300)")
    args = parser.parse_args(argv)
    rows = run(args)
    write_csv(rows, args.out)
    print_table(rows, [key for key in rows[0] if key != "machine"])
    print(f"wrote {args.out}")
    return rows


if __name__ == "__main__":
    main()
