"""Exceptions raised by the shared loader."""

from __future__ import annotations

__all__ = ["LateJoinError", "ProducerGone", "ProtocolError", "SharingError", "StreamEnded"]


class SharingError(RuntimeError):
    """Base class of the shared loader's errors."""


class ProtocolError(SharingError):
    """A control message was malformed, unknown, oversized or out of order."""


class ProducerGone(SharingError):
    """The producer exited (or was killed) before the consumer's data ended."""


class LateJoinError(SharingError):
    """A consumer joined mid-epoch where the missed batches cannot be delivered."""


class StreamEnded(SharingError):
    """A consumer asked for an epoch after the producer's stream had ended (it finished, or
    was stopped, at the end of the consumer's previous epoch)."""
