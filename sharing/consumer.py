"""`Consumer`: a drop-in iterable of the batches a `Producer` serves."""

from __future__ import annotations

import contextlib
import os
import select
import threading
from collections.abc import Iterator
from typing import Any

from sharing import cuda_share, lifetime, protocol
from sharing import endpoint as endpoints
from sharing.args import check_consumer, check_state, signature_of_init
from sharing.errors import LateJoinError, ProducerGone, ProtocolError, SharingError, StreamEnded
from sharing.layout import first_dim, map_storages, map_tensors, rebuild
from sharing.recut import recut
from sharing.segment_views import SegmentViews

__all__ = ["Consumer"]

_POLL_S = 0.25
_GRACE_S = 1e-4  # how long a stall must last before a batch is echoed (EchoOnStall's)


@signature_of_init
class Consumer:
    """Receive a producer's batches; each ``for`` loop over the consumer is one epoch.

    A loop never ends short without an exception, and never comes back empty: a loop after
    the stream's last epoch raises `StreamEnded`, naming the epochs served. To run as many
    epochs as the producer serves, loop over `epochs`.

    Batches are zero-copy, copy-on-write views of the producer's shared memory: reading costs
    no copy, and modifying a batch in place changes only this consumer's pages. A batch's
    memory is never reused while this process holds it, so tensors may be kept as long as
    needed; the producer is told the batch is done when the loop asks for the next one (and,
    for a producer's recycled segments, that its memory is free once no tensor of it is left).
    A CUDA batch (``Producer(device="cuda")``) comes with CUDA IPC references of this
    consumer's own, which torch lowers once no tensor of it is left in this process and the
    work queued on its current stream has run; `leave` lowers those of batches never opened.
    Its tensors last as long as the producer's process: leave before the producer exits.

    Args:
        endpoint: The producer's endpoint (``Producer.endpoint``); ``ray:NAME`` makes a
            `sharing.ray_backend.RayConsumer` (read-only batches from Ray's object store,
            in any process of the cluster; it also takes ``copy``).
        batch_size: Examples per batch for this consumer: None (the producer's) or any
            size >= 1. Producer batches are re-cut: a consumer batch inside one producer
            batch is a view of it (so a divisor of the producer's batch size costs no copy),
            one that spans two is concatenated (a copy). Each epoch ends with what is left
            (the tail).
        late_join: What to do when joining mid-epoch. "auto" (default): replay the missed
            batches when the producer still holds them, else start at once with an epoch
            that holds exactly the producer's samples: one that wraps into the producer's
            next epoch when every epoch is the same, else the missed batches loaded again
            (a loader whose ``set_epoch`` fixes its order); an unseeded shuffle cannot give
            them again, and raises `LateJoinError`. "replay": replay or raise
            `LateJoinError`. "next_epoch": wait for the next epoch.
        connect_timeout_s: Seconds (> 0) to wait for the producer's socket. Default 10.
        echo_on_stall: Most uses of one fresh batch: while the producer's next batch is not
            ready (after 0.1 ms), the latest is given again, so that a consumer faster than
            the producer (or held back by a slower consumer's ``max_lag``) trains instead of
            waiting; `EchoOnStall`'s rule, on the producer's batches (re-cut afterwards).
            Fresh and echoed counts are exact (``fresh_examples``, ``echoed_examples``,
            ``last_was_echo``). Default 1: never echo.
        timeout_s: Raise `TimeoutError` if no message arrives for this long (> 0) while the
            producer is alive, the welcome included (it comes once the producer's first
            batch exists, which a cold loader may take long to make). Default None: wait as
            long as the producer lives (a dead producer is detected in < 1 s).
        state: A `state_dict` this consumer's earlier life saved (with the model in its
            checkpoint): the restarted consumer receives exactly the examples that one had
            not been given, then the rest of the stream (mode "resume"). Default None: a
            new consumer.

    Attributes:
        consumer_id: Id the producer gave this consumer.
        mode: How it joined: "start", "replay", "reload", "wrap", "next_epoch" or "resume".
        epoch: Producer epoch of the latest batch; for a wrapped consumer, the producer
            epoch its current epoch began in (the batches it wraps onto are the next one's,
            or, after the last, loaded again for it).
        epochs_done: This consumer's epochs received whole (loops that ended at an epoch's
            end).
        fresh_examples: Examples received from the producer and given to the loop.
        echoed_examples: Examples given again by ``echo_on_stall``.
        last_was_echo: Whether the latest producer batch given was an echo.

    Raises:
        ValueError: A bad argument, also one the producer rejects (e.g. ``batch_size``).
        ConnectionError: No producer at ``endpoint``.
        TimeoutError: No welcome within ``timeout_s``; (while iterating) no batch within it.
        LateJoinError: The missed batches are gone and ``late_join="replay"``, or no later
            epoch follows to make this consumer's first epoch whole; or, resuming, the
            batches it needs are gone and the loader cannot give them again.
        ProducerGone: (while iterating) the producer died before the stream ended.
        StreamEnded: (while iterating) a loop began after the stream's last epoch.
        SharingError: (while iterating) the stream ended in the middle of an epoch (the
            producer was stopped, or its loader failed), which would otherwise end a ``for``
            loop short.
    """

    def __new__(cls, endpoint: str, *args: Any, **kwargs: Any) -> Consumer:
        # ``ray:NAME``: the Ray backend's consumer (its __init__ then runs with these args)
        backend = endpoints.backend_class(endpoint, "CONSUMER")
        return object.__new__(backend if cls is Consumer and backend is not None else cls)

    def __init__(
        self,
        endpoint: str,
        *,
        batch_size: int | None = None,
        late_join: str = "auto",
        connect_timeout_s: float = 10.0,
        timeout_s: float | None = None,
        echo_on_stall: int = 1,
        state: dict[str, Any] | None = None,
    ) -> None:
        check_consumer(batch_size, late_join, echo_on_stall, connect_timeout_s, timeout_s)
        resume = check_state(state)
        endpoints.parse(endpoint)
        self.endpoint, self.batch_size, self.timeout_s = endpoint, batch_size, timeout_s
        self.echo_on_stall = echo_on_stall
        self.fresh_examples = self.echoed_examples = 0
        self.last_was_echo = False
        self._end: dict | None = None  # the stream's end message, once received
        self._lookahead: dict | None = None  # a message read ahead by `epochs`
        self.epochs_done = 0
        self._closed = True  # until connected
        self._cuda = False  # whether a CUDA batch has come (its leave then waits, see leave)
        self._held: set[int] = set()
        self._early: set[int] = set()  # pooled batches freed before they were released
        # Sends come from the loop and from finalizers (which may run inside a send: reentrant)
        self._lock = threading.RLock()
        self._segments = SegmentViews(self._free)
        self._sock = endpoints.connect(endpoint, connect_timeout_s)
        self._closed = False
        self._pid = lifetime.opened(self)
        try:
            self._producer_pid, uid, _ = endpoints.peer_credentials(self._sock)
            if uid != os.getuid():
                raise ConnectionError(f"the process at {endpoint} runs as another user ({uid})")
            protocol.send(
                self._sock, "hello", version=protocol.PROTOCOL_VERSION, batch_size=batch_size,
                late_join=late_join, pid=os.getpid(), resume=resume and resume[:2],
            )  # fmt: skip
            self._sock.settimeout(_POLL_S)
            welcome = self._next_message("the welcome (sent once its first batch exists)")
            if welcome["type"] != "welcome" or welcome["mode"] not in protocol.JOIN_MODES:
                raise ProtocolError(f"expected a welcome, got {protocol.short(welcome)}")
        except BaseException:
            self._sock.close()
            self._closed = True
            raise
        self._welcomed(welcome, state, resume)

    def _welcomed(
        self, welcome: dict[str, Any], state: dict[str, Any] | None, resume: list[int] | None
    ) -> None:
        """Take the producer's ``welcome``, and start counting this consumer's position, from
        ``state`` if it resumes (`sharing.args.check_state` gave ``resume``)."""
        self.consumer_id = welcome["consumer_id"]
        self.mode = welcome["mode"]
        self.epoch = welcome["epoch"]
        self._batches_per_epoch = welcome["batches_per_epoch"]
        self._producer_batch_size: int | None = None
        self._position = (self.epoch, 0)  # this consumer's next example: (epoch, index in it)
        self._skip = 0  # rows of the first batch that a restarted consumer was given before
        if state is not None and resume is not None:
            self.epochs_done = state["epochs_done"] + self.epoch - state["epoch"]
            self._producer_batch_size = state["producer_batch_size"]
            if self.epoch == state["epoch"]:
                self._position, self._skip = (self.epoch, state["examples"]), resume[2]

    def state_dict(self) -> dict[str, Any]:
        """Where this consumer stands: the examples of the stream given to its loops, as a
        dict of numbers to keep in a checkpoint (as a StatefulDataLoader's ``state_dict``).
        ``Consumer(endpoint, state=...)`` resumes from it: the batches given before the
        state was saved count as trained, those after it come again.

        Raises:
            SharingError: A wrapped consumer (its epochs straddle the producer's), or one
                that echoes (``echo_on_stall`` > 1), whose position is not in the stream's.
        """
        if self.mode == "wrap" or self.echo_on_stall > 1:
            raise SharingError(
                "state_dict() needs a consumer whose epochs are the producer's and that does "
                f"not echo (mode={self.mode!r}, echo_on_stall={self.echo_on_stall})"
            )
        epoch, examples = self._position
        return {
            "epoch": epoch,
            "examples": examples,
            "epochs_done": self.epochs_done,
            "producer_batch_size": self._producer_batch_size,
        }

    # ------------------------------------------------------------------ connection

    def _next_message(self, what: str = "a message") -> dict:
        """The next message (with a batch's storages mapped), waiting while the producer
        lives, at most ``timeout_s``; ``what`` names it in the `TimeoutError`."""
        if self._lookahead is not None:
            message, self._lookahead = self._lookahead, None
            return message
        limit = self.timeout_s
        waited, reset = 0.0, False
        while True:
            try:
                message, fds = protocol.recv(self._sock)
            except ConnectionResetError:
                if not reset:  # the producer closed with our releases unread: what it sent
                    reset = True  # before closing (the stream's end) still follows
                    continue
                message, fds = None, []
            except TimeoutError:
                waited += _POLL_S
                if not endpoints.pid_alive(self._producer_pid):
                    raise ProducerGone(
                        f"the producer (pid {self._producer_pid}) at {self.endpoint} exited "
                        "before the end of its stream"
                    ) from None
                if limit is not None and waited >= limit:
                    raise TimeoutError(
                        f"waited {waited:g} s (timeout_s={limit:g}) for {what} from the "
                        f"producer at {self.endpoint}; pass a larger timeout_s, or None"
                    ) from None
                continue
            except OSError:
                message, fds = None, []
            if message is None:
                raise ProducerGone(
                    f"the producer (pid {self._producer_pid}) at {self.endpoint} closed the "
                    "connection before the end of its stream"
                )
            if message["type"] == "error":
                raise _refusal_error(message)
            if message["type"] == "batch" and message["segment"] is not None:
                message["maps"] = [self._segments.view(message["segment"], fds, message["seq"])]
            elif message["type"] == "batch":
                message["maps"] = map_storages(fds)
            else:
                for fd in fds:
                    os.close(fd)
            return message

    def _batch(self, message: dict) -> Any:
        """The batch a ``batch`` message carries (its storages mapped)."""
        batch = rebuild(message["layout"], message["maps"])
        self._cuda = self._cuda or bool(cuda_share.ipc_fields(message["layout"]))
        return batch

    def _counted(self, stream: Iterator[tuple[int, Any]]) -> Iterator[tuple[int | None, Any]]:
        """``stream``'s (seq, batch) pairs, counted, with ``echo_on_stall``'s echoes between
        them as (None, batch)."""
        latest, uses = None, 0
        while True:
            if latest is not None and uses < self.echo_on_stall and not self._ready():
                uses += 1
                self.echoed_examples += first_dim(latest) or 0
                self.last_was_echo = True
                yield None, latest
                continue
            try:
                seq, latest = next(stream)
            except StopIteration:
                return
            uses = 1
            self.fresh_examples += first_dim(latest) or 0
            self.last_was_echo = False
            yield seq, latest

    def _ready(self) -> bool:
        """Whether the producer's next message is here (or comes within the grace)."""
        if self._lookahead is not None:
            return True
        return bool(select.select([self._sock], [], [], _GRACE_S)[0])

    def _release(self, seq: int | None) -> None:
        if seq is None:  # an echo: its fresh batch was released already
            return
        with self._lock:
            self._held.discard(seq)
            self._send("release", seq=seq)
            if seq in self._early:
                self._early.discard(seq)
                self._send("free", seq=seq)

    def _free(self, seq: int) -> None:
        """No view of pooled batch ``seq`` is left (called by its finalizer)."""
        with self._lock:
            if seq in self._held:
                self._early.add(seq)  # told with its release, which must come first
            else:
                self._send("free", seq=seq)

    def _send(self, kind: str, **fields: Any) -> None:
        # Not from a forked copy: its finalizers must not free what this process still uses.
        if not self._closed and lifetime.owns(self._pid):
            with contextlib.suppress(OSError):  # a gone producer shows at the next receive
                protocol.send(self._sock, kind, **fields)

    # ------------------------------------------------------------------ iteration

    def __len__(self) -> int:
        """Batches per epoch, when the producer's loader has a length and batches are not
        re-sized."""
        if self._batches_per_epoch is None or self.batch_size not in (
            None,
            self._producer_batch_size,
        ):
            raise TypeError("this consumer's epoch length is not known")
        return self._batches_per_epoch

    def epochs(self) -> Iterator[Iterator[Any]]:
        """Each epoch of the stream, until it ends::

            for epoch in consumer.epochs():
                for batch in epoch:
                    ...

        Each epoch must be iterated to its end before the next is asked for. Waits for the
        next epoch's first batch before yielding it; ends where the producer's stream
        finished, or was stopped, at an epoch's end.

        Raises:
            SharingError: The producer's loader failed (or see `Consumer`).
        """
        while True:
            if self._end is None:
                message = self._next_message()
                while message["type"] == "end_epoch" and self.mode == "wrap":
                    message = self._next_message()  # wrap epochs end by count, not by these
                if message["type"] == "end":
                    self._end = message
                else:
                    self._lookahead = message
            if self._end is not None and self._end["reason"] != "failed":
                return
            yield iter(self)

    def _stream_ended(self, counted: int) -> SharingError:
        """The error for a loop that met the stream's end after ``counted`` batches."""
        assert self._end is not None
        reason, detail = self._end["reason"], self._end["detail"]
        where = f"the producer at {self.endpoint}"
        how = {
            "finished": f"{where} finished its stream",
            "stopped": f"{where} was stopped",
            "failed": f"{where} failed ({detail})",
        }.get(reason, f"{where} ended its stream ({protocol.short(reason)})")
        served = f"{self.epochs_done} whole epoch{'s' if self.epochs_done != 1 else ''}"
        if counted:
            return SharingError(
                f"{how} after {counted} batches of this consumer's epoch {self.epochs_done}, "
                f"in the middle of it (this consumer was served {served} before it)"
            )
        if reason == "failed":
            return SharingError(f"{how}; this consumer was served {served}")
        return StreamEnded(
            f"{how} after serving this consumer {served}: a loop asked for one more, which "
            f"the stream does not have. Loop over the consumer at most {self.epochs_done} "
            "times, or over consumer.epochs() to stop where the stream does; or serve more "
            "epochs"
        )

    def _producer_batches(self) -> Iterator[tuple[int, Any]]:
        """(seq, batch) of one epoch, as this consumer's join mode defines it."""
        counted = 0
        while True:
            message = self._end or self._next_message()
            kind = message["type"]
            if kind == "end":
                self._end = message
                raise self._stream_ended(counted)
            if kind == "end_epoch":
                if self.mode != "wrap":
                    self.epochs_done += 1
                    self._position = (message["epoch"] + 1, 0)
                    return
                continue
            if kind != "batch":
                raise ProtocolError(f"unexpected {kind!r} message while iterating")
            batch = self._batch(message)
            if self._skip:  # a restarted consumer's first batch: the rows given before
                batch, self._skip = map_tensors(batch, lambda t, n=self._skip: t[n:]), 0
            self._held.add(message["seq"])
            if self._producer_batch_size is None:
                self._producer_batch_size = first_dim(batch)
            if self.mode != "wrap" or counted == 0:  # a wrapped epoch is the one it began in
                self.epoch = message["epoch"]
            yield message["seq"], batch
            counted += 1
            if self.mode == "wrap" and counted == self._batches_per_epoch:
                self.epochs_done += 1
                return

    def __iter__(self) -> Iterator[Any]:
        if self._closed:
            raise SharingError("this Consumer has left; create a new one to rejoin")
        stream = self._producer_batches()
        batches = self._counted(stream)
        try:
            if self.batch_size is None:
                for seq, batch in batches:
                    self._given(batch)
                    yield batch
                    self._release(seq)
            else:
                for batch in recut(batches, self.batch_size, self._release):
                    self._given(batch)
                    yield batch
        finally:
            stream.close()
            for seq in list(self._held):
                self._release(seq)

    def _given(self, batch: Any) -> None:
        """Count ``batch``, about to be given to the loop, in this consumer's position."""
        epoch, examples = self._position
        if epoch != self.epoch:
            epoch, examples = self.epoch, 0
        self._position = (epoch, examples + (first_dim(batch) or 0))

    # ------------------------------------------------------------------ leaving

    def leave(self) -> None:
        """Leave: the producer stops serving this consumer at once (idempotent). The CUDA
        references of batches it never opened are lowered (after a CUDA batch, waiting at
        most 1 s for the producer to close the connection, so those in flight are too)."""
        if self._closed:
            return
        with self._lock:
            with contextlib.suppress(OSError):
                self._sock.settimeout(1.0)
                protocol.send(self._sock, "leave")
            unopened = self._lookahead
            if unopened is not None and unopened["type"] == "batch":
                self._cuda = cuda_share.release_unopened(unopened["layout"]) > 0 or self._cuda
            self._lookahead = None
            with contextlib.suppress(OSError):
                cuda_share.release_in_flight(self._sock, cuda=self._cuda)
            self._closed = True
            self._sock.close()
            self._segments.close()

    close = leave

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.leave()

    def __del__(self) -> None:
        # Left open: leave, unless this is a forked copy (its parent still reads the stream).
        # A copy collected while the interpreter tears down may find modules gone: nothing
        # to do then, the process's exit closes its descriptors.
        if not getattr(self, "_closed", True):
            with contextlib.suppress(Exception):
                if lifetime.owns(self._pid):
                    self.leave()


def _refusal_error(message: dict) -> Exception:
    code, reason = message["code"], message["reason"]
    if code == "bad_argument":
        return ValueError(reason)
    if code == "late_join":
        return LateJoinError(reason)
    return SharingError(reason)
