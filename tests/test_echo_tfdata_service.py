"""The tf.data users' recipe for shared loading: tf.data service with a cross-trainer cache,
and `echo.tfdata.echo` after ``distribute`` so that echoing does not multiply what crosses the
network; and the cache's known limit, shown: a slow trainer skips what was evicted."""

from __future__ import annotations

import pytest

tf = pytest.importorskip("tensorflow")

from tensorflow.core.protobuf import service_config_pb2  # noqa: E402

from echo.tfdata import echo  # noqa: E402

pytestmark = [pytest.mark.tf, pytest.mark.timeout(180)]

service = tf.data.experimental.service
ELEMENT_BYTES = 8 * 1024


def _start_service(cache_bytes: int = 64 << 20):
    """An in-process dispatcher and one worker whose cross-trainer cache holds
    ``cache_bytes``; (the servers, which must stay referenced, and the target)."""
    dispatcher = service.DispatchServer(service.DispatcherConfig(port=0))
    address = dispatcher.target.split("://")[1]
    config = service_config_pb2.WorkerConfig(
        dispatcher_address=address,
        worker_address="localhost:%port%",
        protocol="grpc",
        cross_trainer_cache_size_bytes=cache_bytes,
    )
    worker = service.WorkerServer(config)
    return (dispatcher, worker), dispatcher.target


def _source() -> tf.data.Dataset:
    """An endless numbered stream (the cross-trainer cache needs an infinite dataset): the
    decode-and-augment pipeline that runs once, on the service's workers."""
    return (
        tf.data.Dataset.range(1 << 62)
        .repeat()
        .map(lambda i: (i, tf.fill([ELEMENT_BYTES // 8], i)), deterministic=True)
    )


def _trainer(target: str, trainer_id: str, job: str, source=None) -> tf.data.Dataset:
    return (_source() if source is None else source).apply(
        service.distribute(
            processing_mode=service.ShardingPolicy.OFF,
            service=target,
            job_name=job,
            cross_trainer_cache=service.CrossTrainerCache(trainer_id=trainer_id),
        )
    )


def _received(stream: tf.data.Dataset, count: tf.Variable) -> tf.data.Dataset:
    """``stream``, counting into ``count`` each element that came from the service."""

    def counted(i, payload):
        count.assign_add(1)
        return i, payload

    return stream.map(counted)


TRAINED = 4000
CHUNK = (1 << 20) // ELEMENT_BYTES  # elements in one chunk of the echo stage, which reads
# ahead of what it emits by the few chunks its parallel expansion holds


@pytest.mark.slow
def test_echo_after_distribute_trains_twice_on_what_crossed_the_network_once():
    servers, target = _start_service()
    received, trained = {}, {}
    for name in ("a", "b"):
        count = tf.Variable(0, dtype=tf.int64)
        stream = _received(_trainer(target, name, "recipe"), count).apply(echo(2.0))
        trained[name] = [int(i) for i, _ in stream.take(TRAINED).as_numpy_iterator()]
        received[name] = int(count.numpy())
    for name, ids in trained.items():
        fresh = ids[::2]
        assert ids[1::2] == fresh, name  # each element received is trained on twice
        assert fresh == list(range(fresh[0], fresh[0] + len(fresh))), name  # in order
        assert TRAINED // 2 <= received[name] <= TRAINED // 2 + 4 * CHUNK, (name, received)
    # Echo on the service's side instead: every copy crosses the network.
    count = tf.Variable(0, dtype=tf.int64)
    before = _received(_trainer(target, "c", "before", _source().apply(echo(2.0))), count)
    assert len(list(before.take(TRAINED).as_numpy_iterator())) == TRAINED
    assert int(count.numpy()) >= TRAINED
    del servers


def test_a_slow_trainer_skips_what_the_cross_trainer_cache_evicted():
    """The limit the recipe inherits: the cache is a sliding window, so a trainer that falls
    behind by more than it holds silently skips elements (`sharing` never does)."""
    servers, target = _start_service(cache_bytes=16 * ELEMENT_BYTES)
    slow = iter(_trainer(target, "slow", "window").as_numpy_iterator())
    fast = iter(_trainer(target, "fast", "window").as_numpy_iterator())
    first = int(next(slow)[0])
    fast_ids = [int(next(fast)[0]) for _ in range(400)]  # the fast one runs far ahead
    later = [int(next(slow)[0]) for _ in range(20)]
    assert fast_ids == sorted(set(fast_ids))  # in order, each element once
    ids = [first, *later]
    skipped = (ids[-1] - ids[0] + 1) - len(ids)
    assert skipped > 100, ids  # the slow trainer never saw most of what the fast one did
    # the fast one reads (nearly) everything: the odd element can be gone before its first
    # read reaches the cache, which is timing, not the window
    fast_skipped = (fast_ids[-1] - fast_ids[0] + 1) - len(fast_ids)
    assert fast_skipped * 10 < skipped, (fast_skipped, skipped)
    del servers
