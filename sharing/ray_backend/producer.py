"""`RayProducer`: runs the loader once and puts each batch into Ray's object store once."""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from sharing import lifetime
from sharing.again import apart, reload_refusal, repeats, short_epoch
from sharing.args import check_int, check_stream, extends_init, signature_of_init
from sharing.layout import first_dim
from sharing.loading import epoch_iter, released
from sharing.producer import Producer
from sharing.ray_backend.common import (
    GONE_S,
    NAMESPACE,
    POLL_S,
    TELL_S,
    connect,
    default_endpoint,
    log,
    parse,
    store_nbytes,
    to_store,
)
from sharing.ray_backend.hub import RemoteHub

__all__ = ["RayProducer"]

STREAM = (
    "endpoint", "epochs", "max_lag", "replay_batches", "replay_bytes", "consumers",
    "join_grace_s",
)  # fmt: skip

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

    @extends_init(Producer, without=("device",))
    def __init__(
        self,
        loader: Iterable[Any],
        *,
        max_bytes: int | None = None,
        lease_s: float = 1.0,
        **stream: Any,
    ) -> None:
        endpoint, epochs, max_lag, replay_batches, replay_bytes, consumers, join_grace_s = (
            stream[name] for name in STREAM
        )
        check_stream(epochs, max_lag, replay_batches, replay_bytes, consumers, join_grace_s)
        check_int(max_bytes, "max_bytes", minimum=1, allow_none=True)
        if not isinstance(lease_s, (int, float)) or not 0 < lease_s < float("inf"):
            raise ValueError(f"lease_s must be > 0, got {lease_s!r}")
        self.endpoint = endpoint if endpoint is not None else default_endpoint()
        name = parse(self.endpoint)
        self.loader, self.epochs, self.log_every_s = loader, epochs, stream["log_every_s"]
        self._past = apart(loader)  # past epochs load beside the live one (`again.apart`)
        self._stop = threading.Event()
        self._finishing = threading.Event()
        self._closed = False
        self._served = threading.Event()
        self._serving: threading.Thread | None = None
        self._counters = {"produced": 0, "owed": 0}
        self._lock = threading.Lock()  # two threads may start an epoch of the loader
        self._again_failed: BaseException | None = None
        self._ops = 0
        self._cpu_start = time.process_time()
        connect()
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
            "replay_bytes": replay_bytes, "repeats": repeats(loader),
            "reload_refusal": reload_refusal(loader),
        }  # fmt: skip
        self.max_bytes = max_bytes
        here = ray.get_runtime_context().get_node_id()
        try:
            self._hub = RemoteHub.options(
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
        """Call the hub's ``name(*args)``, in this producer's order (`Hub.apply`)."""
        ref = self._hub.apply.remote(self._ops, name, *args)
        self._ops += 1
        return ref

    def _stored(self, batch: Any) -> tuple[Any, int]:
        """``batch`` as it goes into the object store, and its bytes there."""
        stored = to_store(batch)
        nbytes = store_nbytes(stored)
        if nbytes > self.max_bytes:
            raise ValueError(
                f"a batch of {nbytes} bytes exceeds max_bytes={self.max_bytes}; pass a larger "
                "max_bytes or smaller batches"
            )
        return stored, nbytes

    def _put(self, batch: Any, late: bool = False) -> bool:
        """Reserve, put and log one batch; False if stopped meanwhile."""
        stored, nbytes = self._stored(batch)
        while not ray.get(self._hub.reserve.remote(nbytes)):
            if self._stop.is_set():
                return False
        ref = ray.put(stored)
        self._op(
            "publish", {"ref": [ref], "nbytes": nbytes, "rows": first_dim(batch) or 0, "late": late}
        )
        self._counters["produced"] += 1
        return True

    def _again(self, done: threading.Event) -> None:
        """Load past batches again for the consumers that need them (a restart, a join past
        the replay window), one range at a time, until ``done``; a loader's error stops
        serving and is raised by `serve`."""
        try:
            while not (done.is_set() or self._stop.is_set()):
                work = ray.get(self._hub.again.remote(POLL_S))
                if work is not None:
                    self._load_again(*work)
        except BaseException as error:
            self._again_failed = released(error)
            self._stop.set()

    def _load_again(self, cid: int, epoch: int, start: int, stop: int) -> None:
        """Batches ``start`` to ``stop`` - 1 of ``epoch``, loaded again for consumer ``cid``."""
        index = -1
        batches = self._loaded(lambda: epoch_iter(self._past, epoch, self._lock))
        for index, batch in enumerate(batches):
            if index >= stop:
                return
            if index < start:
                continue
            (stored, nbytes), rows = self._stored(batch), first_dim(batch) or 0
            del batch
            while not (room := ray.get(self._hub.room.remote(cid))):
                if room is None or self._stop.is_set():
                    return
            ref = ray.put(stored)
            entry = {"ref": [ref], "nbytes": nbytes, "rows": rows}
            if not ray.get(self._hub.place.remote(cid, {"epoch": epoch, "index": index, **entry})):
                return
            self._counters["produced"] += 1
        if index + 1 < stop and not self._stop.is_set():
            raise short_epoch(epoch, index + 1, stop)

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
        again_done = threading.Event()
        again = threading.Thread(
            target=self._again, args=(again_done,), name="sharing-ray-again", daemon=True
        )
        again.start()
        try:
            epoch = 0
            while (self.epochs is None or epoch < self.epochs) and not self._stop.is_set():
                if self._finishing.is_set() and epoch:
                    break
                batches = self._loaded(lambda e=epoch: epoch_iter(self.loader, e, self._lock))
                for batch in batches:
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
            if self._again_failed is not None:
                raise self._again_failed
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
                again_done.set()
                again.join(timeout=5.0)
                log.info("finished: %s", self.metrics())
            finally:
                self._served.set()

    def _loaded(self, batches: Callable[[], Iterable[Any]]) -> Iterator[Any]:
        """The iterable that ``batches()`` makes, iterated in a thread of its own so that
        `stop` ends serving even while the loader is stuck in its next batch (the thread
        then ends at that batch); the loader's error is raised here."""
        handoff: queue.Queue = queue.Queue(maxsize=1)
        done = object()
        left = threading.Event()  # this iteration's reader went away

        def offer(item: Any, error: BaseException | None = None) -> bool:
            while not (self._stop.is_set() or left.is_set()):
                with contextlib.suppress(queue.Full):
                    handoff.put((item, error), timeout=POLL_S)
                    return True
            return False

        def load() -> None:
            try:
                for item in batches():
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
                    item, error = handoff.get(timeout=POLL_S)
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
        loaded = 0
        after = self.epochs or 0
        for batch in self._loaded(lambda: epoch_iter(self.loader, after, self._lock)):
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
            ray.get(self._hub.told.remote(TELL_S), timeout=TELL_S + GONE_S)
        with contextlib.suppress(Exception):
            ray.kill(self._hub)


# ---------------------------------------------------------------------- consumer
