"""A dataset's batches collated into recycled shared-memory segments (`PooledLoader`), the
loader behind `Producer.from_dataset`.

Like a DataLoader, it reads a map-style dataset in batches of indices (in order, shuffled
by a seeded permutation per epoch, or from a sampler), optionally in worker processes, each
batch collated by ``collate_fn`` or by stacking. Unlike a DataLoader, its workers write each
batch straight into a segment of a `SegmentPool` (mapped once per worker) and report only its
layout: no fresh shared memory per batch, no pickled tensors, no descriptor handshake. The
workers are persistent (started at the first epoch, stopped by `close`) and talk to the
producer over a socketpair each, in small JSON messages; a segment's descriptor travels once
per worker, with the first task that uses it.
"""

from __future__ import annotations

import builtins
import contextlib
import copy
import functools
import inspect
import json
import mmap
import multiprocessing
import os
import random
import selectors
import socket
import traceback
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

import numpy as np
import torch

from sharing import endpoint as endpoints
from sharing.args import check_int
from sharing.collate import collate_into
from sharing.segments import Mappings, Segment, SegmentPool

__all__ = ["PooledBatch", "PooledLoader", "dataset_producer", "into_segment"]

_MAX_MESSAGE = 4 << 20  # a task's indices (or a layout) as JSON
_POLL_S = 1.0


class PooledBatch(NamedTuple):
    """A batch in segment ``segment``: its layout (every tensor in storage 0) and the bytes
    it uses from the segment's start."""

    segment: int
    layout: dict
    nbytes: int


def _send(sock: socket.socket, message: dict, fds: list[int] = ()) -> None:  # type: ignore[assignment]
    body = json.dumps(message, separators=(",", ":")).encode()
    if len(body) > _MAX_MESSAGE:
        raise ValueError(f"a pool message of {len(body)} bytes exceeds {_MAX_MESSAGE}")
    socket.send_fds(sock, [body], list(fds)) if fds else sock.sendall(body)


def _recv(sock: socket.socket) -> tuple[dict | None, list[int]]:
    body, fds, _, _ = socket.recv_fds(sock, _MAX_MESSAGE, 1)
    return (json.loads(body) if body else None), fds


def into_segment(
    pool: SegmentPool,
    mapped: Mappings,
    write: Callable[[Callable[[int], mmap.mmap]], tuple[dict, int]],
) -> PooledBatch:
    """A batch written into a free segment of ``pool`` by this process.

    Args:
        pool: The pool whose own descriptors ``mapped`` maps.
        mapped: This process's mappings of ``pool``'s segments.
        write: Writes the batch into the buffer that its argument returns for a size (as
            `sharing.collate.collate_into` does); returns (layout, bytes used).

    Returns:
        PooledBatch: The batch in its segment (released back to ``pool`` if ``write`` raises).
    """
    segment = pool.acquire()
    if mapped.fds.get(segment.sid) != segment.fd:
        mapped.give(segment.sid, segment.fd)
    try:
        layout, used = write(lambda size: mapped.buffer(segment.sid, size))
    except BaseException:
        pool.release(segment.sid)
        raise
    pool.resized(segment.sid)
    return PooledBatch(segment.sid, layout, used)


def _seed_worker(seed: int) -> None:
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)


def _work(
    sock: socket.socket,
    dataset: Any,
    collate_fn: Callable | None,
    worker_init_fn: Callable[[int], None] | None,
    worker_id: int,
    seed: int,
    parent: int,
) -> None:
    """A pool worker's loop: collate each task's samples into its segment, answer with the
    layout (or the error), until told to stop or the producer is gone."""
    torch.set_num_threads(1)
    _seed_worker(seed + worker_id)
    if worker_init_fn is not None:
        worker_init_fn(worker_id)
    mapped = Mappings()
    sock.settimeout(_POLL_S)
    while True:
        try:
            task, fds = _recv(sock)
        except TimeoutError:
            if os.getppid() != parent:
                return
            continue
        except OSError:
            return
        if task is None or task.get("stop"):
            return
        if fds:
            mapped.give(task["segment"], fds[0])
        try:
            _send(sock, _answer(task, dataset, collate_fn, mapped))
        except OSError:
            return


def _answer(task: dict, dataset: Any, collate_fn: Callable | None, mapped: Mappings) -> dict:
    """Collate one task's samples into its segment: the answer for the producer."""
    sid = task["segment"]
    answer: dict[str, Any] = {"task": task["task"], "segment": sid}
    try:
        samples = [dataset[index] for index in task["indices"]]
        layout, used = collate_into(samples, collate_fn, lambda n: mapped.buffer(sid, n))
        answer.update(layout=layout, nbytes=used)
    except Exception as error:
        answer.update(error=type(error).__name__, traceback=traceback.format_exc())
    return answer


def _reraise(answer: dict, worker_id: int) -> BaseException:
    """The error a worker reported, as its built-in type where it has one."""
    cls = getattr(builtins, answer["error"], None)
    text = f"Caught {answer['error']} in pool worker {worker_id}.\n{answer['traceback']}"
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            return cls(text)
        except Exception:  # an exception type that takes other arguments
            pass
    return RuntimeError(text)


class _Worker(NamedTuple):
    process: Any
    sock: socket.socket
    segments: set[int]


class PooledLoader:
    """Batches of a map-style ``dataset``, collated into recycled segments of ``pool``.

    Args:
        dataset: Any object with ``__len__`` and ``__getitem__(int)``.
        batch_size: Samples per batch, >= 1.
        shuffle: Visit the samples in a permutation drawn from ``(seed, epoch)``. Default
            False.
        sampler: An iterable of indices instead (``set_epoch`` is called if it has it).
        drop_last: Drop a last batch shorter than ``batch_size``. Default False.
        num_workers: Worker processes; 0 collates in the producer's loader thread. Default 0.
        collate_fn: Turns a list of samples into a batch (then copied into the segment).
            Default None: stacked straight into it (see `sharing.collate`).
        worker_init_fn: Called with the worker id in each worker after seeding. Default None.
        seed: Seeds the permutation and each worker's torch, random and numpy generators
            (``seed + worker_id``). Default 0.
        prefetch_factor: Batches in flight per worker. Default 2.
        multiprocessing_context: A `multiprocessing` start method. Default None: the default.

    Raises:
        ValueError: A bad argument (the message names it).
    """

    def __init__(
        self,
        dataset: Any,
        *,
        batch_size: int,
        shuffle: bool = False,
        sampler: Iterable[int] | None = None,
        drop_last: bool = False,
        num_workers: int = 0,
        collate_fn: Callable[[list[Any]], Any] | None = None,
        worker_init_fn: Callable[[int], None] | None = None,
        seed: int = 0,
        prefetch_factor: int = 2,
        multiprocessing_context: str | None = None,
    ) -> None:
        check_int(batch_size, "batch_size", minimum=1)
        check_int(num_workers, "num_workers")
        check_int(prefetch_factor, "prefetch_factor", minimum=1)
        check_int(seed, "seed")
        if not (hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__")):
            raise ValueError(
                "dataset must be map-style (__len__ and __getitem__); for an iterable one, "
                f"serve Producer(DataLoader(...)) instead, got {type(dataset).__name__}"
            )
        if shuffle and sampler is not None:
            raise ValueError("pass shuffle=True or a sampler, not both")
        self.dataset, self.batch_size, self.shuffle = dataset, batch_size, shuffle
        self.sampler, self.drop_last, self.num_workers = sampler, drop_last, num_workers
        self.collate_fn, self.worker_init_fn, self.seed = collate_fn, worker_init_fn, seed
        self.prefetch_factor = prefetch_factor
        self._context = multiprocessing.get_context(multiprocessing_context)
        self.pool = SegmentPool()
        self._here = Mappings()  # num_workers=0: the loader thread's own mappings
        self._workers: list[_Worker] = []
        self._selector: selectors.BaseSelector | None = None  # over the workers' sockets
        self._epoch = 0
        self._next_task = 0

    @property
    def epochs_repeat(self) -> bool:
        """Whether every epoch is the same batches in the same order (no shuffle, no
        sampler)."""
        return not self.shuffle and self.sampler is None

    @functools.cached_property
    def completion_loader(self) -> PooledLoader:
        """This loader's twin that collates in the thread that iterates it, into the same
        pool: the same dataset and order, beside this loader's own iteration."""
        twin = copy.copy(self)
        twin.num_workers, twin._workers, twin._selector = 0, [], None
        twin._here = Mappings()
        return twin

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch``'s permutation (and the sampler's ``set_epoch``) next."""
        self._epoch = epoch
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)

    def _order(self) -> list[int]:
        if self.sampler is not None:
            return [int(i) for i in self.sampler]
        if self.shuffle:
            generator = torch.Generator().manual_seed(self.seed * 1_000_003 + self._epoch)
            return torch.randperm(len(self.dataset), generator=generator).tolist()
        return list(range(len(self.dataset)))

    def _batches(self) -> list[list[int]]:
        order = self._order()
        batches = [order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        if self.drop_last and batches and len(batches[-1]) < self.batch_size:
            batches.pop()
        return batches

    def __len__(self) -> int:
        count = len(self.sampler) if self.sampler is not None else len(self.dataset)  # type: ignore[arg-type]
        return count // self.batch_size if self.drop_last else -(-count // self.batch_size)

    def __iter__(self) -> Iterator[PooledBatch]:
        batches = self._batches()
        if self.num_workers == 0:
            for indices in batches:
                yield self._collate_here(indices)
            return
        self._start_workers()
        yield from self._from_workers(batches)

    def _collate_here(self, indices: list[int]) -> PooledBatch:
        samples = [self.dataset[index] for index in indices]
        return into_segment(
            self.pool, self._here, lambda buffer: collate_into(samples, self.collate_fn, buffer)
        )

    # ------------------------------------------------------------------ workers

    def _start_workers(self) -> None:
        if self._workers:
            return
        self._selector = selectors.DefaultSelector()
        for worker_id in range(self.num_workers):
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            for sock in (ours, theirs):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _MAX_MESSAGE)
            args = (theirs, self.dataset, self.collate_fn, self.worker_init_fn, worker_id)
            process = self._context.Process(
                target=_work,
                args=(*args, self.seed, os.getpid()),
                name=f"sharing-pool-worker-{worker_id}",
                daemon=True,
            )
            process.start()
            theirs.close()
            self._workers.append(_Worker(process, ours, set()))
            self._selector.register(ours, selectors.EVENT_READ, worker_id)

    def _assign(self, worker: _Worker, task: int, segment: Segment, indices: list[int]) -> None:
        fresh = segment.sid not in worker.segments
        message = {"task": task, "segment": segment.sid, "indices": indices}
        _send(worker.sock, message, [segment.fd] if fresh else [])
        worker.segments.add(segment.sid)

    def _from_workers(self, batches: list[list[int]]) -> Iterator[PooledBatch]:
        first = self._next_task
        self._next_task += len(batches)
        outstanding: dict[int, int] = {}  # task -> segment
        ready: dict[int, PooledBatch] = {}
        sent = 0
        limit = self.prefetch_factor * self.num_workers
        try:
            for position in range(len(batches)):
                while sent < len(batches) and len(outstanding) + len(ready) < limit:
                    segment = self.pool.acquire()
                    outstanding[first + sent] = segment.sid
                    worker = self._workers[sent % self.num_workers]
                    self._assign(worker, first + sent, segment, batches[sent])
                    sent += 1
                while first + position not in ready:
                    self._receive(outstanding, ready)
                yield ready.pop(first + position)
        finally:  # done, stopped early or failed: what is still being made is not yielded
            self._drain(outstanding)
            for batch in ready.values():
                self.pool.release(batch.segment)

    def _receive(self, outstanding: dict[int, int], ready: dict[int, PooledBatch]) -> None:
        """Wait for one answer from any worker (checking they live)."""
        assert self._selector is not None
        events = self._selector.select(_POLL_S)
        if not events:
            self._check_alive()
        for key, _ in events:
            worker = self._workers[key.data]
            try:
                answer, _ = _recv(worker.sock)
            except OSError:  # reset: the worker died with our tasks unread
                answer = None
            if answer is None:
                worker.process.join(1.0)  # reaped, its exit code known
                self._check_alive()
                raise RuntimeError(f"pool worker {key.data} closed its connection")
            sid = outstanding.pop(answer["task"])
            if "error" in answer:
                self.pool.release(sid)
                raise _reraise(answer, key.data)
            self.pool.resized(sid)
            ready[answer["task"]] = PooledBatch(sid, answer["layout"], answer["nbytes"])

    def _drain(self, outstanding: dict[int, int]) -> None:
        """Collect the answers to tasks still out (their segments go back to the pool)."""
        ready: dict[int, PooledBatch] = {}
        for _ in range(len(outstanding) * 4):
            if not outstanding:
                break
            try:
                self._receive(outstanding, ready)
            except Exception:  # a failing worker: its tasks are lost with it
                break
        for batch in ready.values():
            self.pool.release(batch.segment)

    def _check_alive(self) -> None:
        for worker_id, worker in enumerate(self._workers):
            code = worker.process.exitcode
            if code is not None:
                how = f"signal {-code}" if code < 0 else f"exit code {code}"
                raise RuntimeError(
                    f"pool worker {worker_id} (pid {worker.process.pid}) exited unexpectedly "
                    f"({how})"
                )

    def close(self) -> None:
        """Stop the workers and release the segments (idempotent)."""
        for worker in self._workers:
            with contextlib.suppress(OSError):
                _send(worker.sock, {"stop": True})
        for worker in self._workers:
            worker.process.join(2.0)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join(2.0)
            worker.sock.close()
        self._workers.clear()
        if self._selector is not None:
            self._selector.close()
            self._selector = None
        self._here = Mappings()
        self.pool.close()


def dataset_producer(cls: type, dataset: Any, kwargs: dict[str, Any]) -> Any:
    """``cls(PooledLoader(dataset, ...), ...)``: `sharing.Producer.from_dataset`, each of
    ``kwargs`` going to the one that takes it; the loader is closed with the producer.

    Raises:
        ValueError: A bad argument (the message names it).
        TypeError: An argument neither takes, or no ``batch_size``.
    """
    if endpoints.is_ray_endpoint(kwargs.get("endpoint")):
        raise ValueError(
            "from_dataset's recycled segments serve one host; on Ray, serve "
            "Producer(DataLoader(...), endpoint='ray:NAME')"
        )
    if kwargs.get("device") is not None:
        raise ValueError(
            "from_dataset serves CPU memory; for device=..., serve "
            "Producer(DataLoader(...), device=...)"
        )
    if "batch_size" not in kwargs:
        raise TypeError(
            "Producer.from_dataset() needs batch_size=, the samples per batch (an integer "
            ">= 1, as DataLoader's)"
        )
    own = inspect.signature(PooledLoader).parameters
    loader = PooledLoader(dataset, **{k: kwargs.pop(k) for k in list(kwargs) if k in own})
    try:
        instance = cls(loader, **kwargs)
    except BaseException:
        loader.close()
        raise
    instance._pooled = loader
    return instance
