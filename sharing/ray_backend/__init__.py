"""Shared data loading across hosts, through Ray's object store (endpoint ``ray:NAME``).

Modules: `hub` (the actor that keeps the stream), `producer` (`RayProducer`), `consumer`
(`RayConsumer`), `cluster` (`simulated_cluster`, several Ray hosts on one machine) and
`common` (names, timings, batches in the object store).

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

from sharing.endpoint import RAY_SCHEME as SCHEME
from sharing.endpoint import is_ray_endpoint
from sharing.ray_backend.cluster import simulated_cluster
from sharing.ray_backend.common import NAMESPACE, default_endpoint, parse
from sharing.ray_backend.consumer import RayConsumer
from sharing.ray_backend.producer import RayProducer

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

PRODUCER = RayProducer
"""This backend's producer class (`sharing.endpoint.BACKENDS`)."""
CONSUMER = RayConsumer
"""This backend's consumer class (`sharing.endpoint.BACKENDS`)."""
