"""Shared loading on one GPU, the TensorSocket paper's setting: N collocated training processes,
each training a torchvision model on JPEG crops made on the CPU.

Modes, each trial in its own process tree:

* ``own``: every training process has its own DataLoader with ``--workers`` processes;
* ``shared``: one `sharing.Producer` runs one DataLoader with ``N * --workers`` processes (the
  same CPU workers in all) and serves every batch to all N trainers as CUDA tensors through
  CUDA IPC (``device="cuda"``; on a CPU-only machine, through shared memory);
* ``in_memory`` (N = 1 only): one trainer fed one batch from device memory, the GPU's own
  ceiling, to show that the loaders above are the bottleneck (CPU-bound).

Images are JPEG files generated into a temporary ImageFolder (removed afterwards), decoded,
random-resized-cropped and flipped by the ``imagenet_resnet`` workload's augmentation; the
step is ``--arch`` (ResNet-18) at ``--image-size`` (224) under bf16 autocast. Trainers wait
for each other after their warm-up steps, then time ``--steps`` steps. Per-process steps/s,
their sum (aggregate), and the CPU cores busy over the timed window (every process of the
trial, read from /proc) are reported, with the aggregate relative to ``own`` at the same N
(``--consumers``, the trainers: the `sharing.Producer`'s consumers; the CSV's ``trainers``).
The exit status is 1 when any trial's trainers did not all finish their ``--steps`` (a trainer
that crashed or hung, CUDA IPC that failed): its row is still written, with
``trainers_finished`` below ``trainers``.

How each side overlaps moving batches with compute on ``--device cuda``:

* ``own``: the DataLoader pins each batch (its pin thread) and the trainer copies it with a
  non-blocking copy on its own stream, so the copy runs on the GPU in step order while the
  trainer's CPU goes on queueing the next steps (as far ahead as its loader's batches allow).
* ``shared``: the producer copies each batch to the GPU (a blocking copy from pinned memory,
  in its own process, so it overlaps the trainers' compute), and each trainer opens it
  through CUDA IPC, its stream waiting for the producer's copy event. When a trainer's
  previous batch is freed (as the next one arrives, before its step is queued), torch
  synchronises the trainer's stream (so that the producer cannot reuse memory still being
  read): a shared trainer never has a step queued ahead of the GPU.
* ``--own-sync``: own trainers synchronise their stream at the same point (as each batch
  arrives, before its step), so neither side queues a step ahead and the two differ only in
  how batches are made and moved. The CSV's ``own_sync`` says which was run.

    python -m benchmarks.gpu_sharing --device cuda --out benchmarks/results/gpu_sharing.csv
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import multiprocessing as mp
import os
import signal
import sys
import tempfile
import threading
import time
from typing import Any

import torch

from benchmarks.common import finish_trial, machine_note, print_table, write_csv
from benchmarks.jpeg_training import JpegCrops, TrainStep, jpeg_loader, write_jpeg_folder
from experiments.devices import describe
from experiments.pipeline import endless
from experiments.procstat import TreeCpu

__all__ = [
    "GOAL",
    "MODES",
    "CpuTimeline",
    "goal_line",
    "in_memory_trainer",
    "main",
    "own_trainer",
    "run_trial",
    "shared_producer",
    "shared_trainer",
    "trial",
    "unfinished",
    "with_ratios",
]

# Trainers and the producer are forked: this process never touches CUDA (not even to ask
# whether it is there), so each child initialises it afresh.
FORK = mp.get_context("fork")
MODES = ("own", "shared", "in_memory")
GOAL = (2, 1.9)  # N=2 sharing trainers: at least 1.9x the aggregate of 2 with own loaders


class CpuTimeline(threading.Thread):
    """CPU seconds of a process tree, sampled every ``interval_s`` with their times, so the
    cores busy between two moments can be read afterwards (`cores_busy`).

    Args:
        root (int): The tree's root process.
        interval_s (float): Seconds between samples. Default 0.05.
    """

    def __init__(self, root: int, interval_s: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.tree, self.interval_s = TreeCpu(root), interval_s
        self.points: list[tuple[float, float]] = []
        self._done = threading.Event()

    def _sample(self) -> None:
        self.tree.sample()
        self.points.append((time.monotonic(), self.tree.total))

    def run(self) -> None:
        """Sample until `stop`."""
        self._sample()  # a point before any window, and (in stop) one after every window
        while not self._done.wait(self.interval_s):
            self._sample()

    def stop(self) -> None:
        """Stop sampling, and take one last sample (after every window)."""
        self._done.set()
        self.join()
        self._sample()

    def cores_busy(self, start: float, end: float) -> float:
        """Mean CPU cores busy between monotonic times ``start`` and ``end``.

        Args:
            start (float): ``time.monotonic()`` at the window's start.
            end (float): ``time.monotonic()`` at its end.

        Returns:
            float: CPU seconds over wall seconds, between the samples around the window (NaN
            if there are none).
        """
        times = [t for t, _ in self.points]
        first = max(0, bisect.bisect_left(times, start) - 1)
        last = min(len(times) - 1, bisect.bisect_right(times, end))
        if last <= first:
            return float("nan")
        (t0, cpu0), (t1, cpu1) = self.points[first], self.points[last]
        return (cpu1 - cpu0) / (t1 - t0)


def _train(batches, args, barrier, report, name, sync: bool = False) -> None:
    """Warm up, wait for the other trainers, time ``args.steps`` steps; report the window.
    ``sync``: wait for the device's queued work as each batch arrives (``--own-sync``)."""
    torch.set_num_threads(1)
    step = TrainStep(args.arch, args.device)
    iterator = iter(batches)
    for batch in itertools.islice(iterator, args.warmup):
        if sync:
            step.finish()
        step(batch)
    step.finish()
    barrier.wait(timeout=args.trial_timeout)
    start = time.monotonic()
    done = 0
    for batch in itertools.islice(iterator, args.steps):
        if sync:
            step.finish()
        step(batch)
        done += 1
    step.finish()
    report.put((name, done, start, time.monotonic(), describe(step.device)))


def _dataset(args):
    return JpegCrops(args.root, args.image_size)


def own_trainer(args: argparse.Namespace, barrier: Any, report: Any, name: int) -> None:
    """A trainer process of mode ``own``: its own loader of ``args.workers`` processes (with
    ``args.own_sync``, waiting for its device as each batch arrives, as a shared trainer's
    freed batch makes torch do).

    Args:
        args (argparse.Namespace): The options (`main`'s).
        barrier (multiprocessing.Barrier): Where the trainers wait for each other.
        report (multiprocessing.Queue): Receives ``(name, steps, start, end, device)``.
        name (int): The trainer's index.
    """
    loader = jpeg_loader(
        _dataset(args), args.batch_size, args.workers, pin_memory=args.device == "cuda"
    )
    _train(endless(loader), args, barrier, report, name, sync=args.own_sync)


def in_memory_trainer(args: argparse.Namespace, barrier: Any, report: Any, name: int) -> None:
    """The trainer process of mode ``in_memory``: one batch, kept in device memory, every step.

    Args:
        args (argparse.Namespace): The options (`main`'s).
        barrier (multiprocessing.Barrier): Where the trainers wait for each other.
        report (multiprocessing.Queue): Receives ``(name, steps, start, end, device)``.
        name (int): The trainer's index.
    """
    images, labels = next(iter(jpeg_loader(_dataset(args), args.batch_size, 0)))
    batch = (images.to(args.device), labels.to(args.device))
    _train(itertools.repeat(batch), args, barrier, report, name)


def shared_producer(args: argparse.Namespace, endpoint: str, consumers: int) -> None:
    """The producer process of mode ``shared``: one loader of ``args.workers * consumers``
    processes, served (as CUDA tensors on ``--device cuda``) until the trial ends it with
    SIGTERM, like a long-running shared loader.

    Args:
        args (argparse.Namespace): The options (`main`'s).
        endpoint (str): Where it listens (``unix:@NAME``).
        consumers (int): The trainers it serves, waited for before the first batch.
    """
    from sharing import Producer

    torch.set_num_threads(1)
    cuda = args.device == "cuda"
    loader = jpeg_loader(_dataset(args), args.batch_size, args.workers * consumers, pin_memory=cuda)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    with Producer(
        loader, endpoint=endpoint, epochs=None, consumers=consumers, device="cuda" if cuda else None
    ) as producer:
        producer.serve()


def shared_trainer(
    args: argparse.Namespace, endpoint: str, barrier: Any, report: Any, name: int
) -> None:
    """A trainer process of mode ``shared``: a `sharing.Consumer` of `shared_producer`.

    Args:
        args (argparse.Namespace): The options (`main`'s).
        endpoint (str): The producer's.
        barrier (multiprocessing.Barrier): Where the trainers wait for each other.
        report (multiprocessing.Queue): Receives ``(name, steps, start, end, device)``.
        name (int): The trainer's index.
    """
    from sharing import Consumer

    with Consumer(endpoint, connect_timeout_s=60) as consumer:
        _train(endless(consumer), args, barrier, report, name)


def trial(mode: str, consumers: int, args: argparse.Namespace, report: Any) -> None:
    """One (mode, N) trial; runs in its own process, so its CPU is countable.

    Args:
        mode (str): One of `MODES`.
        consumers (int): N, the trainer processes.
        args (argparse.Namespace): The options (`main`'s).
        report (multiprocessing.Queue): Each trainer's ``(name, steps, start, end, device)``.
    """
    barrier = FORK.Barrier(consumers)
    helpers = []
    if mode == "shared":
        endpoint = f"unix:@gpu-sharing-{os.getpid()}"
        helpers.append(FORK.Process(target=shared_producer, args=(args, endpoint, consumers)))
        targets = [(shared_trainer, (args, endpoint, barrier, report, i)) for i in range(consumers)]
    else:
        trainer = own_trainer if mode == "own" else in_memory_trainer
        targets = [(trainer, (args, barrier, report, i)) for i in range(consumers)]
    processes = [FORK.Process(target=t, args=a) for t, a in targets]
    for process in helpers + processes:
        process.start()
    finish_trial(processes, helpers, args.trial_timeout)


def run_trial(mode: str, consumers: int, args: argparse.Namespace) -> dict:
    """Run `trial` in a forked process, sampling its tree's CPU (`CpuTimeline`).

    Args:
        mode (str): One of `MODES`.
        consumers (int): N, the trainer processes.
        args (argparse.Namespace): The options (`main`'s).

    Returns:
        dict: The trial's CSV row (steps/s per trainer and in all, cores busy, wall time).
    """
    report = FORK.Queue()
    started = time.perf_counter()
    process = FORK.Process(target=trial, args=(mode, consumers, args, report))
    process.start()
    timeline = CpuTimeline(process.pid)
    timeline.start()
    process.join()
    timeline.stop()
    results = []
    while len(results) < consumers:
        try:
            results.append(report.get(timeout=1))
        except Exception:
            break
    rates = [done / (end - start) for _, done, start, end, _ in results if done]
    window = (min(r[2] for r in results), max(r[3] for r in results)) if results else (0, 0)
    aggregate = sum(rates) if len(rates) == consumers else 0.0
    workers = args.workers * consumers if mode != "in_memory" else 0
    return {
        "mode": mode,
        "trainers": consumers,
        "workers_per_trainer": args.workers if mode == "own" else 0,
        "loader_workers": workers,
        "arch": args.arch,
        "batch_size": args.batch_size,
        "image_size": args.image_size,
        "steps": args.steps,
        "own_sync": args.own_sync,
        "trainers_finished": sum(r[1] == args.steps for r in results),
        "per_trainer_steps_per_s": sum(rates) / len(rates) if rates else 0.0,
        "slowest_trainer_steps_per_s": min(rates) if len(rates) == consumers else 0.0,
        "aggregate_steps_per_s": aggregate,
        "aggregate_images_per_s": aggregate * args.batch_size,
        "cores_busy": timeline.cores_busy(*window) if results else float("nan"),
        "wall_s": time.perf_counter() - started,
        "device": results[0][4] if results else args.device,
        "machine": machine_note(),
    }


def with_ratios(rows: list[dict]) -> None:
    """Set each row's ``aggregate_vs_own``: its aggregate over ``own``'s at the same N.

    Args:
        rows (list[dict]): `run_trial`'s rows so far, changed in place.
    """
    own = {r["trainers"]: r["aggregate_steps_per_s"] for r in rows if r["mode"] == "own"}
    for row in rows:
        base = own.get(row["trainers"])
        row["aggregate_vs_own"] = row["aggregate_steps_per_s"] / base if base else float("nan")


def goal_line(rows: list[dict]) -> str:
    """Whether N=2 sharing trainers reached the goal over N=2 with own loaders, in words.

    Args:
        rows (list[dict]): `run_trial`'s rows.

    Returns:
        str: ``goal (N=2 shared >= 1.9x own): met, measured ...x`` (or ``NOT met``, or ``not
        measured``).
    """
    trainers, factor = GOAL
    found = {r["mode"]: r for r in rows if r["trainers"] == trainers}
    if "own" not in found or "shared" not in found or not found["own"]["aggregate_steps_per_s"]:
        return f"goal (N={trainers} shared >= {factor}x own): not measured"
    ratio = found["shared"]["aggregate_steps_per_s"] / found["own"]["aggregate_steps_per_s"]
    verdict = "met" if ratio >= factor else "NOT met"
    return f"goal (N={trainers} shared >= {factor}x own): {verdict}, measured {ratio:.2f}x"


def unfinished(rows: list[dict]) -> list[str]:
    """The trials whose trainers did not all finish their steps, in words.

    Args:
        rows (list[dict]): `run_trial`'s rows.

    Returns:
        list[str]: One ``shared N=2: 1 of 2 trainers finished`` per such trial, in order.
    """
    return [
        f"{r['mode']} N={r['trainers']}: {r['trainers_finished']} of {r['trainers']} trainers "
        "finished"
        for r in rows
        if r["trainers_finished"] != r["trainers"]
    ]


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.gpu_sharing --out CSV [options]``: every (N, mode) trial, the CSV
    written after each; ``--help`` lists the options and their defaults.

    Args:
        argv (list[str] | None): The arguments. Default: the command line's.

    Returns:
        int: The exit status: 0 when every trial's trainers all finished their steps, 1 when
        any did not (`unfinished`, printed), so a failed trial cannot pass for a measurement.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="CSV file to write")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="(%(default)s)")
    parser.add_argument(
        "--consumers", "--trainers", type=int, nargs="+", default=[1, 2, 4],
        help="N, the trainers (each a consumer of the shared modes' producer) (%(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--modes", nargs="+", default=list(MODES), choices=list(MODES), help="(%(default)s)"
    )
    options = [
        ("--workers", int, 2, "loader workers per trainer"),
        ("--arch", str, "resnet18", "torchvision model"),
        ("--batch-size", int, 128, "images per batch"),
        ("--image-size", int, 224, "crop side"),
        ("--images", int, 1024, "JPEG files generated"),
        ("--warmup", int, 6, "untimed steps first"),
        ("--steps", int, 24, "timed steps per trainer"),
        ("--trial-timeout", float, 150.0, "seconds"),
    ]
    for option, kind, default, help in options:
        parser.add_argument(option, type=kind, default=default, help=f"{help} (%(default)s)")
    parser.add_argument(
        "--own-sync", action="store_true",
        help="own trainers wait for their device as each batch arrives, as shared ones do",
    )  # fmt: skip
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="gpu-sharing-") as root:
        args.root = write_jpeg_folder(root, args.images)
        for consumers in args.consumers:
            for mode in args.modes:
                if mode == "in_memory" and consumers != 1:
                    continue
                row = run_trial(mode, consumers, args)
                rows.append(row)
                with_ratios(rows)
                write_csv(rows, args.out)  # after each trial: a run cut short keeps its rows
                print(
                    f"{mode:<9} N={consumers} {row['per_trainer_steps_per_s']:7.2f} steps/s per "
                    f"trainer, aggregate {row['aggregate_images_per_s']:8.1f} images/s, "
                    f"{row['cores_busy']:.1f} cores busy, "
                    f"{row['trainers_finished']}/{consumers} finished",
                    flush=True,
                )
    print()
    print_table(
        rows,
        [
            "mode",
            "trainers",
            "loader_workers",
            "per_trainer_steps_per_s",
            "aggregate_images_per_s",
            "aggregate_vs_own",
            "cores_busy",
            "trainers_finished",
        ],
    )
    print(goal_line(rows))
    print(f"wrote {args.out}")
    failed = unfinished(rows)
    for line in failed:
        print(f"gpu_sharing: FAILED: {line} within --trial-timeout {args.trial_timeout:g} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
