"""CUDA batches through CUDA IPC handles (needs a GPU; skipped without one)."""

from __future__ import annotations

import multiprocessing as mp

import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]
SPAWN = mp.get_context("spawn")


def _produce(endpoint_queue):
    from sharing import Producer

    batches = [(torch.arange(i * 8, i * 8 + 8), torch.ones(8, 4) * i) for i in range(6)]
    with Producer(batches, epochs=1, wait_for=2, device="cuda") as producer:
        endpoint_queue.put(producer.endpoint)
        producer.serve()


def _consume(endpoint, results):
    from sharing import Consumer

    ids = []
    for ids_batch, features in Consumer(endpoint):
        assert ids_batch.is_cuda and features.is_cuda
        assert torch.equal(features[:, 0].long().cpu(), ids_batch.cpu() // 8)
        ids.extend(ids_batch.cpu().tolist())
    results.put(ids)


def test_cuda_batches_reach_every_consumer_once():
    endpoints, results = SPAWN.Queue(), SPAWN.Queue()
    producer = SPAWN.Process(target=_produce, args=(endpoints,))
    producer.start()
    endpoint = endpoints.get(timeout=120)
    consumers = [SPAWN.Process(target=_consume, args=(endpoint, results)) for _ in range(2)]
    for process in consumers:
        process.start()
    outcomes = [results.get(timeout=120) for _ in consumers]
    for process in [producer, *consumers]:
        process.join(60)
    assert outcomes == [list(range(48))] * 2
