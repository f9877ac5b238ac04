"""A DataLoader's workers collating straight into the producer's recycled segments
(`SegmentLender`), so that ``Producer(DataLoader(...))`` copies no batch in its own process.

Alone, a DataLoader worker stacks each batch into a fresh /dev/shm file and the main process
maps it. Under a producer, `sharing.copied.SegmentCopier` then copies that batch into a
recycled memfd segment, so that nothing the consumers' window holds sits in /dev/shm: one
pass over the batch's bytes in the producer's process, which on a busy machine is the whole
difference between serving and not serving as fast as an own loader.

While a producer serves a DataLoader, the loader's ``collate_fn`` is wrapped
(`LendingCollate`). In a worker, the wrapper asks the producer's lender for a segment (a
lease: the segment's id, and its descriptor the first time this worker is lent it), writes
the batch into it (``default_collate``'s stacking is done straight into the segment, a
``collate_fn`` of the user's own is called and its batch copied in, in the worker), and
returns only a small `Lent` record, which the DataLoader passes on as usual. The producer
turns it into the batch in that segment (`SegmentLender.adopt`): no copy, and the worker's
segment is the consumers' segment. With ``num_workers=0`` the same happens in the thread
that iterates the loader.

Leases that no batch will ever arrive for go back to the pool: those of a worker that has
exited (an iteration abandoned mid-epoch shuts its workers down; a killed worker), those
whose batches the producer skips (`SegmentLender.drop`), and those whose batches a
DataLoader with persistent workers drops when it starts a new iteration
(`SegmentLender.begin`).

The lender listens on an abstract unix socket that only the producer's own descendants of
the same user may use (its DataLoader workers, or a forkserver's; checked by
``SO_PEERCRED``); a message it cannot parse costs its sender the connection and the
segments lent to it.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import selectors
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from torch.utils.data import get_worker_info
from torch.utils.data._utils.collate import default_collate

from sharing.collate import collate_into, copy_into
from sharing.endpoint import parent_pid, peer_credentials
from sharing.pooled import PooledBatch
from sharing.segments import Mappings, SegmentPool

__all__ = ["IterationLock", "LendingCollate", "Lent", "SegmentLender"]

_MAX_MESSAGE = 256  # a lease request or answer, as JSON
_LOCAL: dict[str, SegmentLender] = {}  # this process's lenders, by address (num_workers=0)


class Lent(NamedTuple):
    """A batch that a worker collated into lent segment ``segment`` under lease ``lease`` of
    the lender at ``lender``: its layout (every tensor in storage 0) and the bytes it uses.
    What the wrapped ``collate_fn`` returns in place of the batch; unpickled in the
    producer's process, it tells its lender that it arrived (`SegmentLender.begin`)."""

    segment: int
    lease: int
    layout: dict
    nbytes: int
    lender: str

    def __reduce__(self) -> tuple:
        return _arrived, tuple(self)


def _arrived(*fields: Any) -> Lent:
    """A `Lent` record unpickled in the producer's process (a DataLoader's result queue):
    noted by its lender (`SegmentLender.begin`)."""
    lent = Lent(*fields)
    lender = _LOCAL.get(lent.lender)
    if lender is not None:
        lender.arrived(lent.lease)
    return lent


def _send(sock: socket.socket, message: dict, fds: list[int] | None = None) -> None:
    body = json.dumps(message, separators=(",", ":")).encode()
    socket.send_fds(sock, [body], fds) if fds else sock.sendall(body)


def _descends_from_us(pid: int, generations: int = 4) -> bool:
    """Whether process ``pid`` is this process's child, or a child's child (a forkserver's
    workers), at most ``generations`` down."""
    for _ in range(generations):
        parent = parent_pid(pid)
        if parent == os.getpid():
            return True
        if parent is None or parent <= 1:
            return False
        pid = parent
    return False


class _NoLender(Exception):
    """The producer's lender cannot be reached (it has closed, or refused this process)."""


def _forget_lenders_in_child() -> None:
    """In a forked child (a DataLoader worker): close its copies of every lender's sockets.
    A child that kept one would keep the lender's address, or a worker's connection, open
    after the producer had closed them, and a worker would wait for an answer forever."""
    for lender in list(_LOCAL.values()):
        for sock in (lender._listener, lender._wake_r, lender._wake_w, *list(lender._borrowers)):
            with contextlib.suppress(OSError):
                sock.close()
    _LOCAL.clear()


os.register_at_fork(after_in_child=_forget_lenders_in_child)


class _Borrower:
    """A connected worker: its process id and the segments whose descriptors it was sent."""

    def __init__(self, sock: socket.socket, pid: int) -> None:
        self.sock, self.pid = sock, pid
        self.sent: set[int] = set()


class SegmentLender:
    """Lends ``pool``'s segments to the workers of the loaders it wraps (`wrap`), and takes
    each lease back when its batch arrives (`adopt`) or never will.

    Args:
        pool: The producer's segments, also released to by the serving loop.

    Attributes:
        address: The abstract socket the workers connect to.
        lent: Batches collated into lent segments so far.
    """

    def __init__(self, pool: SegmentPool) -> None:
        self.pool = pool
        self.address = f"\0sharing-lend-{os.getpid()}-{secrets.token_hex(8)}"
        self.lent = 0
        self._lock = threading.Lock()
        self._leases: dict[int, int] = {}  # open lease -> segment id
        self._next = 0  # the next lease's number
        self._here = Mappings()  # num_workers=0: the iterating thread's own mappings
        self._here_lock = threading.Lock()
        self._arrived: set[int] = set()  # open leases whose batch reached this process
        self._borrower_of: dict[int, _Borrower] = {}  # open lease -> the worker lent it
        self._wrapped: list[tuple[Any, Any]] = []  # (loader, its own collate_fn)
        self._borrowers: dict[socket.socket, _Borrower] = {}  # by connection
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._listener.bind(self.address)
        self._listener.listen(64)
        self._listener.setblocking(False)
        self._wake_r, self._wake_w = socket.socketpair()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="sharing-lender", daemon=True)
        self._thread.start()
        _LOCAL[self.address] = self

    # ------------------------------------------------------------------ the producer's side

    def wrap(self, loader: Any) -> None:
        """Make ``loader`` (a DataLoader) collate into lent segments until `close`.

        Not done (its batches are copied, as any loader's) for persistent workers that were
        started before, which keep the ``collate_fn`` they were started with, nor for
        persistent workers with ``pin_memory``, whose pinning thread may receive a new
        iteration's batches before `begin` has told them from the dropped ones."""
        persistent = getattr(loader, "persistent_workers", False)
        if persistent and (loader.pin_memory or getattr(loader, "_iterator", None)):
            return
        own = loader.collate_fn
        loader.collate_fn = LendingCollate(own, self.address)
        self._wrapped.append((loader, own))

    def iteration_lock(self) -> IterationLock:
        """The lock under which a wrapped loader's iterations start
        (`sharing.loading.epoch_iter`), and start through `begin`."""
        return IterationLock(self)

    def begin(self, loader: Any) -> Any:
        """``iter(loader)``. For a DataLoader with persistent workers, the leases of every
        batch that reached this process and was not adopted are then given back: to start
        a new iteration, such a DataLoader runs its last iteration's tasks to their end and
        drops their batches, and those it had received out of order, all in the call."""
        batches = iter(loader)
        if getattr(loader, "persistent_workers", False) and loader.num_workers > 0:
            workers = {worker.pid for worker in getattr(batches, "_workers", ())}
            with self._lock:  # of this loader's workers only: another may run beside it
                dropped = [n for n in self._arrived if n in self._borrower_of
                           and self._borrower_of[n].pid in workers]  # fmt: skip
            self._take_back(dropped)
        return batches

    def arrived(self, lease: int) -> None:
        """The batch of ``lease`` reached this process (`begin` reads it)."""
        with self._lock:
            if lease in self._leases:
                self._arrived.add(lease)

    def adopt(self, batch: Any) -> Any:
        """``batch`` as the producer serves it: a `Lent` record becomes the batch in its
        segment (`sharing.pooled.PooledBatch`); anything else is returned as it is.

        Raises:
            RuntimeError: The lease was taken back before the batch arrived (its worker
                exited), or the record does not match its segment.
        """
        if not isinstance(batch, Lent):
            return batch
        with self._lock:
            sid = self._leases.pop(batch.lease, None)
            self._arrived.discard(batch.lease)
            self._borrower_of.pop(batch.lease, None)
        if sid is None or sid != batch.segment:
            raise RuntimeError(
                f"a DataLoader worker's batch in segment {batch.segment} arrived after its "
                f"lease {batch.lease} was taken back (its worker had exited)"
            )
        self.pool.resized(sid)
        if not 0 <= batch.nbytes <= self.pool[sid].size or not isinstance(batch.layout, dict):
            self.pool.release(sid)
            raise RuntimeError(f"a DataLoader worker's batch does not fit its segment {sid}")
        self.lent += 1
        return PooledBatch(sid, batch.layout, batch.nbytes)

    def drop(self, batch: Any) -> None:
        """Give back the lease of a `Lent` batch that will not be served (others: nothing)."""
        if isinstance(batch, Lent):
            self._take_back([batch.lease])

    def close(self) -> None:
        """Stop lending and restore the wrapped loaders' ``collate_fn`` (idempotent)."""
        if self._closed.is_set():
            return
        self._closed.set()
        _LOCAL.pop(self.address, None)
        for loader, own in self._wrapped:
            with contextlib.suppress(Exception):
                loader.collate_fn = own
        self._wrapped.clear()
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)
        self._here = Mappings()

    # ------------------------------------------------------------------ leases

    def _grant(self, borrower: _Borrower | None = None) -> tuple[int, int, int]:
        """A new lease for ``borrower`` (None: this process): (lease, segment id, the
        segment's descriptor)."""
        segment = self.pool.acquire()
        with self._lock:
            lease, self._next = self._next, self._next + 1
            self._leases[lease] = segment.sid
            if borrower is not None:
                self._borrower_of[lease] = borrower
        return lease, segment.sid, segment.fd

    def _take_back(self, leases: Any) -> None:
        with self._lock:
            sids = [self._leases.pop(lease) for lease in leases if lease in self._leases]
            self._arrived.difference_update(leases)
            for lease in leases:
                self._borrower_of.pop(lease, None)
        for sid in sids:
            self.pool.release(sid)

    def lease_here(self, size: int) -> tuple[int, int, Any]:
        """A lease for a batch of ``size`` bytes collated in this process (num_workers=0):
        (lease, segment id, a writable mapping of the segment)."""
        lease, sid, fd = self._grant()
        with self._here_lock:
            if self._here.fds.get(sid) != fd:  # as `sharing.pooled.into_segment` does
                self._here.give(sid, fd)
            return lease, sid, self._here.buffer(sid, size)

    # ------------------------------------------------------------------ the lending thread

    def _serve(self) -> None:
        try:
            while not self._closed.is_set():
                for key, _ in self._selector.select(timeout=1.0):
                    if key.fileobj is self._listener:
                        self._accept()
                    elif key.fileobj is not self._wake_r:
                        self._answer(self._borrowers[key.fileobj])
        finally:
            for borrower in list(self._borrowers.values()):
                self._leave(borrower)
            self._selector.close()
            for sock in (self._listener, self._wake_r, self._wake_w):
                sock.close()

    def _accept(self) -> None:
        try:
            sock, _ = self._listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        pid, uid, _ = peer_credentials(sock)
        if uid != os.getuid() or not _descends_from_us(pid):
            sock.close()  # only this process's own workers borrow
            return
        self._borrowers[sock] = _Borrower(sock, pid)
        self._selector.register(sock, selectors.EVENT_READ)

    def _answer(self, borrower: _Borrower) -> None:
        try:
            body = borrower.sock.recv(_MAX_MESSAGE + 1)
            message = json.loads(body) if 0 < len(body) <= _MAX_MESSAGE else None
            if not isinstance(message, dict):
                raise ValueError("not a lender message")
            if "release" in message:
                lease = message["release"]
                if isinstance(lease, int) and self._borrower_of.get(lease) is borrower:
                    self._take_back([lease])
                return
            if message != {"lease": True}:
                raise ValueError("not a lender message")
            lease, sid, fd = self._grant(borrower)
            first = sid not in borrower.sent
            borrower.sent.add(sid)
            _send(borrower.sock, {"lease": lease, "segment": sid}, [fd] if first else None)
        except (OSError, ValueError, TypeError, RuntimeError):
            self._leave(borrower)

    def _leave(self, borrower: _Borrower) -> None:
        """A worker is gone (or misbehaved): no batch will come under its open leases."""
        self._borrowers.pop(borrower.sock, None)
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(borrower.sock)
        borrower.sock.close()
        with self._lock:
            leases = [n for n, lent_to in self._borrower_of.items() if lent_to is borrower]
        self._take_back(leases)


class IterationLock:
    """A lock for `sharing.loading.epoch_iter` whose ``begin`` is `SegmentLender.begin`."""

    def __init__(self, lender: SegmentLender) -> None:
        self._lock = threading.Lock()
        self.begin = lender.begin

    def __enter__(self) -> IterationLock:
        self._lock.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


class _Client:
    """A worker's connection to the producer's lender, and its mappings of lent segments."""

    def __init__(self, address: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.sock.connect(address)
        except OSError as error:
            self.sock.close()
            raise _NoLender(str(error)) from error
        self.mapped = Mappings()

    def lease(self, size: int) -> tuple[int, int, Any]:
        """(lease, segment id, a writable mapping of the segment, at least ``size``
        bytes)."""
        try:
            _send(self.sock, {"lease": True})
            body, fds, _, _ = socket.recv_fds(self.sock, _MAX_MESSAGE, 1)
        except OSError as error:
            raise _NoLender(str(error)) from error
        if not body:
            raise _NoLender("the producer's lender closed the connection")
        answer = json.loads(body)
        sid = answer["segment"]
        if fds:
            self.mapped.give(sid, fds[0])
        return answer["lease"], sid, self.mapped.buffer(sid, size)

    def give_back(self, lease: int) -> None:
        with contextlib.suppress(OSError):
            _send(self.sock, {"release": lease})


_CLIENTS: dict[tuple[int, str], _Client] = {}  # (pid, address): a worker's connection
_PARENT: dict[int, int] = {}  # pid: its parent when it first collated (a worker's producer)


def _own_way(address: str) -> None:
    """No lender answered at ``address``: whether this process may make the batch the
    loader's own way (its producer has closed and it lives on, a persistent worker), or must
    stop (its producer's process is gone: a batch in /dev/shm would only be left behind).

    Raises:
        RuntimeError: The producer's process has exited.
    """
    _CLIENTS.pop((os.getpid(), address), None)
    parent = _PARENT.get(os.getpid())
    if parent is not None and get_worker_info() is not None:
        time.sleep(0.1)  # a killed parent closes its sockets before its children are moved
        if os.getppid() != parent:
            raise RuntimeError("the producer's process has exited; this worker stops")


def _lease_for(address: str) -> tuple[Callable[[int], tuple[int, int, Any]], Callable[[int], None]]:
    """How this process leases from the lender at ``address``: (lease, give back).

    Raises:
        _NoLender: The lender has closed (a persistent worker outlives its producer), or
            does not lend to this process.
    """
    if get_worker_info() is None:  # the producer's own thread (num_workers=0)
        lender = _LOCAL.get(address)
        if lender is None:
            raise _NoLender("the producer has closed")
        return lender.lease_here, lambda lease: lender._take_back([lease])
    key = (os.getpid(), address)
    _PARENT.setdefault(os.getpid(), os.getppid())
    if key not in _CLIENTS:  # a forked worker's inherited connections are its parent's
        _CLIENTS[key] = _Client(address)
    client = _CLIENTS[key]
    return client.lease, client.give_back


def _as_default_collate(layout: dict, in_sequence: bool = False) -> dict:
    """``layout`` (of `sharing.collate.collate_into`'s stacking) as ``default_collate``
    builds the batch: a sequence sample's fields in a list, strings in a tuple when they are
    a sequence's field (``zip`` makes them one) and in a list elsewhere."""
    kind, items = layout["t"], layout.get("items")
    if kind in ("tuple", "list") and items and all(item["t"] == "value" for item in items):
        return {"t": "tuple" if in_sequence else "list", "items": items}  # strings
    if kind in ("tuple", "list"):
        return {"t": "list", "items": [_as_default_collate(item, True) for item in items]}
    if kind == "dict":
        return {"t": "dict", "items": [[k, _as_default_collate(v)] for k, v in items]}
    return layout


class LendingCollate:
    """A DataLoader's ``collate_fn`` under a producer: collates into a lent segment and
    returns a `Lent` record. A batch that cannot be shared, or one made where no lender
    answers (a persistent worker that outlived its producer), is the loader's own.

    Args:
        inner: The loader's own ``collate_fn`` (``default_collate``'s stacking is done
            straight into the segment; any other's batch is copied into it).
        address: The producer's `SegmentLender.address`.
    """

    def __init__(self, inner: Callable[[Any], Any], address: str) -> None:
        self.inner, self.address = inner, address

    def __call__(self, samples: Any) -> Any:
        try:
            lease_fn, give_back = _lease_for(self.address)
        except _NoLender:
            _own_way(self.address)
            return self.inner(samples)
        held: list[tuple[int, int]] = []  # (lease, segment id)

        def buffer(size: int) -> Any:
            lease, sid, memory = lease_fn(size)
            held.append((lease, sid))
            return memory

        stacked = self.inner is default_collate and isinstance(samples, list) and samples
        batch = None if stacked else self.inner(samples)
        try:
            if stacked:
                layout, used = collate_into(samples, None, buffer)
                layout = _as_default_collate(layout)
            else:
                layout, used = copy_into(batch, buffer)
        except BaseException as error:
            for lease, _ in held:
                give_back(lease)
            if isinstance(error, _NoLender):
                _own_way(self.address)
            elif not isinstance(error, TypeError):  # TypeError: not stackable or shareable
                raise
            held.clear()
        if not held:  # the loader's own batch (or nothing but values: no segment needed)
            return self.inner(samples) if stacked else batch
        ((lease, sid),) = held
        return Lent(sid, lease, layout, used, self.address)
