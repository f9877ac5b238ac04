"""Per-consumer throughput and total CPU of shared vs independent data loading.

N training processes ("consumers") each need the same batches. Modes, run side by side:

* ``own``: every consumer runs its own DataLoader (``--workers`` worker processes each);
* ``shared``: one `sharing.Producer` runs one DataLoader (``--workers`` workers) and serves
  every consumer through shared memory;
* ``shared_pool``: one `sharing.Producer.from_dataset` reads the dataset itself, its
  ``--workers`` workers collating each batch straight into recycled shared-memory segments
  that consumers keep mapped;
* ``shared_recut``: as ``shared``, but each consumer asks for batches of ``--recut-batch`` (48)
  examples, which do not divide the producer's 64: batches inside one producer batch are
  views, those that span two are copied (here half of them). Its rate is counted in
  64-example batches, so it compares with ``shared``;
* ``tensorsocket``: ``tensorsocket==0.0.5`` in the same role, bound to 127.0.0.1 (only when
  ``--tensorsocket-path`` points at a folder where it is installed, see
  ``benchmarks/install_tensorsocket.sh``);
* ``tfdata_service``: a tf.data service dispatcher and worker in one process, consumers
  reading one shared job through its cross-trainer cache over localhost (``images`` only:
  a tf.data service worker cannot run the Python preprocessing of ``cpu``). The trial counts
  TensorFlow's start-up in wall and CPU time, not in the per-consumer rate.

Workloads: ``images``: 64x3x224x224 uint8 batches from a cheap in-memory source (the cost is
moving 9.6 MB per batch); ``cpu``: 64x3x32x32 float32 batches with about 2 ms of CPU work per
sample (the cost is preparing data). Each consumer reads ``--batches`` batches (tensorsocket:
``--ts-batches``, it is slow) and reads one value per 4 KiB page of each, so every page is
mapped in (``--no-touch``: it reads nothing, so a trial measures delivery alone); the step
does no training, so the numbers are loader throughput. CPU seconds are those of every
process of a trial (consumers, producer, all loader workers), sampled from /proc, and also
split by role, in ms per batch received: the consumers' processes, their own loaders'
workers (``own``), the producer's process (a server's, for tf.data service) and its loader's
workers. With ``--repeats K`` every trial runs K times, interleaved (repeat i of every
mode before repeat i+1 of any); a row holds the repeats' medians and, per repeat, the
aggregate throughput and the CPU per batch (``*_by_repeat``), which the claims on sharing pair
repeat by repeat.

``lent_share`` is the share of the ``shared`` and ``shared_recut`` producer's batches that
its DataLoader's workers collated straight into the producer's recycled segments
(`sharing.lending`); ``copy_ms_per_batch`` is what the rest cost: the producer's copy of
each batch into its segments, to keep nothing in /dev/shm, in ms per batch copied (part of
``cpu_ms_producer``). ``--shm-mb 0 64`` runs every trial twice, the second
time inside a private 64 MB /dev/shm (as a container started without ``--shm-size``; needs
root); each row names its ``shm_mb`` and compares with own loaders under the same limit.

    python -m benchmarks.sharing --out benchmarks/results/shared_loading.csv
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import math
import multiprocessing as mp
import os
import re
import signal
import statistics
import sys
import time
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset

from benchmarks.common import (
    add_schema_options,
    check_schema_options,
    finish_trial,
    join_repeats,
    machine_note,
    print_table,
    schema_section,
    write_csv,
)
from experiments.procstat import TreeCpu, group_members

__all__ = [
    "BATCH",
    "BY_REPEAT",
    "FORK",
    "ROLES",
    "CpuBound",
    "Images",
    "calibrate_work",
    "consumer_batches",
    "cpu_by_role",
    "enter_shm",
    "main",
    "make_dataset",
    "make_loader",
    "merge_repeats",
    "own_consumer",
    "pool_producer",
    "run",
    "run_trial",
    "shared_consumer",
    "shared_producer",
    "tfds_batches",
    "tfds_consumer",
    "tfds_server",
    "tfds_start",
    "touch_pages",
    "trial",
    "ts_consumer",
    "ts_producer",
]

FORK = mp.get_context("fork")
ROLES = ("consumers", "consumer_loaders", "producer", "producer_loaders")
# Consumers read one value per page (run() sets it, trials are forked; the schema's default for
# the other benchmarks that read batches with shared_consumer).
TOUCH = schema_section("sharing")["properties"]["touch"]["default"]
BATCH = 64


class Images(Dataset):
    """A cheap source of 3x224x224 uint8 images (already decoded, in memory): ``(image,
    index)`` pairs, every image the same tensor.

    Args:
        n (int): Examples.
    """

    def __init__(self, n: int) -> None:
        self.n = n
        self.image = torch.randint(0, 255, (3, 224, 224), dtype=torch.uint8)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        return self.image, index


class CpuBound(Dataset):
    """3x32x32 float32 samples that each take a fixed amount of CPU work (~2 ms):
    ``(image, index)`` pairs.

    Args:
        n (int): Examples.
        work (int): Loop iterations per example (`calibrate_work`).
    """

    def __init__(self, n: int, work: int) -> None:
        self.n, self.work = n, work
        self.image = torch.zeros(3, 32, 32)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        total = 0
        for i in range(self.work):
            total += i * i
        return self.image + (total % 7), index


def calibrate_work(target_s: float = 0.002) -> int:
    """Loop iterations of `CpuBound` that take ``target_s`` of CPU on this machine.

    Args:
        target_s (float): CPU seconds per example. Default 0.002.

    Returns:
        int: Iterations (at least 1).
    """
    probe = CpuBound(1, 100_000)
    start = time.process_time()
    probe[0]
    return max(1, round(100_000 * target_s / (time.process_time() - start)))


def make_dataset(workload: str, batches: int, work: int) -> Dataset:
    """The dataset of ``workload``.

    Args:
        workload (str): ``images`` (`Images`) or ``cpu`` (`CpuBound`).
        batches (int): Its length in `BATCH`-example batches.
        work (int): `CpuBound`'s iterations per example (`calibrate_work`).

    Returns:
        Dataset: ``BATCH * batches`` examples.
    """
    n = BATCH * batches
    return Images(n) if workload == "images" else CpuBound(n, work)


def make_loader(dataset: Dataset, workers: int) -> DataLoader:
    """The benchmark's DataLoader over ``dataset``: `BATCH`-example batches, in order.

    Args:
        dataset (Dataset): `make_dataset`'s.
        workers (int): Worker processes (0: in the calling process).

    Returns:
        DataLoader: The loader.
    """
    return DataLoader(dataset, batch_size=BATCH, num_workers=workers, shuffle=False)


def touch_pages(batch: Any) -> None:
    """Read one value per 4 KiB page of ``batch``'s images (its first tensor), so that every
    page is mapped in."""
    images = batch[0] if isinstance(batch, (tuple, list)) else batch
    images.reshape(-1)[::4096].sum().item()


def _measure(batches, count: int, report, name: str, per_batch: float = 1.0) -> None:
    """Consume ``count`` batches, touching each (unless not `TOUCH`); report (name, received,
    seconds, ``per_batch``: how many ``BATCH``-example batches one of these counts as, pid)."""
    first = last = None
    received = 0
    for batch in batches:
        if TOUCH:
            touch_pages(batch)
        last = time.perf_counter()
        first = first or last
        received += 1
        if received == count:
            break
    seconds = (last - first) if received > 1 else float("nan")
    report.put((name, received, seconds, per_batch, os.getpid()))


# ---------------------------------------------------------------- one process per role


def own_consumer(dataset: Dataset, workers: int, count: int, report: Any, name: int) -> None:
    """A consumer process (mode ``own``): its own loader, ``count`` batches measured.

    Args:
        dataset (Dataset): `make_dataset`'s.
        workers (int): Its loader's worker processes.
        count (int): Batches to read.
        report (multiprocessing.Queue): Receives ``(name, received, seconds, per_batch, pid)``.
        name (int): The consumer's index.
    """
    _measure(make_loader(dataset, workers), count, report, name)


def shared_producer(
    dataset: Dataset, workers: int, endpoint: str, consumers: int, costs: Any
) -> None:
    """The producer process of modes ``shared`` and ``shared_recut``: a `sharing.Producer` of
    one loader, serving until the trial ends it with SIGTERM, like a long-running shared loader.

    Args:
        dataset (Dataset): `make_dataset`'s.
        workers (int): The loader's worker processes.
        endpoint (str): Where it listens (``unix:@NAME``).
        consumers (int): Consumers it waits for before the first batch.
        costs (multiprocessing.Queue): Receives, once serving ends, the seconds the producer
            spent copying the loader's batches into its segments, the batches copied and
            the batches its workers collated into them (lent).
    """
    from sharing import Producer

    with Producer(
        make_loader(dataset, workers), endpoint=endpoint, epochs=None, consumers=consumers
    ) as producer:
        producer.serve()
        metrics = producer.metrics()
        costs.put((metrics["copy_s"], metrics["batches_copied"], metrics["batches_lent"]))


def enter_shm(megabytes: int) -> None:
    """Give this process (and every process it starts from now on) a private /dev/shm of
    ``megabytes`` MB, as a container started without ``--shm-size`` has (64 MB): a new mount
    namespace, its mounts private, a tmpfs of that size on /dev/shm.

    Args:
        megabytes (int): The size; 0 leaves the machine's /dev/shm.

    Raises:
        PermissionError: The process may not make a mount namespace (it needs root).
    """
    if not megabytes:
        return
    import ctypes
    import subprocess

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(0x00020000):  # CLONE_NEWNS
        raise PermissionError(
            ctypes.get_errno(), f"shm_mb={megabytes} needs root (a private mount namespace)"
        )
    subprocess.run(["mount", "--make-rprivate", "/"], check=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs", "/dev/shm"], check=True
    )


def pool_producer(dataset: Dataset, workers: int, endpoint: str, consumers: int) -> None:
    """The producer process of mode ``shared_pool``: `sharing.Producer.from_dataset`, its
    workers collating into recycled shared-memory segments; serves until SIGTERM.

    Args:
        dataset (Dataset): `make_dataset`'s.
        workers (int): Its worker processes.
        endpoint (str): Where it listens (``unix:@NAME``).
        consumers (int): Consumers it waits for before the first batch.
    """
    from sharing import Producer

    producer = Producer.from_dataset(
        dataset, batch_size=BATCH, num_workers=workers, endpoint=endpoint, epochs=None,
        consumers=consumers,
    )  # fmt: skip
    with producer:
        producer.serve()


def shared_consumer(
    endpoint: str, count: int, report: Any, name: int, batch_size: int | None = None
) -> None:
    """A consumer process of the shared modes: a `sharing.Consumer`, ``count`` batches measured.

    Args:
        endpoint (str): The producer's.
        count (int): Batches to read.
        report (multiprocessing.Queue): Receives ``(name, received, seconds, per_batch, pid)``.
        name (int): The consumer's index.
        batch_size (int | None): Examples per batch it asks for (``shared_recut``). Default
            None: the producer's.
    """
    from sharing import Consumer

    with Consumer(endpoint, batch_size=batch_size, connect_timeout_s=30) as consumer:
        _measure(consumer, count, report, name, (batch_size or BATCH) / BATCH)


def ts_producer(path: str, dataset: Dataset, workers: int, ports: tuple[int, ...]) -> None:
    """The producer process of mode ``tensorsocket``: a ``TensorProducer`` bound to
    127.0.0.1, serving epoch after epoch until killed.

    Args:
        path (str): Folder where tensorsocket is installed.
        dataset (Dataset): `make_dataset`'s.
        workers (int): Its loader's worker processes.
        ports (tuple[int, ...]): Data, ack and two heartbeat ports.
    """
    sys.path.insert(0, path)
    import tensorsocket.producer as tsp

    tsp.LOCALHOST = "tcp://127.0.0.1"  # its default binds every interface
    producer = tsp.TensorProducer(
        make_loader(dataset, workers), port=ports[0], ack_port=ports[1],
        heart_ports=(ports[2], ports[3]),
    )  # fmt: skip
    while True:
        for _ in producer:
            pass


def ts_consumer(path: str, ports: tuple[int, ...], count: int, report: Any, name: int) -> None:
    """A consumer process of mode ``tensorsocket``: a ``TensorConsumer``, ``count`` batches
    measured; it exits at once after reporting (its background threads never end).

    Args:
        path (str): Folder where tensorsocket is installed.
        ports (tuple[int, ...]): `ts_producer`'s.
        count (int): Batches to read.
        report (multiprocessing.Queue): Receives ``(name, received, seconds, per_batch, pid)``.
        name (int): The consumer's index.
    """
    sys.path.insert(0, path)
    import tensorsocket.consumer as tsc

    tsc.LOCALHOST = "tcp://127.0.0.1"
    consumer = tsc.TensorConsumer(
        port=ports[0], ack_port=ports[1], heart_ports=(ports[2], ports[3]), batch_size=BATCH
    )

    def batches():
        while True:
            yield from consumer

    _measure(batches(), count, report, name)
    report.close()
    report.join_thread()  # flush the report before leaving
    os._exit(0)  # its background threads never end


def tfds_server(target_queue: Any) -> None:
    """A tf.data service dispatcher and one worker in this process, until killed.

    Args:
        target_queue (multiprocessing.Queue): Receives the dispatcher's address.
    """
    _, worker, target = tfds_start()
    target_queue.put(target)
    worker.join()


def tfds_start() -> tuple[Any, Any, str]:
    """A tf.data service dispatcher and one worker in this process.

    Returns:
        tuple: The dispatcher, the worker (both serve while referenced) and the dispatcher's
        address for trainers.
    """
    import tensorflow as tf

    service = tf.data.experimental.service
    dispatcher = service.DispatchServer(service.DispatcherConfig(port=0))
    address = dispatcher.target.split("://")[1]
    worker = service.WorkerServer(
        service.WorkerConfig(dispatcher_address=address, worker_address="localhost:%port%")
    )
    return dispatcher, worker, dispatcher.target.replace("[::]", "localhost")


def tfds_batches(target: str, name: int) -> Iterator[torch.Tensor]:
    """The image batches of the shared job at ``target``, read through its cross-trainer
    cache as trainer ``name`` (each trainer sees all data), as tensors."""
    import tensorflow as tf

    service = tf.data.experimental.service
    images = tf.data.Dataset.from_tensors(tf.zeros([3, 224, 224], tf.uint8)).repeat().batch(BATCH)
    shared = images.apply(
        service.distribute(
            processing_mode=service.ShardingPolicy.OFF,
            service=target,
            job_name="shared",
            cross_trainer_cache=service.CrossTrainerCache(trainer_id=str(name)),
        )
    )
    warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
    return (torch.from_numpy(b) for b in shared.as_numpy_iterator())


def tfds_consumer(target: str, count: int, report: Any, name: int) -> None:
    """A consumer process of mode ``tfdata_service``: reads the shared job through the
    cross-trainer cache (each trainer sees all data), ``count`` batches measured.

    Args:
        target (str): The dispatcher's address (`tfds_server`).
        count (int): Batches to read.
        report (multiprocessing.Queue): Receives ``(name, received, seconds, per_batch, pid)``.
        name (int): The consumer's index (its trainer id).
    """
    _measure(tfds_batches(target, name), count, report, name)


# ---------------------------------------------------------------- trials


def consumer_batches(mode: str, args: argparse.Namespace) -> int:
    """Batches each consumer reads in ``mode`` (the same examples in every shared mode).

    Args:
        mode (str): The trial's mode.
        args (argparse.Namespace): The options (`run`'s): ``batches``, ``ts_batches``,
            ``recut_batch``.

    Returns:
        int: The batches.
    """
    if mode == "tensorsocket":
        return args.ts_batches
    if mode == "shared_recut":
        return args.batches * BATCH // args.recut_batch
    return args.batches


def trial(
    mode: str, workload: str, consumers: int, args: argparse.Namespace, work: int, report: Any,
    shm_mb: int, costs: Any,
) -> None:  # fmt: skip
    """Run one (mode, workload, N) trial; runs in its own process so its CPU is countable.

    Args:
        mode (str): One of the schema's ``sharing.modes``.
        workload (str): ``images`` or ``cpu``.
        consumers (int): N, the consumer processes.
        args (argparse.Namespace): The options (`run`'s).
        work (int): `CpuBound`'s iterations per example.
        report (multiprocessing.Queue): Each consumer's ``(name, received, seconds,
            per_batch, pid)``.
        shm_mb (int): Run in a private /dev/shm of this many MB (`enter_shm`); 0: the
            machine's.
        costs (multiprocessing.Queue): `shared_producer`'s copy time and count.
    """
    enter_shm(shm_mb)
    count = consumer_batches(mode, args)
    source_batches = args.ts_batches if mode == "tensorsocket" else args.batches
    dataset = make_dataset(workload, source_batches + 8, work)
    helpers: list[mp.Process] = []
    if mode == "own":
        targets = [
            (own_consumer, (dataset, args.workers, count, report, i)) for i in range(consumers)
        ]
    elif mode in ("shared", "shared_pool", "shared_recut"):
        endpoint = f"unix:@bench-{os.getpid()}"
        serving = (dataset, args.workers, endpoint, consumers)
        if mode == "shared_pool":
            helpers.append(FORK.Process(target=pool_producer, args=serving))
        else:
            helpers.append(FORK.Process(target=shared_producer, args=(*serving, costs)))
        size = args.recut_batch if mode == "shared_recut" else None
        targets = [
            (shared_consumer, (endpoint, consumer_batches(mode, args), report, i, size))
            for i in range(consumers)
        ]
    elif mode == "tfdata_service":
        targets_queue = FORK.Queue()
        helpers.append(FORK.Process(target=tfds_server, args=(targets_queue,)))
        helpers[0].start()
        target = targets_queue.get(timeout=60)
        targets = [(tfds_consumer, (target, count, report, i)) for i in range(consumers)]
    else:
        base = 20000 + (os.getpid() % 1000) * 4
        ports = (base, base + 1, base + 2, base + 3)
        helpers.append(
            FORK.Process(
                target=ts_producer, args=(args.tensorsocket_path, dataset, args.workers, ports)
            )
        )
        targets = [
            (ts_consumer, (args.tensorsocket_path, ports, count, report, i))
            for i in range(consumers)
        ]
    for helper in helpers:
        if helper.pid is None:
            helper.start()
    processes = [FORK.Process(target=t, args=a) for t, a in targets]
    for process in processes:
        process.start()
    finish_trial(processes, helpers, args.trial_timeout)


def _remove_leftover_semaphores(before: set[str]) -> None:
    """Remove POSIX semaphore files that appeared in /dev/shm during a trial.

    A process killed inside glibc's ``sem_open`` (a multiprocessing queue being made, say, in
    a tensorsocket process the trial had to kill) leaves its file behind.
    """
    for name in sorted(set(os.listdir("/dev/shm")) - before):
        # multiprocessing's (unlinked at once when all goes well) and glibc's temporary names
        if re.fullmatch(r"sem\.(mp-\w+|\w{6})", name):
            print(f"removing /dev/shm/{name}, left by a killed process", flush=True)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"/dev/shm/{name}")


def _trial_in_own_group(*args: Any) -> None:
    """`trial` as the leader of a new process group, which every process it starts joins,
    however they are later re-parented (`experiments.procstat.group_members`)."""
    os.setpgid(0, 0)
    trial(*args)


def _kill_leftovers(sampled: list[int], group: int) -> None:
    """Kill processes of a finished trial that outlived it (a killed tensorsocket producer's
    loader workers can wait forever on a queue nobody feeds): those still in the trial's
    process group ``group``, which includes any whose parent died before the tree's sampler
    saw them, and those of its sampled tree (``sampled``) that still run this benchmark."""
    leftovers = set(group_members(group))
    for pid in set(sampled) - leftovers:
        with contextlib.suppress(OSError), open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            if b"benchmarks" in cmdline.read():  # not a pid reused since it was sampled
                leftovers.add(pid)
    for pid in sorted(leftovers - {os.getpid()}):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
            print(f"killed process {pid}, left running by the trial", flush=True)


def cpu_by_role(tree: TreeCpu, consumer_pids: set[int]) -> dict[str, float]:
    """CPU seconds of a trial's processes by `ROLES`: a child of the trial process is a
    consumer (it reported a result) or the producer (any other); their descendants are their
    loaders. The trial's own coordinating process counts in the total only.

    Args:
        tree (TreeCpu): The trial process's tree, sampled to its end.
        consumer_pids (set[int]): The consumers' processes.

    Returns:
        dict[str, float]: Role -> CPU seconds.
    """
    seconds = dict.fromkeys(ROLES, 0.0)
    for pid, cpu in tree.cpu.items():
        top = tree.top_ancestor(pid)
        if top == tree.root:
            continue
        if top in consumer_pids:
            role = "consumers" if pid == top else "consumer_loaders"
        else:
            role = "producer" if pid == top else "producer_loaders"
        seconds[role] += cpu
    return seconds


def run_trial(
    mode: str, workload: str, consumers: int, args: argparse.Namespace, work: int,
    shm_mb: int = 0,
) -> dict:  # fmt: skip
    """Run `trial` in a forked process, counting its tree's CPU, and clean up after it.

    Args:
        mode (str): One of the schema's ``sharing.modes``.
        workload (str): ``images`` or ``cpu``.
        consumers (int): N, the consumer processes.
        args (argparse.Namespace): The options (`run`'s).
        work (int): `CpuBound`'s iterations per example.
        shm_mb (int): Run in a private /dev/shm of this many MB (`enter_shm`). Default 0:
            the machine's.

    Returns:
        dict: The trial's CSV row (rates per consumer, CPU in all and by role, the
        producer's copy of each batch into its segments (``shared``, ``shared_recut``) in
        ms per batch, wall time).
    """
    report, costs = FORK.Queue(), FORK.Queue()
    shm_before = set(os.listdir("/dev/shm"))
    start = time.perf_counter()
    process = FORK.Process(
        target=_trial_in_own_group,
        args=(mode, workload, consumers, args, work, report, shm_mb, costs),
    )
    process.start()
    with TreeCpu(process.pid) as tree:
        process.join()
    wall = time.perf_counter() - start
    cpu = tree.total
    _kill_leftovers(sorted(tree.cpu), group=process.pid)
    _remove_leftover_semaphores(shm_before)
    count = consumer_batches(mode, args)
    results = []
    while not report.empty() or len(results) < consumers:
        try:
            results.append(report.get(timeout=1))
        except Exception:
            break
    rates = [per * (got - 1) / seconds for _, got, seconds, per, _ in results if got > 1]
    received = sum(per * got for _, got, _, per, _ in results)
    roles = cpu_by_role(tree, {pid for *_, pid in results})
    copy_s, copied, lent = costs.get(timeout=5) if not costs.empty() else (math.nan, 0, 0)
    return {
        "workload": workload,
        "mode": mode,
        "consumers": consumers,
        "shm_mb": shm_mb,
        "workers": args.workers,
        "batches_per_consumer": count,
        "consumers_finished": sum(got == count for _, got, *_ in results),
        "per_consumer_batches_per_s": sum(rates) / len(rates) if rates else 0.0,
        "slowest_consumer_batches_per_s": min(rates) if len(rates) == consumers else 0.0,
        "aggregate_batches_per_s": sum(rates),
        "cpu_s": cpu,
        "cpu_ms_per_batch_received": 1000 * cpu / received if received else float("nan"),
        **{
            f"cpu_ms_{role}": 1000 * seconds / received if received else float("nan")
            for role, seconds in roles.items()
        },
        "copy_ms_per_batch": 1000 * copy_s / copied if copied else math.nan,
        "lent_share": lent / (lent + copied) if lent + copied else math.nan,
        "touch": TOUCH,
        "wall_s": wall,
        "machine": machine_note(),
    }


BY_REPEAT = ("aggregate_batches_per_s", "cpu_ms_per_batch_received")
"""The columns a row also holds per repeat (``<column>_by_repeat``,
`benchmarks.common.join_repeats`): what the claims on sharing compare."""


def merge_repeats(repeats: list[dict]) -> dict:
    """One trial's repeats (`run_trial` rows, in the order they ran) as one row: the median of
    each measured number, the fewest consumers that finished, the number of repeats, and
    each repeat's value of the `BY_REPEAT` columns.

    Args:
        repeats (list[dict]): At least one row of the same (workload, N, mode).

    Returns:
        dict: The row.
    """
    row = dict(repeats[0])
    for key, value in row.items():
        if isinstance(value, float):
            finite = [r[key] for r in repeats if math.isfinite(r[key])]
            row[key] = statistics.median(finite) if finite else math.nan
    row["consumers_finished"] = min(r["consumers_finished"] for r in repeats)
    row["repeats"] = len(repeats)
    for key in BY_REPEAT:
        row[f"{key}_by_repeat"] = join_repeats([r[key] for r in repeats])
    return row


def run(
    out: str | Path, options: Mapping[str, Any], tensorsocket_path: str | None = None
) -> list[dict]:
    """Run every (workload, N, mode) trial of ``options``, write the CSV and print a table.

    Args:
        out (str | Path): CSV file to write.
        options (Mapping[str, Any]): Options of the workflow config's ``sharing`` section
            (``consumers``, ``workloads``, ``modes``, ``batches``, ...; see
            ``workflow/schemas/config.schema.yaml``); one left out takes the schema's default.
        tensorsocket_path (str | None): Folder where tensorsocket is installed
            (``benchmarks/install_tensorsocket.sh``). Default None: mode ``tensorsocket`` is
            skipped.

    Returns:
        list[dict]: One row per trial, as written.

    Raises:
        ValueError: An option is not valid (the message names it).
    """
    global TOUCH
    args = argparse.Namespace(
        **check_schema_options("sharing", options), tensorsocket_path=tensorsocket_path
    )
    TOUCH = args.touch
    modes = list(args.modes)
    if "tensorsocket" in modes and not args.tensorsocket_path:
        print(
            "skipping tensorsocket: pass --tensorsocket-path (benchmarks/install_tensorsocket.sh)"
        )
        modes.remove("tensorsocket")
    shm_sizes = list(args.shm_mb)
    if any(shm_sizes) and os.geteuid() != 0:
        print("skipping shm_mb other than 0: a private /dev/shm needs root")
        shm_sizes = [size for size in shm_sizes if not size]
    torch.set_num_threads(1)
    work = calibrate_work()
    trials: dict[tuple, list[dict]] = {}
    for repeat in range(args.repeats):  # interleaved: drift hits every mode's repeat alike
        for workload in args.workloads:
            for consumers, shm_mb, mode in itertools.product(args.consumers, shm_sizes, modes):
                if mode == "tfdata_service" and workload != "images":
                    continue  # its workers cannot run the Python preprocessing of "cpu"
                row = run_trial(mode, workload, consumers, args, work, shm_mb)
                trials.setdefault((workload, consumers, shm_mb, mode), []).append(row)
                print(
                    f"{workload:<7} {mode:<13} N={consumers} shm_mb={shm_mb} repeat {repeat + 1}/"
                    f"{args.repeats} {row['per_consumer_batches_per_s']:8.1f} batches/s "
                    f"per consumer, {row['consumers_finished']}/{consumers} finished, "
                    f"cpu {row['cpu_s']:.1f} s",
                    flush=True,
                )
    rows = [merge_repeats(repeats) for repeats in trials.values()]
    # compared with own loaders under the same /dev/shm
    own = {(r["workload"], r["consumers"], r["shm_mb"]): r for r in rows if r["mode"] == "own"}
    for row in rows:
        base = own.get((row["workload"], row["consumers"], row["shm_mb"]))
        for key in ("per_consumer_batches_per_s", "aggregate_batches_per_s"):
            value = row[key] / base[key] if base and base[key] else float("nan")
            row[f"{key.removesuffix('_batches_per_s')}_vs_own"] = value
    write_csv(rows, out)
    print()
    print_table(
        rows,
        [
            "workload",
            "mode",
            "consumers",
            "shm_mb",
            "per_consumer_batches_per_s",
            "per_consumer_vs_own",
            "aggregate_vs_own",
            "cpu_s",
            "cpu_ms_per_batch_received",
            *(f"cpu_ms_{role}" for role in ROLES),
            "copy_ms_per_batch",
            "lent_share",
            "consumers_finished",
        ],
    )
    print(f"wrote {out}")
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    """``python -m benchmarks.sharing --out CSV [options]``: `run` from the command line. Its
    options are those of the workflow config's ``sharing`` section, their defaults the
    schema's (``--help`` lists them), plus ``--tensorsocket-path``.

    Args:
        argv (list[str] | None): The arguments. Default: the command line's.

    Returns:
        list[dict]: `run`'s rows.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="CSV file to write")
    add_schema_options(parser, "sharing")
    parser.add_argument("--tensorsocket-path", help="folder where tensorsocket is installed")
    options = vars(parser.parse_args(argv))
    out, path = options.pop("out"), options.pop("tensorsocket_path")
    try:
        return run(out, options, path)
    except ValueError as error:
        parser.error(str(error))


if __name__ == "__main__":
    main()
