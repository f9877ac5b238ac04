"""Shared data loading: one `Producer` runs an input pipeline once and serves each batch to
every `Consumer` (one per training process) through shared memory.

Data moves zero-copy through a ring of slots in an anonymous memfd whose descriptor reaches
consumers over a local Unix socket; the socket carries only small schema-checked JSON
messages (no pickle). See `Producer` and `Consumer` for the delivery guarantees.
"""

from sharing.consumer import Consumer
from sharing.errors import LateJoinError, ProducerGone, ProtocolError, SharingError
from sharing.producer import Producer

__all__ = [
    "Consumer",
    "LateJoinError",
    "Producer",
    "ProducerGone",
    "ProtocolError",
    "SharingError",
]
