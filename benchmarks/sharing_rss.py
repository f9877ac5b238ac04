"""Memory over a long shared-loading run: does it stay flat?

One producer serves N consumers that each read ``--batches`` image batches (64x3x224x224
uint8, 9.6 MB, the ``images`` workload of `benchmarks.sharing`), once with
``Producer(DataLoader(...))`` (``shared``) and once with ``Producer.from_dataset``
(``shared_pool``), each with ``--workers`` loader workers. Every ``--every-s`` seconds the
producer process records its resident memory (``VmRSS``: anonymous plus the shared pages it
maps) and the machine's shared memory in use (``Shmem`` of /proc/meminfo, less its value
before the trial: batches in flight in every process, workers' and consumers' included), with
the batches served so far and the pool's segments. Run it on an otherwise idle machine: the
Shmem column is machine-wide.

    python -m benchmarks.sharing_rss --out benchmarks/reference/sharing_rss.csv
"""

from __future__ import annotations

import argparse
import threading
import time

from benchmarks.common import finish_trial, machine_note, print_table, write_csv
from benchmarks.sharing import BATCH, FORK, Images, make_loader, shared_consumer

__all__ = ["MODES", "main", "meminfo_mb", "run", "status_mb"]

MODES = ("shared", "shared_pool")


def status_mb(field: str, pid: str = "self") -> float:
    """A ``/proc/PID/status`` field (e.g. ``VmRSS``) in MB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise KeyError(field)


def meminfo_mb(field: str) -> float:
    """A ``/proc/meminfo`` field (e.g. ``Shmem``) in MB."""
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise KeyError(field)


def _produce(mode: str, dataset, workers: int, endpoint: str, consumers: int, every_s, rows):
    """The producer process: serve until SIGTERM, sampling memory every ``every_s``."""
    from sharing import Producer

    if mode == "shared_pool":
        producer = Producer.from_dataset(
            dataset, batch_size=BATCH, num_workers=workers, endpoint=endpoint, epochs=None,
            consumers=consumers,
        )  # fmt: skip
    else:
        producer = Producer(
            make_loader(dataset, workers), endpoint=endpoint, epochs=None, consumers=consumers
        )
    shmem_before, began = meminfo_mb("Shmem"), time.monotonic()

    def sample() -> None:
        while True:
            time.sleep(every_s)
            metrics = producer.metrics()
            rows.put({
                "mode": mode,
                "seconds": round(time.monotonic() - began, 2),
                "batches_served": metrics["batches_served"],
                "producer_rss_mb": status_mb("VmRSS"),
                "shmem_mb": meminfo_mb("Shmem") - shmem_before,
                "segments": metrics.get("segments", 0),
            })  # fmt: skip

    threading.Thread(target=sample, daemon=True).start()
    with producer:
        producer.serve()


def run(mode: str, args) -> list[dict]:
    """One trial: the samples it recorded."""
    rows = FORK.Queue()
    endpoint = f"unix:@bench-rss-{mode}-{time.monotonic_ns()}"
    dataset = Images(BATCH * (args.batches + 8))
    producer = FORK.Process(
        target=_produce,
        args=(mode, dataset, args.workers, endpoint, args.consumers, args.every_s, rows),
    )
    producer.start()
    report = FORK.Queue()
    consumers = [
        FORK.Process(target=shared_consumer, args=(endpoint, args.batches, report, i))
        for i in range(args.consumers)
    ]
    for process in consumers:
        process.start()
    finish_trial(consumers, [producer], args.trial_timeout)
    samples = []
    while not rows.empty():
        samples.append({**rows.get(), "consumers": args.consumers, "machine": machine_note()})
    return samples


def main(argv: list[str] | None = None) -> list[dict]:
    """Command line: one trial (`run`) per mode of ``--modes``; write every sample to the CSV
    and print each mode's first and last quarter of samples, averaged.

    Args:
        argv: Command-line arguments (``--help`` lists them). Default None: ``sys.argv[1:]``.

    Returns:
        The samples written.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="CSV file to write")
    parser.add_argument("--consumers", type=int, default=4, help="N (4)")
    parser.add_argument("--batches", type=int, default=3000, help="batches per consumer (3000)")
    parser.add_argument("--workers", type=int, default=2, help="loader workers (2)")
    parser.add_argument("--every-s", type=float, default=1.0, help="seconds between samples (1)")
    parser.add_argument("--trial-timeout", type=float, default=600.0, help="seconds (600)")
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
    args = parser.parse_args(argv)
    rows = [row for mode in args.modes for row in run(mode, args)]
    write_csv(rows, args.out)
    summary = []
    for mode in args.modes:
        ours = [row for row in rows if row["mode"] == mode]
        quarter = max(1, len(ours) // 4)
        for part, chosen in (("first quarter", ours[:quarter]), ("last quarter", ours[-quarter:])):
            summary.append({
                "mode": mode,
                "part": part,
                "batches_served": chosen[-1]["batches_served"],
                **{
                    key: sum(row[key] for row in chosen) / len(chosen)
                    for key in ("producer_rss_mb", "shmem_mb", "segments")
                },
            })  # fmt: skip
    print_table(summary, list(summary[0]))
    print(f"wrote {args.out}")
    return rows


if __name__ == "__main__":
    main()
