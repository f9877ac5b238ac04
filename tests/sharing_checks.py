"""Helpers shared by the `sharing` tests (and the echo tests of a failing DataLoader):
id-carrying batches, consumer process bodies, a failing DataLoader and a leak check."""

from __future__ import annotations

import contextlib
import functools
import multiprocessing as mp
import os
import shutil
import subprocess
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator

import torch

FORK = mp.get_context("fork")


def id_batches(n_samples: int, batch_size: int, delay_s: float = 0.0, first_delay_s: float = 0.0):
    """Batches of (sample ids, features); the last one is the short tail. ``first_delay_s``
    delays the first batch of each epoch (a cold start)."""

    class Source:
        def __len__(self):
            return -(-n_samples // batch_size)

        def __iter__(self):
            for start in range(0, n_samples, batch_size):
                if delay_s or (first_delay_s and start == 0):
                    time.sleep(first_delay_s if start == 0 and first_delay_s else delay_s)
                ids = torch.arange(start, min(start + batch_size, n_samples))
                yield {"id": ids, "x": ids.float()[:, None].repeat(1, 3)}

    return Source()


class Signalling:
    """A source that sets ``served`` when it yields batch ``after`` (a point the producer has
    certainly passed, however loaded the machine, when a joiner waits for it)."""

    def __init__(self, source, served, after):
        self.source, self.served, self.after = source, served, after

    def __len__(self):
        return len(self.source)

    def __iter__(self):
        for index, batch in enumerate(self.source):
            if index == self.after:
                self.served.set()
            yield batch


def consume(endpoint, results, epochs=1, batch_size=None, name=None, per_batch_s=0.0, **kw):
    """Consumer process body: report (name, mode, [[ids of epoch]...], gaps between batches)."""
    from sharing import Consumer

    consumer = Consumer(endpoint, batch_size=batch_size, **kw)
    epochs_ids, gaps, last = [], [], None
    for _ in range(epochs):
        ids = []
        for batch in consumer:
            now = time.monotonic()
            if last is not None:
                gaps.append(now - last)
            last = now
            assert torch.equal(batch["x"][:, 0].long(), batch["id"])  # data matches ids
            ids.extend(batch["id"].tolist())
            time.sleep(per_batch_s)
        epochs_ids.append(ids)
    results.put((name, consumer.mode, epochs_ids, gaps))
    consumer.leave()


def start(target, *args, daemon=True, **kwargs) -> mp.Process:
    process = FORK.Process(target=target, args=args, kwargs=kwargs, daemon=daemon)
    process.start()
    return process


def collect(results, count, timeout=30):
    return sorted((results.get(timeout=timeout) for _ in range(count)), key=lambda r: str(r[0]))


def left_entries() -> set[str]:
    """Entries of /dev/shm but POSIX semaphores (the shared loader makes none; other
    processes on the machine, e.g. spawned multiprocessing pools, keep theirs there), and
    multiprocessing's ``pymp-*`` folders in the temp folder (a process that sends file
    descriptors, as a DataLoader's worker does, makes one, removed when it exits in order)."""
    temp = tempfile.gettempdir()
    return {
        f"/dev/shm/{name}" for name in os.listdir("/dev/shm") if not name.startswith("sem.")
    } | {os.path.join(temp, name) for name in os.listdir(temp) if name.startswith("pymp-")}


@contextlib.contextmanager
def no_leftovers() -> Iterator[None]:
    """Check that nothing new is left in /dev/shm or multiprocessing's temp folders.

    Both are the machine's: an entry that goes away within a second was another process's
    passing use (a semaphore, a tensor on its way, a worker exiting), not a leak.
    """
    before = left_entries()
    yield
    new = left_entries() - before
    for _ in range(10):
        if not new:
            break
        time.sleep(0.1)
        new &= left_entries()
    assert new == set(), f"left behind: {sorted(new)}"


class CorruptSamples(torch.utils.data.Dataset):
    """64 samples of 4 floats; sample 40 raises ``OSError("corrupt sample 40")``."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, index: int) -> torch.Tensor:
        if index == 40:
            raise OSError(f"corrupt sample {index}")
        return torch.full((4,), float(index))


def failing_dataloader() -> tuple[torch.utils.data.DataLoader, Callable[[], list[int]]]:
    """A 2-worker DataLoader (batches of 8) whose sixth batch raises, and a function giving
    its workers' pids once both have started."""
    started = FORK.Queue()
    loader = torch.utils.data.DataLoader(
        CorruptSamples(), batch_size=8, num_workers=2, multiprocessing_context=FORK,
        worker_init_fn=lambda _: started.put(os.getpid()),
    )  # fmt: skip
    return loader, lambda: [started.get(timeout=10) for _ in range(2)]


def check_workers_gone(pids: list[int], error: BaseException) -> None:
    """Check that the processes ``pids`` have ended (and were reaped) while ``error`` is still
    held, and that its traceback still shows where the DataLoader failed."""
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        raise AssertionError(f"the DataLoader's worker {pid} outlives its error")
    assert "dataloader.py" in "".join(traceback.format_tb(error.__traceback__))


def in_small_shm(command: str) -> list[str]:
    """The argv that runs the shell ``command`` in a private mount namespace whose /dev/shm is
    a 64 MB tmpfs, as in a container started without ``--shm-size``."""
    mount = "mount -t tmpfs -o size=64m tmpfs /dev/shm"
    return ["unshare", "-m", "--propagation", "private", "bash", "-c", f"{mount} && {command}"]


@functools.cache
def small_shm_unavailable() -> str | None:
    """Why `in_small_shm` cannot run here (the reason a test skips), or None."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return "mounting a 64 MB /dev/shm in a private mount namespace needs root and unshare"
    probe = subprocess.run(in_small_shm("true"), capture_output=True, text=True, timeout=30)
    if probe.returncode:
        return f"cannot mount a 64 MB /dev/shm here: {probe.stderr.strip()}"
    return None
