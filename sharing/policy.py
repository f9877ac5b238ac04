"""The producer's join and replay policy, as pure functions of where the producer stands.

A consumer that says hello is let in one of five ways (`protocol.JOIN_MODES`): ``start``
(before the epoch's first batch), ``replay`` (the batches it missed are still held: it gets
them first, then the live stream), ``reload`` (they are loaded again for it alone, then the
live stream: the loader can give that epoch again, `sharing.again`), ``wrap`` (each of its
epochs runs from where it joined into the producer's next epoch, which holds the same
batches; after the producer's last epoch, the batches its last epoch still needs are loaded
for it alone) or ``next_epoch`` (it waits for the next epoch); or it is refused with a
reason. A consumer's epoch is never silently short, nor silently holds a sample twice: where
none of these can make it exact, the join is refused.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from sharing import protocol

__all__ = [
    "Join",
    "Position",
    "Refusal",
    "check_hello",
    "held",
    "plan",
    "plan_join",
    "plan_resume",
    "replay_window",
]


class Position(NamedTuple):
    """Where the producer stands when a consumer joins.

    Attributes:
        epoch: Epoch of the next batch the producer shares.
        index: Batches of ``epoch`` already shared (0: the epoch has not started).
        window: Leading batches of each epoch held for replay.
        batches_per_epoch: Batches per epoch, if known (the loader's length, or counted).
        epochs: Epochs the producer serves in all; None: until stopped.
        finished: Whether the producer has shared its last batch.
        repeats: Whether every epoch of the loader is the same batches in the same order
            (`sharing.again.repeats`).
        reload_refusal: Why the loader cannot give a past epoch again, or None if it can
            (`sharing.again.reload_refusal`).
    """

    epoch: int
    index: int
    window: int
    batches_per_epoch: int | None
    epochs: int | None
    finished: bool = False
    repeats: bool = True
    reload_refusal: str | None = None


class Join(NamedTuple):
    """How a consumer joins: ``mode`` (one of `protocol.JOIN_MODES`), the producer epoch of
    its first batch, and that batch's index in the epoch."""

    mode: str
    epoch: int
    start_index: int


class Refusal(NamedTuple):
    """Why a consumer is not served: ``code`` (bad_argument, protocol, late_join, finished)
    tells the consumer which exception to raise; ``reason`` is the message."""

    code: str
    reason: str


def replay_window(
    replay_batches: int | None, replay_bytes: int, batch_nbytes: int, batches_per_epoch: int | None
) -> int:
    """Leading batches of each epoch to hold for late joiners.

    Args:
        replay_batches: The producer's ``replay_batches`` (None: derive from bytes).
        replay_bytes: Memory budget used when ``replay_batches`` is None.
        batch_nbytes: Bytes of one batch (the first).
        batches_per_epoch: Caps the window at one epoch when known.
    """
    window = replay_bytes // max(batch_nbytes, 1) if replay_batches is None else replay_batches
    return window if batches_per_epoch is None else min(window, batches_per_epoch)


def check_hello(hello: dict[str, Any]) -> Refusal | None:
    """A `Refusal` if a (schema-valid) hello asks for what no producer serves, else None."""
    if hello["version"] != protocol.PROTOCOL_VERSION:
        return Refusal(
            "protocol",
            f"protocol version {protocol.short(hello['version'])} != producer's "
            f"{protocol.PROTOCOL_VERSION}",
        )
    if hello["late_join"] not in protocol.LATE_JOIN_MODES:
        return Refusal(
            "bad_argument",
            f"late_join={protocol.short(hello['late_join'])}; "
            f"valid: {list(protocol.LATE_JOIN_MODES)}",
        )
    size = hello["batch_size"]
    if size is not None and size < 1:
        return Refusal("bad_argument", f"batch_size must be None or an integer >= 1, got {size}")
    resume = hello["resume"]
    if resume is not None and not (
        len(resume) == 2
        and all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 2**62 for n in resume)
    ):
        return Refusal(
            "bad_argument",
            f"resume must be [epoch, batch] of integers >= 0, got {protocol.short(resume)}",
        )
    return None


def held(epoch: int, position: Position) -> bool:
    """Whether the replay window still holds every batch of ``epoch`` that the producer at
    ``position`` has shared."""
    return epoch == position.epoch and position.index <= position.window


def plan_join(position: Position, late_join: str) -> Join | Refusal:
    """How a consumer asking for ``late_join`` (one of `protocol.LATE_JOIN_MODES`) joins a
    producer at ``position``."""
    epoch, index, window = position.epoch, position.index, position.window
    if position.finished or (position.epochs is not None and epoch >= position.epochs):
        return Refusal("finished", "the producer has served all its epochs")
    if index == 0:
        return Join("start", epoch, 0)
    if index <= window:
        return Join("replay", epoch, 0)
    where = (
        f"joined at batch {index} of epoch {epoch}, but only the first {window} batches of an "
        "epoch are kept for replay"
    )
    if late_join == "replay":
        return Refusal(
            "late_join",
            f"{where}; pass late_join='auto' or 'next_epoch', or give the producer more "
            "replay_batches",
        )
    if late_join == "auto" and position.batches_per_epoch is not None and position.repeats:
        return Join("wrap", epoch, index)
    if late_join == "auto" and position.reload_refusal is None:
        return Join("reload", epoch, 0)
    if late_join == "auto":
        return Refusal(
            "late_join",
            f"{where}, and {position.reload_refusal}. Start every consumer before the first "
            "batch (Producer(consumers=N) waits for N of them; join_grace_s=S, until none has "
            "said hello for S seconds), or pass late_join='next_epoch' to start with the next "
            "epoch, or give the producer more replay_batches",
        )
    if position.epochs is not None and epoch == position.epochs - 1:
        return Refusal(
            "late_join",
            f"{where}, and this is the producer's last epoch (epochs={position.epochs}): "
            f"late_join={late_join!r} needs a next epoch; join before the epoch starts, or "
            "give the producer more replay_batches or epochs",
        )
    return Join("next_epoch", epoch + 1, 0)


def plan_resume(position: Position, epoch: int, index: int) -> Join | Refusal:
    """How a consumer restarted from a checkpoint, whose next batch is batch ``index`` of
    ``epoch``, rejoins a producer at ``position``: ``resume`` from there (the batches since
    then come from the replay window if it still holds them all, else loaded again), or a
    refusal saying why it cannot."""
    if position.batches_per_epoch is not None and index >= position.batches_per_epoch:
        epoch, index = epoch + 1, 0  # saved after an epoch's last batch
    where = f"the state's next batch (batch {index} of epoch {epoch})"
    if position.epochs is not None and epoch >= position.epochs:
        return Refusal(
            "finished", f"{where} is past the producer's last epoch (epochs={position.epochs})"
        )
    now = (position.epoch, position.index)
    if (epoch, index) > now:
        return Refusal(
            "bad_argument",
            f"{where} is ahead of the producer (batch {now[1]} of epoch {now[0]}): a state "
            "saved from another producer's stream?",
        )
    if (epoch, index) < now and not held(epoch, position) and position.reload_refusal is not None:
        return Refusal(
            "late_join",
            f"{where} and those after it are no longer held for replay, and "
            f"{position.reload_refusal}",
        )
    return Join("resume", epoch, index)


def plan(hello: dict[str, Any], position: Position) -> Join | Refusal:
    """How the consumer that sent (schema-valid) ``hello`` is let in at ``position``, or why
    not: `check_hello`, then `plan_join`, or `plan_resume` for a restarted consumer."""
    refusal = check_hello(hello)
    if refusal is not None:
        return refusal
    if hello["resume"] is None:
        return plan_join(position, hello["late_join"])
    return plan_resume(position, *hello["resume"])
