"""Shared data loading across hosts, through Ray's object store (endpoint ``ray:NAME``).

The producer runs the loader once and puts each batch into Ray's object store once
(``ray.put``). A hub actor, named ``NAME`` in the ``sharing`` namespace and placed on the
producer's node, keeps the stream: each batch's object reference, where every consumer
stands, who joined how (`sharing.policy`, as on one host) and what is still needed. A
consumer, in any process of the cluster, on any node, asks the hub for its next entry and
gets the batch with ``ray.get``. Ray pulls an object to a node once; every other consumer on
that node reads the same copy, zero-copy, from the node's store. So a batch crosses to each
host at most once, however many consumers it runs.

The guarantees are the local path's (`Producer`, `Consumer`): every consumer gets every
batch of every epoch exactly once, in one order; the late-join modes; ``max_lag``
backpressure; per-consumer batch sizes; exact fresh and echoed counts (``echo_on_stall``);
streams that end loudly. Two are Ray's own:

- **Liveness by lease.** A consumer renews its lease from a thread every ``lease_s`` / 4; one
  whose lease runs out (its process or node died) is dropped, so the others stall at most
  ``lease_s``. A consumer that stops asking but lives (it never reads) is bounded by
  ``max_lag``, as locally.
- **Bounded object store.** The producer reserves a batch's bytes with the hub before it puts
  the batch, and waits while the batches held (unread, or kept for replay) would exceed
  ``max_bytes`` (default: a quarter of the cluster's object store), so a full store means
  backpressure, never spilling or an out-of-memory kill.

Batches reach consumers as tensors over the node's shared object store: **read-only**.
Writing into one in place would change what every consumer on that node reads (Ray maps the
store writable, so nothing stops it); a consumer that must modify a batch clones it first
(``batch = batch.clone()``, or ``copy=True``). Ray serializes with pickle: the trust
boundary is the Ray cluster, as Ray's own security model states.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import logging
import os
import queue
import re
import secrets
import threading
import time
import warnings
import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import ray
import torch
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from sharing import lifetime, policy, protocol
from sharing.args import check_consumer, check_int, check_stream, signature_of_init
from sharing.consumer import Consumer, _refusal_error
from sharing.endpoint import RAY_SCHEME as SCHEME
from sharing.endpoint import is_ray_endpoint
from sharing.errors import ProducerGone, SharingError
from sharing.layout import first_dim
from sharing.loading import released
from sharing.producer import Producer

__all__ = [
    "NAMESPACE",
    "SCHEME",
    "RayConsumer",
    "RayProducer",
    "default_endpoint",
    "is_ray_endpoint",
    "parse",
    "simulated_cluster",
]

log = logging.getLogger("sharing.producer")

NAMESPACE = "sharing"
"""The Ray namespace the hubs are named in."""

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
_POLL_S = 0.25  # longest a hub call waits before it answers "nothing yet" (a heartbeat too)
_GONE_S = 2.0  # a hub that answers no call (each answers within _POLL_S) for this long is gone
_TELL_S = 5.0  # how long close waits for consumers to learn the stream's end
_READ_S = 1.0  # a batch's read checks the producer's hub this often while it waits
_AHEAD = 2  # batches a consumer starts pulling before it needs them
_GRACE_S = 1e-4  # EchoOnStall's grace, as the local consumer's


def parse(endpoint: str) -> str:
    """The hub's actor name in ``ray:NAME``.

    Raises:
        ValueError: ``endpoint`` is not ``ray:NAME`` with NAME of letters, digits, ``_.-``.
    """
    name = endpoint[len(SCHEME) :] if is_ray_endpoint(endpoint) else ""
    if not _NAME.fullmatch(name):
        raise ValueError(
            f"endpoint must be 'ray:NAME' (NAME: letters, digits, '_', '.', '-'; up to 100), "
            f"got {endpoint!r}"
        )
    return name


def default_endpoint() -> str:
    """A fresh ``ray:NAME``."""
    return f"{SCHEME}sharing-{os.getpid()}-{secrets.token_hex(6)}"


def _connect() -> None:
    """Join the Ray cluster this process belongs to (``ray.init`` if not yet)."""
    if not ray.is_initialized():
        ray.init(address=os.environ.get("RAY_ADDRESS"), log_to_driver=False)


@contextlib.contextmanager
def simulated_cluster(head: dict[str, Any], nodes: Iterable[dict[str, Any]] = ()) -> Iterator[Any]:
    """Several Ray "hosts" on this machine, this process connected to them: a
    `ray.cluster_utils.Cluster` whose every node has its own raylet and object store, sharing
    the machine's cores and talking over loopback (how the tests and benchmarks reach
    across hosts without a second machine).

    Everything Ray writes (sessions, sockets, logs, spilled objects, its address file) goes
    into one fresh directory under ``/tmp`` (short: Ray's socket paths are limited), named by
    ``RAY_TMPDIR`` while the cluster runs, and removed afterwards with the cluster, so nothing
    is left behind; usage statistics are off.

    Args:
        head: ``Cluster.add_node`` arguments of the head node (``num_cpus``,
            ``object_store_memory``, ...); the dashboard is off unless it says otherwise.
        nodes: The same, one mapping per further node (``resources`` to place actors there).
            Default: none.

    Yields:
        The running ``ray.cluster_utils.Cluster``; ``ray`` is initialized against it.
    """
    import shutil
    import tempfile

    from ray.cluster_utils import Cluster

    saved = {key: os.environ.get(key) for key in ("RAY_TMPDIR", "RAY_USAGE_STATS_ENABLED")}
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")
    os.environ["RAY_TMPDIR"] = temp
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    os.makedirs(os.path.join(temp, "ray"), exist_ok=True)  # where Ray keeps its address file
    cluster = None
    try:
        cluster = Cluster(
            initialize_head=True,
            head_node_args={"include_dashboard": False, "temp_dir": temp, **head},
        )
        for node in nodes:
            cluster.add_node(**node)
        ray.init(address=cluster.address, log_to_driver=False)
        yield cluster
    finally:
        ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# ---------------------------------------------------------------------- batches on the wire


@dataclass(frozen=True)
class _Tensor:
    """A CPU tensor on its way through the object store, as its numpy array (zero-copy)."""

    array: np.ndarray


def _to_store(batch: Any) -> Any:
    """``batch`` with every tensor as a `_Tensor` (Ray stores numpy arrays out of band)."""
    if isinstance(batch, torch.Tensor):
        if batch.device.type != "cpu":
            raise ValueError(f"the ray backend serves CPU tensors, got one on {batch.device}")
        return _Tensor(batch.detach().contiguous().numpy())
    if isinstance(batch, dict):
        return {key: _to_store(value) for key, value in batch.items()}
    if isinstance(batch, (tuple, list)):
        return type(batch)(_to_store(value) for value in batch)
    return batch


def _from_store(batch: Any, copy: bool) -> Any:
    """`_to_store`'s inverse: tensors over the (read-only) store memory, or copies."""
    if isinstance(batch, _Tensor):
        if copy:
            return torch.from_numpy(batch.array.copy())
        with warnings.catch_warnings():  # read-only by design (the module says why)
            warnings.simplefilter("ignore", UserWarning)
            return torch.from_numpy(batch.array)
    if isinstance(batch, dict):
        return {key: _from_store(value, copy) for key, value in batch.items()}
    if isinstance(batch, (tuple, list)):
        return type(batch)(_from_store(value, copy) for value in batch)
    if isinstance(batch, np.ndarray) and copy:
        return batch.copy()
    return batch


def _nbytes(batch: Any) -> int:
    if isinstance(batch, _Tensor):
        return batch.array.nbytes
    if isinstance(batch, np.ndarray):
        return batch.nbytes
    if isinstance(batch, dict):
        return sum(_nbytes(value) for value in batch.values())
    if isinstance(batch, (tuple, list)):
        return sum(_nbytes(value) for value in batch)
    return 0


# ---------------------------------------------------------------------- the hub


@dataclass
class _Member:
    """A consumer as the hub sees it."""

    mode: str
    base: int | None  # the log position of its first entry; None until its epoch starts
    wait_epoch: int | None
    start_index: int  # wrap: the index it joined at (its last epoch needs that many more)
    seen: float
    pid: int
    taken: int = 0  # entries it has asked past (so released)
    served: int = 0  # log position after the last entry it was given

    @property
    def pos(self) -> int | None:
        """Its next log position; None while it waits for a next epoch."""
        return None if self.base is None else self.base + self.taken


@dataclass
class _Log:
    """The stream: log positions in order, each a batch or an epoch's end."""

    entries: dict[int, dict] = field(default_factory=dict)
    batches_before: dict[int, int] = field(default_factory=lambda: {0: 0})
    head: int = 0  # the next position

    def append(self, entry: dict) -> int:
        pos = self.head
        self.entries[pos] = entry
        self.head += 1
        self.batches_before[self.head] = self.batches_before[pos] + (entry["type"] == "batch")
        return pos

    def lag(self, pos: int) -> int:
        """Batches logged at or after ``pos``."""
        return self.batches_before[self.head] - self.batches_before.get(pos, 0)


class _Hub:
    """The stream's state, one actor per producer (an asyncio actor: one thread, no locks)."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.consumers_wanted = settings["consumers"]
        self.max_lag = settings["max_lag"]
        self.max_bytes = settings["max_bytes"]
        self.lease_s = settings["lease_s"]
        self.join_grace_s = settings["join_grace_s"]
        self.epochs = settings["epochs"]
        self.batches_per_epoch = settings["batches_per_epoch"]
        self.replay_batches = settings["replay_batches"]
        self.replay_bytes = settings["replay_bytes"]
        self.window = 0 if self.replay_batches is None else self.replay_batches
        self.log = _Log()
        self.members: dict[int, _Member] = {}
        self.next_id = 0
        self.epoch = 0  # epoch of the next batch
        self.index = 0  # batches of ``epoch`` logged
        self.next_op = 0  # the producer's next call to apply
        self.late = 0  # batches logged after the last epoch, for wrapped consumers
        self.epoch_pos: dict[int, int] = {}
        self.regular_end: int | None = None  # set when no regular batch follows
        self.end: dict | None = None  # the stream's end, once known
        self.held_bytes = 0
        self.started = False
        self.last_hello = 0.0
        self.counts = {"joined": 0, "left": 0, "lost": 0, "served": 0}
        self._changed = asyncio.Event()
        self._reaper: asyncio.Task | None = None

    # -- waiting -----------------------------------------------------------------------

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def _until(self, ready: Any, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not ready():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(left, 3600.0))
        return True

    def _ensure_reaper(self) -> None:
        if self._reaper is None:
            self._reaper = asyncio.get_running_loop().create_task(self._reap())

    async def _reap(self) -> None:
        while True:
            await asyncio.sleep(self.lease_s / 4)
            now = time.monotonic()
            lost = [cid for cid, m in self.members.items() if now - m.seen > self.lease_s]
            for cid in lost:
                del self.members[cid]
                self.counts["lost"] += 1
                log.warning("consumer %d lost: no lease renewal for %.2f s", cid, self.lease_s)
            if lost:
                self._forget()
                self._notify()

    # -- consumers ---------------------------------------------------------------------

    def _position(self) -> policy.Position:
        return policy.Position(
            epoch=self.epoch,
            index=self.index,
            window=self.window,
            batches_per_epoch=self.batches_per_epoch,
            epochs=self.epochs,
            finished=self.regular_end is not None or self.end is not None,
        )

    async def hello(self, hello: dict[str, Any]) -> dict[str, Any]:
        """A consumer's join: a welcome (its id, mode, epoch) or an error (code, reason)."""
        self._ensure_reaper()
        refusal = policy.check_hello(hello)
        join = refusal or policy.plan_join(self._position(), hello["late_join"])
        if isinstance(join, policy.Refusal):
            return {"type": "error", "code": join.code, "reason": join.reason}
        cid = self.next_id
        self.next_id += 1
        pos: int | None
        if join.mode == "replay":
            pos = self.epoch_pos[join.epoch]
        elif join.mode == "next_epoch":
            pos = None
        else:  # start, wrap: from the next batch logged
            pos = self.log.head
        self.members[cid] = _Member(
            mode=join.mode,
            base=pos,
            wait_epoch=join.epoch if pos is None else None,
            start_index=join.start_index if join.mode == "wrap" else 0,
            seen=time.monotonic(),
            pid=hello["pid"],
        )
        self.counts["joined"] += 1
        self.last_hello = time.monotonic()
        self._notify()
        return {
            "type": "welcome",
            "consumer_id": cid,
            "mode": join.mode,
            "epoch": join.epoch,
            "batches_per_epoch": self.batches_per_epoch,
            "lease_s": self.lease_s,
        }

    def beat(self, cid: int) -> bool:
        """Renew ``cid``'s lease; False if it was dropped."""
        member = self.members.get(cid)
        if member is not None:
            member.seen = time.monotonic()
        return member is not None

    def leave(self, cid: int) -> None:
        """``cid`` leaves: it is served no more."""
        if self.members.pop(cid, None) is not None:
            self.counts["left"] += 1
            self._forget()
            self._notify()

    def _entry_for(self, member: _Member) -> dict | None:
        """What ``member`` gets at its position now: an entry, the end, or None (wait)."""
        if self.end is not None and self.end["reason"] != "finished":
            return self.end
        if member.pos is None:
            return self.end  # waiting for a next epoch: only the end can come
        if self.regular_end is not None and member.pos >= self.regular_end:
            owed = self.regular_end + (member.start_index if member.mode == "wrap" else 0)
            if member.pos >= owed:
                return self.end or {"type": "end", "reason": "finished", "detail": ""}
        entry = self.log.entries.get(member.pos)
        if entry is None and self.end is not None:  # ended short of what it was owed
            return self.end
        return entry

    async def next(self, cid: int, taken: int) -> dict[str, Any]:
        """Entry ``taken`` of ``cid``'s stream (which releases every earlier one), waiting at
        most `_POLL_S`: a batch (``ref``: its object, in a list), an epoch's end, the
        stream's end, ``wait`` (nothing yet) or ``error`` (this consumer was dropped)."""
        member = self.members.get(cid)
        if member is None:
            return {
                "type": "error",
                "code": "lost",
                "reason": f"consumer {cid} was dropped (left, or renewed no lease for "
                f"{self.lease_s:g} s)",
            }
        member.seen = time.monotonic()
        if taken > member.taken:
            member.taken = taken
            self._forget()
            self._notify()
        found: list[dict] = []

        def ready() -> bool:
            if cid not in self.members:
                return True
            entry = self._entry_for(member)
            if entry is not None:
                found.append(entry)
            return entry is not None

        if not await self._until(ready, _POLL_S) or not found:
            return {"type": "wait"} if cid in self.members else await self.next(cid, taken)
        entry = found[-1]
        if member.pos is not None and entry["type"] != "end":
            member.served = member.pos + 1
        if entry["type"] == "batch":
            self.counts["served"] += 1
            reply = {key: value for key, value in entry.items() if key != "nbytes"}
            after = (self.log.entries.get(p) for p in range(entry["seq"] + 1, self.log.head))
            reply["ahead"] = [
                (e["seq"], e["ref"])
                for e in itertools.islice(after, _AHEAD)
                if e and e["type"] == "batch"
            ]
            return reply
        return entry

    # -- the producer ------------------------------------------------------------------

    def _lags(self) -> list[int]:
        return [self.log.lag(m.pos) for m in self.members.values() if m.pos is not None]

    def _can_put(self, nbytes: int) -> bool:
        if self.end is not None:
            return True
        now = time.monotonic()
        if not self.started:
            if self.counts["joined"] < self.consumers_wanted:
                return False
            if now - self.last_hello < self.join_grace_s:
                return False
        if not self.members:
            return False  # pause while none is connected
        lags = self._lags()
        if lags and max(lags) >= self.max_lag:
            return False
        return self.held_bytes == 0 or self.held_bytes + nbytes <= self.max_bytes

    async def reserve(self, nbytes: int) -> bool:
        """Wait (at most `_POLL_S`) until a batch of ``nbytes`` may be put; True if so (its
        bytes are then counted as held), False to ask again."""
        self._ensure_reaper()
        timeout = _POLL_S
        if not self.started and self.join_grace_s:
            timeout = min(_POLL_S, self.join_grace_s)
        if not await self._until(lambda: self._can_put(nbytes), timeout):
            return False
        self.started = True
        self.held_bytes += nbytes
        return True

    async def apply(self, op: int, name: str, *args: Any) -> Any:
        """The producer's ``op``-th call, ``name(*args)`` (publish, end_epoch, owed, finish),
        applied in the producer's order: an asyncio actor may start calls out of order."""
        await self._until(lambda: self.next_op == op, float("inf"))
        result = getattr(self, name)(*args)
        self.next_op += 1
        self._notify()
        return result

    def publish(self, batch: dict[str, Any]) -> None:
        """Log one batch (``ref``, ``nbytes``, ``rows``; ``late``: loaded after the last epoch
        for wrapped consumers)."""
        late = batch.get("late", False)
        if self.index == 0 and not late:
            self.epoch_pos[self.epoch] = self.log.head
            if self.epoch == 0:  # the window, from the first batch's size
                window = policy.replay_window(
                    self.replay_batches, self.replay_bytes, batch["nbytes"], self.batches_per_epoch
                )
                fits = self.max_bytes // 2 // max(batch["nbytes"], 1)
                if window > fits:
                    log.warning(
                        "replay window cut from %d to %d batches to fit half of max_bytes=%d",
                        window, fits, self.max_bytes,
                    )  # fmt: skip
                self.window = min(window, fits)
        index = self.late if late else self.index
        entry = {"type": "batch", "epoch": self.epoch, "index": index, **batch}
        entry["seq"] = self.log.append(entry)
        if late:
            self.late += 1
        else:
            self.index += 1
        self._forget()
        self._notify()

    def end_epoch(self) -> None:
        """The epoch in progress is whole."""
        if self.batches_per_epoch is None:
            self.batches_per_epoch = self.index
        pos = self.log.append({"type": "end_epoch", "epoch": self.epoch})
        self.epoch += 1
        self.index = 0
        for member in self.members.values():
            if member.base is None and member.wait_epoch == self.epoch:
                member.base, member.wait_epoch = pos + 1, None
        self._forget()
        self._notify()

    def owed(self) -> int:
        """No regular batch follows: how many leading batches wrapped consumers still need
        (loaded again for them alone)."""
        self.regular_end = self.log.head
        self._notify()
        wrapped = [m.start_index for m in self.members.values() if m.mode == "wrap"]
        return max(wrapped, default=0)

    def finish(self, reason: str, detail: str = "") -> None:
        """The stream ends (``finished``, ``stopped`` or ``failed``)."""
        if self.end is None:
            self.end = {"type": "end", "reason": reason, "detail": detail}
            if self.regular_end is None:
                self.regular_end = self.log.head
        self._forget()
        self._notify()

    def _complete(self, member: _Member) -> bool:
        """Whether ``member`` was given all it is owed (the end aside)."""
        if self.end is None:
            return False
        if self.end["reason"] != "finished" or member.base is None:
            return True
        assert self.regular_end is not None
        owed = self.regular_end + (member.start_index if member.mode == "wrap" else 0)
        return member.served >= min(owed, self.log.head)

    async def delivered(self, timeout: float) -> bool:
        """Wait (at most ``timeout``) until every consumer was given all it is owed."""
        return await self._until(
            lambda: all(self._complete(m) for m in self.members.values()), timeout
        )

    async def told(self, timeout: float) -> bool:
        """Wait (at most ``timeout``) until every consumer was given the end, or left."""
        return await self._until(lambda: not self.members, timeout)

    def _forget(self) -> None:
        """Drop the references no consumer needs and replay does not keep."""
        positions = [m.pos for m in self.members.values() if m.pos is not None]
        if self.end is not None and self.end["reason"] != "finished":
            positions = []
        low = min(positions, default=self.log.head)
        keep_from = self.epoch_pos.get(self.epoch)
        for pos in [p for p in self.log.entries if p < low]:
            entry = self.log.entries[pos]
            kept = (
                entry["type"] == "batch"
                and self.end is None
                and keep_from is not None
                and pos >= keep_from
                and entry["index"] < self.window
            )
            if not kept:
                del self.log.entries[pos]
                self.held_bytes -= entry.get("nbytes", 0)

    def gone(self, cid: int) -> None:
        """``cid`` was given the stream's end: it needs nothing more."""
        if self.members.pop(cid, None) is not None:
            self._forget()
            self._notify()

    def metrics(self) -> dict[str, Any]:
        """Consumers, their lag, what is held."""
        return {
            "batches_served": self.counts["served"],
            "consumers": len(self.members),
            "consumers_joined": self.counts["joined"],
            "consumers_left": self.counts["left"],
            "consumers_lost": self.counts["lost"],
            "lag": {
                cid: self.log.lag(m.pos) for cid, m in self.members.items() if m.pos is not None
            },
            "batches_held": sum(e["type"] == "batch" for e in self.log.entries.values()),
            "bytes_held": self.held_bytes,
        }


_RemoteHub = ray.remote(num_cpus=0, max_concurrency=10_000)(_Hub)


# ---------------------------------------------------------------------- producer


@signature_of_init
class RayProducer(Producer):
    """`Producer` over Ray's object store; ``Producer(loader, endpoint="ray:NAME")`` makes
    one. Arguments and guarantees are `Producer`'s, with ``device`` not taken (CPU batches
    only) and two of Ray's own:

    Args:
        max_bytes: Most bytes of batches held in the object store (unread by some consumer,
            or kept for replay); the producer waits rather than exceed it. Default None: a
            quarter of the cluster's object store memory.
        lease_s: A consumer that renews no lease for this long is dropped. Default 1.
    """

    def __init__(
        self,
        loader: Iterable[Any],
        *,
        endpoint: str | None = None,
        epochs: int | None = 1,
        max_lag: int = 4,
        replay_batches: int | None = None,
        replay_bytes: int = 256 << 20,
        consumers: int = 1,
        join_grace_s: float = 0.0,
        max_bytes: int | None = None,
        lease_s: float = 1.0,
        log_every_s: float = 30.0,
    ) -> None:
        check_stream(epochs, max_lag, replay_batches, replay_bytes, consumers, join_grace_s)
        check_int(max_bytes, "max_bytes", minimum=1, allow_none=True)
        if not isinstance(lease_s, (int, float)) or not 0 < lease_s < float("inf"):
            raise ValueError(f"lease_s must be > 0, got {lease_s!r}")
        self.endpoint = endpoint if endpoint is not None else default_endpoint()
        name = parse(self.endpoint)
        self.loader, self.epochs, self.log_every_s = loader, epochs, log_every_s
        self._stop = threading.Event()
        self._finishing = threading.Event()
        self._closed = False
        self._served = threading.Event()
        self._serving: threading.Thread | None = None
        self._counters = {"produced": 0, "owed": 0}
        self._ops = 0
        self._cpu_start = time.process_time()
        _connect()
        if max_bytes is None:
            max_bytes = int(ray.cluster_resources().get("object_store_memory", 2 << 30)) // 4
        try:
            length: int | None = len(loader)  # type: ignore[arg-type]
        except TypeError:
            length = None
        settings = {
            "consumers": consumers, "max_lag": max_lag, "max_bytes": max_bytes,
            "lease_s": float(lease_s), "join_grace_s": float(join_grace_s), "epochs": epochs,
            "batches_per_epoch": length, "replay_batches": replay_batches,
            "replay_bytes": replay_bytes,
        }  # fmt: skip
        self.max_bytes = max_bytes
        here = ray.get_runtime_context().get_node_id()
        try:
            self._hub = _RemoteHub.options(
                name=name,
                namespace=NAMESPACE,
                scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False),
            ).remote(settings)
            ray.get(self._hub.metrics.remote())
        except ValueError as error:  # the name is taken
            raise OSError(f"another producer serves at {self.endpoint}: {error}") from None
        self._pid = lifetime.opened(self)

    @classmethod
    def from_dataset(cls, dataset: Any, **kwargs: Any) -> Producer:
        """Not offered on Ray (recycled segments are a one-host mechanism)."""
        raise ValueError("from_dataset serves one host; on Ray, pass Producer(DataLoader(...))")

    def stop(self) -> None:
        """Ask `serve` to return soon; consumers mid-epoch raise `SharingError`."""
        self._stop.set()

    def finish(self) -> None:
        """Serve the epoch in progress to the end, then end the stream."""
        self._finishing.set()

    def connected(self) -> int:
        """Consumers connected now."""
        return ray.get(self._hub.metrics.remote())["consumers"]

    def metrics(self) -> dict[str, Any]:
        """Batches produced and served, consumers, their lag, batches and bytes held."""
        return {
            "batches_produced": self._counters["produced"],
            "batches_for_late_joiners": self._counters["owed"],
            **ray.get(self._hub.metrics.remote()),
            "max_bytes": self.max_bytes,
            "producer_cpu_s": time.process_time() - self._cpu_start,
        }

    def _op(self, name: str, *args: Any) -> Any:
        """Call the hub's ``name(*args)``, in this producer's order (`_Hub.apply`)."""
        ref = self._hub.apply.remote(self._ops, name, *args)
        self._ops += 1
        return ref

    def _put(self, batch: Any, late: bool = False) -> bool:
        """Reserve, put and log one batch; False if stopped meanwhile."""
        stored = _to_store(batch)
        nbytes = _nbytes(stored)
        if nbytes > self.max_bytes:
            raise ValueError(
                f"a batch of {nbytes} bytes exceeds max_bytes={self.max_bytes}; pass a larger "
                "max_bytes or smaller batches"
            )
        while not ray.get(self._hub.reserve.remote(nbytes)):
            if self._stop.is_set():
                return False
        ref = ray.put(stored)
        self._op(
            "publish", {"ref": [ref], "nbytes": nbytes, "rows": first_dim(batch) or 0, "late": late}
        )
        self._counters["produced"] += 1
        return True

    def serve(self) -> None:
        """Serve every epoch (or until `stop`); then tell every consumer the stream ended and
        wait (at most 10 s) until each has been told.

        Raises:
            Exception: Whatever ``loader`` raised.
        """
        if self._closed:
            raise RuntimeError("this Producer is closed")
        restore = lifetime.on_sigterm(self.stop)
        self._serving = threading.current_thread()
        self._served.clear()
        reason, detail = "stopped", ""
        last_log = time.monotonic()
        try:
            epoch = 0
            while (self.epochs is None or epoch < self.epochs) and not self._stop.is_set():
                if self._finishing.is_set() and epoch:
                    break
                if hasattr(self.loader, "set_epoch"):
                    self.loader.set_epoch(epoch)
                for batch in self._loaded(self.loader):
                    if self._stop.is_set() or not self._put(batch):
                        break
                    if time.monotonic() - last_log >= self.log_every_s:
                        log.info("metrics %s", self.metrics())
                        last_log = time.monotonic()
                if self._stop.is_set():  # cut short: the epoch is not whole
                    break
                self._op("end_epoch")
                epoch += 1
            if not self._stop.is_set():
                owed = ray.get(self._op("owed"))
                if owed:
                    self._counters["owed"] = self._load_owed(owed)
                reason = "finished"
        except BaseException as error:
            reason, detail = "failed", f"{type(error).__name__}: {error}"
            raise
        finally:
            try:
                self._op("finish", reason, detail)
                restore()
                # Until every consumer was given the end (a lost one is dropped by its lease):
                # finished streams are delivered whole first, stopped ones end at once.
                while not (self._closed or self._stop.is_set()):
                    if ray.get(self._hub.delivered.remote(1.0)):
                        break
                log.info("finished: %s", self.metrics())
            finally:
                self._served.set()

    def _loaded(self, loader: Iterable[Any]) -> Iterator[Any]:
        """One iteration of ``loader``, run in a thread of its own so that `stop` ends
        serving even while the loader is stuck in its next batch (the thread then ends
        at that batch); the loader's error is raised here."""
        handoff: queue.Queue = queue.Queue(maxsize=1)
        done = object()
        left = threading.Event()  # this iteration's reader went away

        def offer(item: Any, error: BaseException | None = None) -> bool:
            while not (self._stop.is_set() or left.is_set()):
                with contextlib.suppress(queue.Full):
                    handoff.put((item, error), timeout=_POLL_S)
                    return True
            return False

        def load() -> None:
            try:
                for item in loader:
                    if not offer(item):
                        return
                offer(done)
            except BaseException as error:  # raised in the serving thread
                offer(done, released(error))

        thread = threading.Thread(target=load, name="sharing-ray-loader", daemon=True)
        thread.start()
        try:
            while not self._stop.is_set():
                try:
                    item, error = handoff.get(timeout=_POLL_S)
                except queue.Empty:
                    continue
                if error is not None:
                    raise error
                if item is done:
                    return
                yield item
        finally:
            left.set()

    def _load_owed(self, owed: int) -> int:
        """Load the first ``owed`` batches again, for wrapped consumers alone."""
        if hasattr(self.loader, "set_epoch"):
            self.loader.set_epoch(self.epochs or 0)
        loaded = 0
        for batch in self._loaded(self.loader):
            if loaded == owed or not self._put(batch, late=True):
                break
            loaded += 1
        return loaded

    def close(self) -> None:
        """End the stream and remove the hub (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        if self._serving is not None and self._serving is not threading.current_thread():
            self._served.wait(timeout=15.0)
        with contextlib.suppress(Exception):
            if self._serving is None:
                self._op("finish", "stopped", "")
            # Consumers learn the end when they ask next: give them a moment to, so that
            # they see how it ended rather than a producer gone.
            ray.get(self._hub.told.remote(_TELL_S), timeout=_TELL_S + _GONE_S)
        with contextlib.suppress(Exception):
            ray.kill(self._hub)


# ---------------------------------------------------------------------- consumer


@signature_of_init
class RayConsumer(Consumer):
    """`Consumer` of a Ray producer; ``Consumer("ray:NAME")`` makes one, in any process of
    the cluster. Arguments and attributes are `Consumer`'s, and:

    Args:
        copy: Give each batch as private, writable tensors (a copy) instead of read-only
            views of the node's object store. Default False.
    """

    def __init__(
        self,
        endpoint: str,
        *,
        batch_size: int | None = None,
        late_join: str = "auto",
        connect_timeout_s: float = 10.0,
        timeout_s: float | None = None,
        echo_on_stall: int = 1,
        copy: bool = False,
    ) -> None:
        check_consumer(batch_size, late_join, echo_on_stall, connect_timeout_s, timeout_s)
        name = parse(endpoint)
        self.endpoint, self.batch_size, self.timeout_s = endpoint, batch_size, timeout_s
        self.echo_on_stall, self.copy = echo_on_stall, copy
        self.fresh_examples = self.echoed_examples = 0
        self.last_was_echo = False
        self._end: dict | None = None
        self._lookahead: dict | None = None
        self.epochs_done = 0
        self._held: set[int] = set()
        self._closed = True
        self._pos = 0
        self._pending: Any = None  # the hub call for entry ``_pos``, while it runs
        # Batches pulled ahead, by seq: the next one's transfer overlaps this one's step.
        self._fetched: dict[int, concurrent.futures.Future] = {}
        self._fetcher = concurrent.futures.ThreadPoolExecutor(1, "sharing-prefetch")
        _connect()
        self._hub = _find_hub(name, endpoint, connect_timeout_s)
        welcome = self._call(self._hub.hello.remote(_hello(batch_size, late_join)))
        if welcome["type"] == "error":
            raise _refusal_error(welcome)
        self._closed = False
        self._pid = lifetime.opened(self)
        self.consumer_id = welcome["consumer_id"]
        self.mode = welcome["mode"]
        self.epoch = welcome["epoch"]
        self._batches_per_epoch = welcome["batches_per_epoch"]
        self._producer_batch_size: int | None = None
        self._lease_s = welcome["lease_s"]
        self._beating = threading.Event()
        threading.Thread(
            target=_renew,
            args=(weakref.ref(self), self._hub, self.consumer_id, self._beating, self._lease_s / 4),
            name="sharing-lease",
            daemon=True,
        ).start()

    def _call(self, ref: Any, what: str = "the producer's answer") -> Any:
        """``ray.get(ref)``; a hub that is gone, or that answers neither ``ref`` nor a ping
        for `_GONE_S` (its node is gone, and Ray has not noticed yet), is `ProducerGone`."""
        try:
            try:
                return ray.get(ref, timeout=_GONE_S)
            except ray.exceptions.GetTimeoutError:
                ray.get(self._hub.metrics.remote(), timeout=_GONE_S / 2)  # alive but slow?
                return ray.get(ref, timeout=_GONE_S)
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError) as error:
            raise ProducerGone(
                f"the producer at {self.endpoint} is gone ({type(error).__name__} while "
                f"waiting for {what})"
            ) from None

    def _next_message(self, what: str = "a message") -> dict:
        """Entry `_pos` of this consumer's stream (a batch with its tensors fetched)."""
        if self._lookahead is not None:
            message, self._lookahead = self._lookahead, None
            return message
        waited = 0.0
        while True:
            if self._pending is None:
                self._pending = self._hub.next.remote(self.consumer_id, self._pos)
            message = self._call(self._pending, what)
            self._pending = None
            if message["type"] != "wait":
                break
            waited += _POLL_S
            if self.timeout_s is not None and waited >= self.timeout_s:
                raise TimeoutError(
                    f"waited {waited:g} s (timeout_s={self.timeout_s:g}) for {what} from the "
                    f"producer at {self.endpoint}; pass a larger timeout_s, or None"
                )
        return self._accept(message)

    def _accept(self, message: dict) -> dict:
        kind = message["type"]
        if kind == "error":
            raise SharingError(message["reason"])
        if kind == "end":
            self._hub.gone.remote(self.consumer_id)
            return message
        self._pos += 1
        if kind == "batch":
            for seq, ref in message.get("ahead", ()):  # start pulling what comes next
                if seq not in self._fetched and len(self._fetched) <= _AHEAD:
                    self._fetched[seq] = self._fetcher.submit(ray.get, ref[0])
            fetched = self._fetched.pop(message["seq"], None)
            if fetched is None:
                fetched = self._fetcher.submit(ray.get, message["ref"][0])
            try:
                stored = self._read(fetched)
            except ray.exceptions.RayError as error:
                raise ProducerGone(
                    f"the producer at {self.endpoint} is gone: its batch {message['seq']} "
                    f"cannot be read ({type(error).__name__})"
                ) from None
            message["batch"] = _from_store(stored, self.copy)
        return message

    def _batch(self, message: dict) -> Any:
        return message["batch"]

    def _read(self, fetched: concurrent.futures.Future) -> Any:
        """A batch's value, however long its transfer takes while the producer lives; a gone
        hub (checked every `_READ_S`) is `ProducerGone`."""
        while True:
            try:
                return fetched.result(timeout=_READ_S)
            except concurrent.futures.TimeoutError:
                self._call(self._hub.beat.remote(self.consumer_id), "a batch's transfer")

    def _ready(self) -> bool:
        """Whether the next entry is here (its batch on this node) within the grace."""
        if self._lookahead is not None or self._end is not None:
            return True
        if self._pending is None:
            self._pending = self._hub.next.remote(self.consumer_id, self._pos)
        done, _ = ray.wait([self._pending], timeout=_GRACE_S)
        if not done:
            return False
        message = self._call(self._pending)
        self._pending = None
        if message["type"] == "wait":
            return False
        if message["type"] == "batch":
            ref = message["ref"][0]
            ray.wait([ref], timeout=_GRACE_S, fetch_local=True)
        self._lookahead = self._accept(message)
        return True

    def _release(self, seq: int | None) -> None:
        if seq is not None:  # the hub learns it with the next request (pipelined acks)
            self._held.discard(seq)

    def _free(self, seq: int) -> None:  # no recycled segments on Ray
        pass

    def _send(self, kind: str, **fields: Any) -> None:  # nothing goes to the hub unasked
        pass

    def leave(self) -> None:
        """Leave: the producer stops serving this consumer at once (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._beating.set()
        self._fetcher.shutdown(wait=False, cancel_futures=True)
        self._fetched.clear()
        with contextlib.suppress(Exception):
            ray.get(self._hub.leave.remote(self.consumer_id), timeout=2.0)

    close = leave


def _renew(consumer: Any, hub: Any, cid: int, stop: threading.Event, every: float) -> None:
    """Renew consumer ``cid``'s lease every ``every`` s until ``stop``, or until the consumer
    (a weak reference: this thread must not keep it alive) is collected."""
    while not stop.wait(every) and consumer() is not None:
        with contextlib.suppress(Exception):
            hub.beat.remote(cid)


def _hello(batch_size: int | None, late_join: str) -> dict[str, Any]:
    return {
        "version": protocol.PROTOCOL_VERSION,
        "batch_size": batch_size,
        "late_join": late_join,
        "pid": os.getpid(),
        "resume": None,
    }


def _find_hub(name: str, endpoint: str, timeout_s: float) -> Any:
    """The hub named ``name``, waiting up to ``timeout_s`` for its producer to start."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return ray.get_actor(name, namespace=NAMESPACE)
        except ValueError:
            if time.monotonic() >= deadline:
                raise ConnectionError(
                    f"no producer at {endpoint} in this Ray cluster (waited {timeout_s:g} s)"
                ) from None
            time.sleep(0.05)


PRODUCER = RayProducer
"""This backend's producer class (`sharing.endpoint.BACKENDS`)."""
CONSUMER = RayConsumer
"""This backend's consumer class (`sharing.endpoint.BACKENDS`)."""
