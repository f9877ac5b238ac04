"""Shared data loading: one `Producer` runs an input pipeline once and serves each batch to
every `Consumer` (one per training process) through shared memory.

Each batch is copied once, as it arrives from the loader, into a recycled anonymous memory
segment (memfd, never /dev/shm), and the producer passes a segment's file descriptor to each
consumer once, with a small message over a local Unix socket (SCM_RIGHTS); consumers keep it
mapped copy-on-write and read every later batch in it without a copy. The socket carries
only small schema-checked JSON messages (no pickle), and whatever a peer sends costs it its
own connection at worst. See `Producer` and `Consumer` for the delivery guarantees, and
`sharing.tensorsocket` for a drop-in replacement of TensorSocket's classes.

`Producer.from_dataset` reads a map-style dataset itself, its workers collating each batch
straight into recycled shared-memory segments that consumers keep mapped.

Modules: `producer` and `consumer` (the API), `protocol` (messages), `endpoint` (sockets),
`layout` (batches as shared storages), `cuda_share` (CUDA IPC references, one per consumer
and send), `policy` (who joins how and resumes where), `store` (batch references and replay
retention), `peers` (connections), `loading` (the loader thread), `again` (past batches
loaded again for a late joiner or a restart), `recut` (consumer batch sizes), `lifetime`
(what is left open is closed at exit, by its owner),
`pooled` (a dataset's batches in recycled segments), `copied` (a loader's batches copied
into them), `segments` (the pool), `collate` (collating into a segment), `segment_views` (a
consumer's mappings of segments); `ray_backend` (the same across hosts, through Ray).
"""

from sharing.consumer import Consumer
from sharing.errors import LateJoinError, ProducerGone, ProtocolError, SharingError, StreamEnded
from sharing.producer import Producer

__all__ = [
    "Consumer",
    "LateJoinError",
    "Producer",
    "ProducerGone",
    "ProtocolError",
    "SharingError",
    "StreamEnded",
]
