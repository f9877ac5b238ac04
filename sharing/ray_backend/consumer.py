"""`RayConsumer`: reads a Ray producer's batches from the object store of its own node."""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import threading
import time
import weakref
from typing import Any

import ray

from sharing import lifetime, protocol
from sharing.args import check_consumer, check_state, extends_init, signature_of_init
from sharing.consumer import Consumer, _refusal_error
from sharing.errors import ProducerGone, SharingError
from sharing.ray_backend.common import (
    AHEAD,
    GONE_S,
    GRACE_S,
    NAMESPACE,
    POLL_S,
    READ_S,
    connect,
    from_store,
    parse,
)

__all__ = ["RayConsumer"]

READING = ("batch_size", "late_join", "connect_timeout_s", "timeout_s", "echo_on_stall", "state")


@signature_of_init
class RayConsumer(Consumer):
    """`Consumer` of a Ray producer; ``Consumer("ray:NAME")`` makes one, in any process of
    the cluster. Arguments and attributes are `Consumer`'s, and:

    Args:
        copy: Give each batch as private, writable tensors (a copy) instead of read-only
            views of the node's object store. Default False.
    """

    @extends_init(Consumer)
    def __init__(self, endpoint: str, *, copy: bool = False, **reading: Any) -> None:
        batch_size, late_join, connect_timeout_s, timeout_s, echo_on_stall, state = (
            reading[name] for name in READING
        )
        check_consumer(batch_size, late_join, echo_on_stall, connect_timeout_s, timeout_s)
        resume = check_state(state)
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
        connect()
        self._hub = _find_hub(name, endpoint, connect_timeout_s)
        welcome = self._call(
            self._hub.hello.remote(_hello(batch_size, late_join, resume and resume[:2]))
        )
        if welcome["type"] == "error":
            raise _refusal_error(welcome)
        self._closed = False
        self._pid = lifetime.opened(self)
        self._welcomed(welcome, state, resume)
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
        for `GONE_S` (its node is gone, and Ray has not noticed yet), is `ProducerGone`."""
        try:
            try:
                return ray.get(ref, timeout=GONE_S)
            except ray.exceptions.GetTimeoutError:
                ray.get(self._hub.metrics.remote(), timeout=GONE_S / 2)  # alive but slow?
                return ray.get(ref, timeout=GONE_S)
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
            waited += POLL_S
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
                if seq not in self._fetched and len(self._fetched) <= AHEAD:
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
            message["batch"] = from_store(stored, self.copy)
        return message

    def _batch(self, message: dict) -> Any:
        return message["batch"]

    def _read(self, fetched: concurrent.futures.Future) -> Any:
        """A batch's value, however long its transfer takes while the producer lives; a gone
        hub (checked every `READ_S`) is `ProducerGone`."""
        while True:
            try:
                return fetched.result(timeout=READ_S)
            except concurrent.futures.TimeoutError:
                self._call(self._hub.beat.remote(self.consumer_id), "a batch's transfer")

    def _ready(self) -> bool:
        """Whether the next entry is here (its batch on this node) within the grace."""
        if self._lookahead is not None or self._end is not None:
            return True
        if self._pending is None:
            self._pending = self._hub.next.remote(self.consumer_id, self._pos)
        done, _ = ray.wait([self._pending], timeout=GRACE_S)
        if not done:
            return False
        message = self._call(self._pending)
        self._pending = None
        if message["type"] == "wait":
            return False
        if message["type"] == "batch":
            ref = message["ref"][0]
            ray.wait([ref], timeout=GRACE_S, fetch_local=True)
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


def _hello(batch_size: int | None, late_join: str, resume: list[int] | None) -> dict[str, Any]:
    return {
        "version": protocol.PROTOCOL_VERSION,
        "batch_size": batch_size,
        "late_join": late_join,
        "pid": os.getpid(),
        "resume": resume,
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
