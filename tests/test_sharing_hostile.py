"""`sharing`: whatever a local peer sends to the producer's socket costs that peer its
connection at worst; the producer keeps serving every well-behaved consumer."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from sharing_checks import FORK, consume, id_batches, no_leftovers, start

from sharing import Consumer, Producer, protocol
from sharing.endpoint import parse

pytestmark = pytest.mark.timeout(120)

DEEP_NESTING = b"[" * 60_000
HUGE_INTEGER = b'{"type":"release","seq":' + b"9" * 5_000 + b"}"
HUGE_LATE_JOIN = json.dumps(
    {
        "type": "hello",
        "version": protocol.PROTOCOL_VERSION,
        "batch_size": None,
        "late_join": "\u00e9" * 20_000,
        "pid": 1,
        "resume": None,
    },
    ensure_ascii=False,
).encode()  # 40 KB as sent; a refusal quoting it escapes each character to 6 bytes


def send_raw(endpoint: str, records: list[bytes], linger_s: float = 0.0) -> None:
    """Connect to ``endpoint``, send each record as one message, wait, close."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as sock:
        sock.connect(parse(endpoint))
        with contextlib.suppress(OSError):  # the producer may hang up first: that is allowed
            for record in records:
                sock.send(record)
        time.sleep(linger_s)


@pytest.mark.parametrize(
    "record",
    [DEEP_NESTING, HUGE_INTEGER, HUGE_LATE_JOIN],
    ids=["A-deep-nesting", "B-5000-digit-integer", "C-huge-late-join"],
)
def test_a_hostile_message_before_the_first_batch_costs_only_its_connection(record):
    results = FORK.Queue()
    with no_leftovers(), Producer(id_batches(160, 16, first_delay_s=0.5), epochs=1) as producer:
        start(send_raw, producer.endpoint, [record], 1.0)  # arrives before the first batch
        start(consume, producer.endpoint, results, 1, None, "honest")
        producer.serve()
        (_, _, epochs, _) = results.get(timeout=30)
    assert epochs == [list(range(160))]


JSON_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(-(2**200), 2**200)
    | st.floats()
    | st.text(max_size=30)
    | st.sampled_from(protocol.LATE_JOIN_MODES)
)
JSON_TREES = st.recursive(
    JSON_LEAVES,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=16,
)


def _shaped(kind: str) -> st.SearchStrategy[dict]:
    """Messages of type ``kind`` with the schema's fields (some missing), of any JSON value."""
    fields = dict.fromkeys(protocol.SCHEMAS[kind], JSON_TREES)
    return st.fixed_dictionaries({"type": st.just(kind)}, optional=fields)


VALID_HELLO = st.fixed_dictionaries(
    {
        "type": st.just("hello"),
        "version": st.integers(0, 2),
        "batch_size": st.none() | st.integers(-2, 2**70),
        "late_join": st.sampled_from(protocol.LATE_JOIN_MODES) | st.text(max_size=40),
        "pid": st.integers(-(2**64), 2**64),
    }
)


def _dumps(tree: object) -> bytes:
    return json.dumps(tree).encode()


MESSAGES = (
    st.binary(max_size=200)
    | JSON_TREES.map(_dumps)
    | st.sampled_from(sorted(protocol.SCHEMAS)).flatmap(_shaped).map(_dumps)
    | VALID_HELLO.map(_dumps)
    | st.integers(-(2**70), 2**70).map(lambda seq: _dumps({"type": "release", "seq": seq}))
)


def _consume_until(endpoint, results, stop):
    """Report each epoch's ids until ``stop`` is set, then leave."""
    consumer = Consumer(endpoint)
    while not stop.is_set():
        results.put([i for batch in consumer for i in batch["id"].tolist()])
    consumer.leave()


@pytest.mark.slow
def test_fuzzed_messages_never_cost_a_well_behaved_consumer_a_batch():
    results, stop = FORK.Queue(), FORK.Event()
    failures: list[BaseException] = []
    with no_leftovers(), Producer(id_batches(160, 16, delay_s=0.002), epochs=None) as producer:

        def serve():
            try:
                producer.serve()
            except BaseException as error:  # reported below
                failures.append(error)

        honest = start(_consume_until, producer.endpoint, results, stop)
        server = threading.Thread(target=serve)
        server.start()
        first_epoch = results.get(timeout=30)  # the honest consumer is being served

        @settings(
            max_examples=300,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(st.lists(MESSAGES, min_size=1, max_size=3))
        @example([DEEP_NESTING])
        @example([HUGE_INTEGER])
        @example([HUGE_LATE_JOIN])
        @example([b'{"type":"hello","version":1,"batch_size":null,"late_join":"auto","pid":1}'])
        def attack(records):
            assert server.is_alive(), failures
            send_raw(producer.endpoint, records)

        attack()
        stop.set()
        epochs = [first_epoch]
        while honest.is_alive() or not results.empty():
            with contextlib.suppress(Exception):
                epochs.append(results.get(timeout=1))
        honest.join(10)
        producer.stop()
        server.join(30)
    assert failures == []
    assert honest.exitcode == 0
    assert len(epochs) >= 2
    assert all(ids == list(range(160)) for ids in epochs)
