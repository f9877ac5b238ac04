"""Drop-in replacements for TensorSocket's ``TensorProducer`` and ``TensorConsumer``.

A TensorSocket script changes one import line, e.g.
``from tensorsocket.producer import TensorProducer`` becomes
``from sharing.tensorsocket import TensorProducer``, and runs on `sharing`'s `Producer` and
`Consumer`: zero-copy shared memory instead of pickled tensors over TCP, nothing listening on
a network interface. What maps:

- ``port`` names a local endpoint (an abstract Unix socket of this user, see
  `endpoint_for`); ``ack_port`` is not needed (acks travel on the same connection).
- The producer-driven loop: ``for _ in producer: ...`` hands one batch a step to the
  consumers (and yields it; TensorSocket yields None), one ``for`` loop per epoch, at most
  ``len(data_loader)`` batches each; ``producer.join()`` ends serving once the consumers have
  received every batch handed over.
- TensorSocket's start order (the producer first, its consumers later) works: the stream's
  first batch waits until the first consumer has come and no other has said hello for
  ``join_grace_s`` (3 s), so consumers started within a few seconds of each other all get
  every epoch the producer's loop runs, whole.
- ``rubber_band_pct`` sets the replay window: the first ``ceil(rubber_band_pct * len(loader))``
  batches of each epoch are kept, so a consumer joining within them gets the whole epoch;
  a later one starts at once and wraps into the next epoch, and after the loop's last epoch
  the batches its last epoch still needs are loaded from ``data_loader`` for it alone (see
  `Producer`). A consumer that joins after the first epoch gets the epochs that remain, and a
  loop after them raises `sharing.StreamEnded`.
- ``consumer_max_buffer_size`` is ``max_lag``: how far the producer may run ahead of the
  slowest consumer.
- A producer's loop with no consumer connected does not wait silently: after a second it
  logs that none is connected and what it waits for (on the ``sharing.tensorsocket``
  logger), and after ``idle_s`` (60 s) alone it ends: this loop and every later one stop at
  once, and ``join()`` returns. (TensorSocket's waits until it is killed, as when each
  consumer runs one ``for`` loop, one epoch, and exits: loop over a consumer once per
  epoch.)
- A consumer's ``batch_size`` is any size (re-cut from the producer's batches); each ``for``
  loop over it is one epoch, and ``consumer.epoch`` counts the epochs it has finished.

Arguments with no equivalent (``producer_batch_size``, ``pack_fn``, ``unpack_fn``,
``heart_ports``) are accepted with a one-time warning saying what happens instead.
"""

from __future__ import annotations

import logging
import math
import os
import queue
import threading
import time
import warnings
from collections.abc import Iterator
from typing import Any

import torch

from sharing.args import check_int, check_seconds
from sharing.consumer import Consumer
from sharing.errors import SharingError
from sharing.loading import length
from sharing.producer import Producer

__all__ = ["TensorConsumer", "TensorProducer", "endpoint_for"]


class _Unset:
    """The default of an argument that is accepted and ignored (shown so by ``help``)."""

    def __repr__(self) -> str:
        return "ignored"


_UNSET: Any = _Unset()
log = logging.getLogger("sharing.tensorsocket")
_TELL_AFTER_S = 1.0  # alone this long, the loop says what it waits for
_END = object()
_warned: set[str] = set()

_INSTEAD = {
    "producer_batch_size": "batches are served as the loader makes them; consumers re-cut them "
    "to their own batch_size",
    "pack_fn": "batches are shared as they are, through shared memory (no packing)",
    "unpack_fn": "batches arrive as the producer's loader made them, as zero-copy views",
    "heart_ports": "no heartbeat is needed: a consumer's death is seen from its socket and pid, "
    "and a dead producer makes consumers raise ProducerGone",
}


def endpoint_for(port: int | str) -> str:
    """The local endpoint a TensorSocket ``port`` maps to (abstract, named by user and port)."""
    return f"unix:@tensorsocket-{os.getuid()}-{port}"


def _warn_unsupported(**given: Any) -> None:
    for name, value in given.items():
        if value is not _UNSET and name not in _warned:
            _warned.add(name)
            warnings.warn(
                f"sharing.tensorsocket: {name} has no equivalent and is ignored: {_INSTEAD[name]}",
                UserWarning,
                stacklevel=3,
            )


class _Handoff:
    """The loader the `Producer` iterates: per epoch, the batches the user's loop hands
    over, until the loop marks the epoch's end. After the user's last epoch, the batches that
    wrapped late joiners still need come from the user's loader itself
    (``completion_loader``)."""

    def __init__(self, batches: int | None, completion_loader: Any) -> None:
        self._batches = batches
        self.completion_loader = completion_loader
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=1)
        self.closed = threading.Event()

    def __len__(self) -> int:
        if self._batches is None:
            raise TypeError("the loader has no length")
        return self._batches

    def __iter__(self) -> Iterator[Any]:
        while not self.closed.is_set():
            try:
                item = self._queue.get(timeout=0.1)
            except queue.Empty:
                continue
            if item is _END:
                return
            yield item

    def put(self, item: Any, serving: threading.Thread) -> None:
        while not self.offer(item) and serving.is_alive():
            pass

    def offer(self, item: Any) -> bool:
        """Hand ``item`` over if the producer takes it within 0.1 s."""
        try:
            self._queue.put(item, timeout=0.1)
        except queue.Full:
            return False
        return True


class TensorProducer:
    """TensorSocket's producer on a `sharing.Producer`: iterate it to serve ``data_loader``.

    Args:
        data_loader: The loader to share (a DataLoader, or any re-iterable of batches; with
            a length, each epoch stops after ``len(data_loader)`` batches).
        port: Names the endpoint (`endpoint_for`). Default 5555.
        ack_port: Not needed; accepted for compatibility. Default 5556.
        heart_ports: Ignored, with a warning. Default (4444, 4445).
        rubber_band_pct: Fraction of an epoch's batches kept for late joiners (the first
            ones). Default 0.005.
        pack_fn: Ignored, with a warning.
        consumer_max_buffer_size: Most batches ahead of the slowest consumer. Default 10.
        producer_batch_size: Ignored, with a warning.
        device: Where batches are shared from: "auto" (default, as TensorSocket: the GPU
            when one is present, else CPU shared memory), "cuda", "cpu" or None (as given).
            "auto" counts GPUs as ``torch.cuda.device_count()`` does, through NVML, which
            leaves CUDA uninitialised: consumers may still be forked from this process
            afterwards. (Where NVML cannot count them it falls back to CUDA's own count,
            which initialises CUDA, as ``torch.cuda.is_available()`` always does.)
        join_grace_s: See `Producer`. Default 3.
        idle_s: Seconds the loop waits with no consumer connected before it ends (this
            loop and every later one stop at once). Default 60.

    Raises:
        ValueError: A bad argument (the message names it).
    """

    def __init__(
        self,
        data_loader: Any,
        port: int | str = 5555,
        ack_port: int | str = 5556,
        heart_ports: tuple[int, int] = _UNSET,
        rubber_band_pct: float = 0.005,
        pack_fn: Any = _UNSET,
        consumer_max_buffer_size: int = 10,
        producer_batch_size: int = _UNSET,
        *,
        device: str | None = "auto",
        join_grace_s: float = 3.0,
        idle_s: float = 60.0,
    ) -> None:
        _warn_unsupported(
            heart_ports=heart_ports, pack_fn=pack_fn, producer_batch_size=producer_batch_size
        )
        check_int(consumer_max_buffer_size, "consumer_max_buffer_size", minimum=1)
        check_seconds(idle_s, "idle_s")
        if not isinstance(rubber_band_pct, (int, float)) or not 0 <= rubber_band_pct <= 1:
            raise ValueError(f"rubber_band_pct must be in [0, 1], got {rubber_band_pct!r}")
        if device == "auto":
            device = "cuda" if torch.cuda.device_count() > 0 else None
        self.data_loader, self.port, self.ack_port = data_loader, port, ack_port
        self.epoch, self.idle_s = 0, idle_s
        self._idle = False  # ended after idle_s with no consumer
        self._batches = length(data_loader)
        replay = None if self._batches is None else math.ceil(rubber_band_pct * self._batches)
        self._handoff = _Handoff(self._batches, data_loader)
        self._producer = Producer(
            self._handoff, endpoint=endpoint_for(port), epochs=None,
            max_lag=consumer_max_buffer_size, replay_batches=replay, device=device,
            join_grace_s=join_grace_s,
        )  # fmt: skip
        self._error: BaseException | None = None
        self._serving = threading.Thread(target=self._serve, name="sharing-serve", daemon=True)
        self._serving.start()
        self._iterator: Iterator[Any] | None = None
        self._index = 0
        self._joined = False

    @property
    def endpoint(self) -> str:
        """Where consumers connect."""
        return self._producer.endpoint

    def _serve(self) -> None:
        try:
            self._producer.serve()
        except BaseException as error:  # raised in the user's thread by the next step
            self._error = error

    def _check(self) -> None:
        if not self._serving.is_alive():
            if self._error is not None:
                raise SharingError(f"the producer failed: {self._error!r}") from self._error
            raise SharingError("the producer has stopped serving")

    def __len__(self) -> int:
        """Batches per epoch (``len(data_loader)``)."""
        return len(self.data_loader)

    def __iter__(self) -> TensorProducer:
        if self._iterator is None:
            self._iterator, self._index = iter(self.data_loader), 0
        return self

    def __next__(self) -> Any:
        """Hand the next batch to the consumers (waiting while they are too far behind, or
        while none is connected, at most ``idle_s``) and return it; StopIteration at the
        epoch's end, or once no consumer has been connected for ``idle_s``."""
        if self._idle:
            raise StopIteration
        self._check()
        if self._iterator is None:
            self.__iter__()
        assert self._iterator is not None
        batch = _END
        if self._batches is None or self._index < self._batches:
            batch = next(self._iterator, _END)
        if not self._hand_over(batch):
            raise StopIteration
        if batch is _END:
            self._iterator = None
            self.epoch += 1
            raise StopIteration
        self._index += 1
        return batch

    def _hand_over(self, item: Any) -> bool:
        """Hand ``item`` to the producer; False (serving stopped) once no consumer has been
        connected for ``idle_s``, which it logs."""
        alone_since, told = None, False
        while not self._handoff.offer(item):
            if not self._serving.is_alive():
                return True  # the next step raises why
            if self._producer.connected():
                alone_since, told = None, False
                continue
            now = time.monotonic()
            alone_since = alone_since or now
            where = f"batch {self._index} of epoch {self.epoch}"
            if not told and now - alone_since >= _TELL_AFTER_S:
                log.warning(
                    "no consumer is connected to %s: %s waits for one (ending after idle_s="
                    "%g s alone)", self.endpoint, where, self.idle_s,
                )  # fmt: skip
                told = True
            if now - alone_since >= self.idle_s:
                log.warning(
                    "no consumer connected to %s for idle_s=%g s: the producer's loop ends at "
                    "%s (each consumer loops over its epochs: for epoch in range(E): for batch "
                    "in consumer: ...)", self.endpoint, self.idle_s, where,
                )  # fmt: skip
                self._idle = True
                self._producer.stop()
                return False
        return True

    def join(self, grace_s: float = 1.0) -> None:
        """End serving: consumers receive every batch handed over, then the stream's end;
        returns once they have (or once none has been connected for ``grace_s``)."""
        if self._joined:
            return
        self._joined = True
        self._producer.finish()
        self._handoff.put(_END, self._serving)  # ends an epoch in progress, or the next
        alone_since = None
        while self._serving.is_alive():
            self._serving.join(0.1)
            if self._producer.connected():
                alone_since = None
            elif alone_since is None:
                alone_since = time.monotonic()
            elif time.monotonic() - alone_since > grace_s:
                self._producer.stop()
        self._handoff.closed.set()
        self._producer.close()
        if self._error is not None:
            raise SharingError(f"the producer failed: {self._error!r}") from self._error


class TensorConsumer:
    """TensorSocket's consumer on a `sharing.Consumer`: one ``for`` loop per epoch.

    Args:
        port: The producer's port (`endpoint_for`). Default 5555.
        ack_port: Not needed; accepted for compatibility. Default 5556.
        heart_ports: Ignored, with a warning. Default (4444, 4445).
        unpack_fn: Ignored, with a warning.
        batch_size: Examples per batch, any size >= 1 (re-cut from the producer's batches;
            each epoch ends with what is left). Default 64.
        connect_timeout_s: How long to wait for the producer to appear. Default None:
            wait, as TensorSocket does.
        timeout_s: See `Consumer`. Default None.
        state: A `state_dict` saved by this consumer's earlier life: resume there (see
            `Consumer`). Default None.

    Attributes:
        epoch: Epochs this consumer has finished (0 during its first).

    Raises:
        ValueError: A bad argument.
    """

    def __init__(
        self,
        port: int | str = 5555,
        ack_port: int | str = 5556,
        heart_ports: tuple[int, int] = _UNSET,
        unpack_fn: Any = _UNSET,
        batch_size: int = 64,
        *,
        connect_timeout_s: float | None = None,
        timeout_s: float | None = None,
        state: dict[str, Any] | None = None,
    ) -> None:
        _warn_unsupported(heart_ports=heart_ports, unpack_fn=unpack_fn)
        self.port, self.ack_port, self.batch_size = port, ack_port, batch_size
        self._consumer = Consumer(
            endpoint_for(port), batch_size=batch_size, timeout_s=timeout_s,
            connect_timeout_s=math.inf if connect_timeout_s is None else connect_timeout_s,
            state=state,
        )  # fmt: skip
        self.epoch = self._consumer.epochs_done
        self.consumer_id = self._consumer.consumer_id
        self._iterator: Iterator[Any] | None = None

    def __len__(self) -> int:
        """Batches per epoch, where known (see `Consumer`)."""
        return len(self._consumer)

    def __iter__(self) -> TensorConsumer:
        if self._iterator is None:
            self._iterator = iter(self._consumer)
        return self

    def __next__(self) -> Any:
        """The next batch of this epoch; StopIteration at its end."""
        if self._iterator is None:
            self.__iter__()
        assert self._iterator is not None
        try:
            return next(self._iterator)
        except StopIteration:
            self._iterator = None
            self.epoch += 1
            raise

    def state_dict(self) -> dict[str, Any]:
        """Where this consumer stands, to keep in a checkpoint (`Consumer.state_dict`)."""
        return self._consumer.state_dict()

    def leave(self) -> None:
        """Leave the producer (also done when the object is garbage-collected)."""
        self._consumer.leave()
