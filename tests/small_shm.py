"""A shared loader's trial as a container without ``--shm-size`` runs it: 384 images of
3x224x224 float32 in batches of 16 (9.6 MB each, 24 an epoch), two DataLoader workers
with one batch in flight each, two consumers. `tests/test_sharing_small_shm.py` runs it
inside a 64 MB /dev/shm:

    python tests/small_shm.py MODE

prints one JSON line: what each consumer received (its join mode and the sample ids, in
order) or the error it raised, and the producer's error, if any.
"""

from __future__ import annotations

import json
import os
import sys
import time

import torch
from sharing_checks import FORK, Signalling, start
from torch.utils.data import DataLoader, Dataset

from sharing import Consumer, Producer
from sharing.tensorsocket import TensorConsumer, TensorProducer

SAMPLES, BATCH, WORKERS = 384, 16, 2
MODES = (
    "dataloader", "producer", "from_dataset", "replay", "wrap", "tensorsocket", "big", "too_big",
)  # fmt: skip


class Images(Dataset):
    """``{"id", "x"}`` samples; image ``x`` is filled with its id."""

    def __len__(self) -> int:
        return SAMPLES

    def __getitem__(self, index: int) -> dict:
        return {"id": index, "x": torch.full((3, 224, 224), float(index))}


def _ids(batch: dict) -> list[int]:
    ids = batch["id"]
    assert torch.equal(batch["x"][:, 2, 223, 223].long(), ids)  # each image is its sample's
    return ids.tolist()


def _consume(endpoint, results, name, served=None, per_batch_s=0.0) -> None:
    try:
        if served is not None:
            served.wait(60)
        consumer = Consumer(endpoint)
        ids = []
        for batch in consumer:
            ids.extend(_ids(batch))
            time.sleep(per_batch_s)
        results.put((name, {"mode": consumer.mode, "ids": ids}))
        consumer.leave()
    except Exception as error:
        results.put((name, {"error": f"{type(error).__name__}: {error}"}))


def _ts_consume(port, results, name) -> None:
    try:
        consumer = TensorConsumer(port, batch_size=BATCH, connect_timeout_s=30)
        ids = [i for batch in consumer for i in _ids(batch)]
        results.put((name, {"mode": "start", "ids": ids}))
        consumer.leave()
    except Exception as error:
        results.put((name, {"error": f"{type(error).__name__}: {error}"}))


def _loader(batch_size: int = BATCH, workers: int = WORKERS) -> DataLoader:
    # One batch in flight per worker: with those the loop holds, at most 4 x 9.6 MB at once
    return DataLoader(
        Images(), batch_size=batch_size, num_workers=workers, prefetch_factor=1,
        multiprocessing_context=FORK,
    )  # fmt: skip


class Batches:
    """A DataLoader's batches through an iterable of one's own: the producer then gets them
    as the loader makes them (in /dev/shm), as from any loader that is not a DataLoader."""

    def __init__(self, loader: DataLoader) -> None:
        self.loader = loader

    def __iter__(self):
        return iter(self.loader)


def _serve(producer, results, consumers: int) -> dict:
    """Serve, then collect every consumer's report (and the producer's error)."""
    report: dict = {}
    try:
        producer.serve()
    except Exception as error:
        report["producer_error"] = f"{type(error).__name__}: {error}"
    report["consumers"] = dict(results.get(timeout=60) for _ in range(consumers))
    producer.close()
    return report


def trial(mode: str) -> dict:
    """Run ``mode`` (one of `MODES`); its report."""
    results = FORK.Queue()
    if mode == "dataloader":  # the loader alone, as a training loop runs it
        return {"consumers": {"alone": {"ids": [i for b in _loader() for i in _ids(b)]}}}
    if mode == "tensorsocket":
        port = f"small-shm-{os.getpid()}"
        procs = [start(_ts_consume, port, results, name) for name in ("a", "b")]
        producer = TensorProducer(_loader(), port=port, join_grace_s=1.0)
        for _ in producer:
            pass
        producer.join()
        report = {"consumers": dict(results.get(timeout=60) for _ in procs)}
        return report
    if mode == "from_dataset":
        producer = Producer.from_dataset(
            Images(), batch_size=BATCH, num_workers=WORKERS, consumers=2,
            multiprocessing_context="fork",
        )  # fmt: skip
    elif mode in ("replay", "wrap"):  # a consumer joins while an early one is served
        served = FORK.Event()
        source = Signalling(_loader(), served, after=3 if mode == "replay" else 6)
        window = {"replay_batches": 1} if mode == "wrap" else {}  # replay: the whole epoch
        producer = Producer(source, **window)
        start(_consume, producer.endpoint, results, "early", per_batch_s=0.1)
        start(_consume, producer.endpoint, results, "late", served)
        return _serve(producer, results, 2)
    elif mode in ("big", "too_big"):  # 128 images: 77 MB a batch, more than /dev/shm holds
        loader = _loader(SAMPLES // 3, workers=1)
        producer = Producer(loader if mode == "big" else Batches(loader), consumers=2)
    else:
        producer = Producer(_loader(), consumers=2)
    for name in ("a", "b"):
        start(_consume, producer.endpoint, results, name)
    return _serve(producer, results, 2)


if __name__ == "__main__":
    print(json.dumps(trial(sys.argv[1])))
