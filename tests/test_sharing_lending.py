"""`sharing.lending`: a DataLoader's workers collate straight into the producer's segments.

What a user of ``Producer(DataLoader(...))`` would notice: the batches are the DataLoader's
own (values, structure, a collate_fn of theirs), none is copied in the producer's process,
memory stays bounded when iterations are abandoned mid-epoch (with and without persistent
workers), and only the producer's own workers may borrow segments."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import torch
from sharing_checks import FORK
from torch.utils.data import DataLoader, Dataset

from sharing import Consumer, Producer
from sharing.lending import Lent, SegmentLender
from sharing.loading import epoch_iter
from sharing.segments import SegmentPool

pytestmark = pytest.mark.timeout(120)


class Samples(Dataset):
    """(image filled with its id, id, a string, a float) tuples."""

    def __len__(self) -> int:
        return 40

    def __getitem__(self, index: int):
        return torch.full((3, 8, 8), float(index)), index, f"s{index}", index / 2


def _pairs(batch: dict) -> dict:
    """A collate_fn of a user's own: a dict, the images summed per sample."""
    return {
        "x": torch.stack([s[0] for s in batch]),
        "sum": torch.tensor([float(s[0].sum()) for s in batch]),
    }


def _served(loader: DataLoader, epochs: int = 1) -> tuple[list, dict]:
    """What one consumer of ``Producer(loader)`` receives, and the producer's metrics."""
    producer = Producer(loader, epochs=epochs)
    thread = threading.Thread(target=producer.serve)
    thread.start()
    try:
        consumer = Consumer(producer.endpoint)
        batches = [batch for _ in range(epochs) for batch in consumer]
        consumer.leave()
        thread.join(30)
        return batches, producer.metrics()
    finally:
        producer.close()


def _same(a, b) -> None:
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and torch.equal(a, b)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for key in a:
            _same(a[key], b[key])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same(x, y)
    else:
        assert a == b


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("collate_fn", [None, _pairs], ids=["default_collate", "own"])
def test_the_consumer_gets_the_dataloaders_own_batches_none_copied(workers, collate_fn):
    def loader():
        return DataLoader(
            Samples(), batch_size=6, num_workers=workers, collate_fn=collate_fn,
            multiprocessing_context=FORK if workers else None,
        )  # fmt: skip

    alone = list(loader())
    shared = loader()
    own_collate = shared.collate_fn
    batches, metrics = _served(shared, epochs=2)
    assert len(batches) == 2 * len(alone)
    for got, want in zip(batches, alone + alone, strict=True):
        _same(got, want)  # lists and tuples where default_collate makes them
    assert metrics["batches_lent"] == 2 * len(alone) and metrics["batches_copied"] == 0
    assert shared.collate_fn is own_collate  # given back when the producer closes


def test_samples_stacked_only_by_default_collate_give_its_own_batch():
    """numpy scalars: default_collate stacks them, a segment's plan does not; the batch is
    then default_collate's own (which the producer copies, as any loader's)."""
    lender = SegmentLender(SegmentPool())
    try:
        scalars, tensors = (
            DataLoader([np.float32(1.5)] * 2, batch_size=2),
            DataLoader([torch.ones(2)] * 2, batch_size=2),
        )
        lender.wrap(scalars)
        lender.wrap(tensors)
        (own,), (lent,) = list(scalars), list(tensors)
        assert torch.equal(own, torch.tensor([1.5, 1.5])) and not isinstance(own, Lent)
        assert isinstance(lent, Lent) and lender.adopt(lent).nbytes == 16
    finally:
        lender.close()


def _abandon(loader: DataLoader, lender: SegmentLender, lock, times: int) -> None:
    """Start ``times`` epochs and leave each after two batches, as a reload that is done."""
    for epoch in range(times):
        batches = epoch_iter(loader, epoch, lock)
        for index, batch in enumerate(batches):
            lender.adopt(batch)  # served, then released by the serving loop:
            lender.pool.release(batch.segment)
            if index == 1:
                break
        del batches, batch


@pytest.mark.parametrize("persistent", [False, True])
def test_abandoned_iterations_give_their_segments_back(persistent):
    """Each abandoned epoch leaves up to 2 workers x 2 batches in flight. Taken back, the
    pool holds at most two epochs' worth in flight (a persistent DataLoader's old tasks end
    while its new ones start), however many epochs are abandoned; kept, 10 abandoned epochs
    would leave up to 40."""
    loader = DataLoader(
        Samples(), batch_size=2, num_workers=2, prefetch_factor=2,
        persistent_workers=persistent, multiprocessing_context=FORK,
    )  # fmt: skip
    lender = SegmentLender(SegmentPool())
    try:
        lender.wrap(loader)
        lock = lender.iteration_lock()
        _abandon(loader, lender, lock, 10)
        for batch in epoch_iter(loader, 10, lock):  # a whole epoch: then nothing in flight
            lender.pool.release(lender.adopt(batch).segment)
        deadline = time.monotonic() + 10
        while lender.pool.free < len(lender.pool) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert lender.pool.free == len(lender.pool) <= 2 * 2 * 2 + 2
    finally:
        lender.close()


def _borrow(address: str, garbage: bool) -> int:
    """In a forked child: borrow one segment, then (if ``garbage``) send junk; its id."""
    from sharing import lending

    client = lending._Client(address)
    _, sid, _ = client.lease(64)
    if garbage:
        client.sock.sendall(b"\xff not json")
        time.sleep(0.2)
    return sid


def test_a_worker_that_sends_junk_loses_its_connection_and_its_segment():
    lender = SegmentLender(SegmentPool())
    try:
        with FORK.Pool(1) as pool:
            first = pool.apply(_borrow, (lender.address, True))
            second = pool.apply(_borrow, (lender.address, False))
        assert second == first  # the junk sender's segment went back to the pool
        assert len(lender.pool) == 1
    finally:
        lender.close()


def test_only_the_producers_own_children_may_borrow():
    """A process of the same user that is not a child of the producer is refused."""
    lender = SegmentLender(SegmentPool())
    script = (
        "import socket,sys\n"
        "s=socket.socket(socket.AF_UNIX,socket.SOCK_SEQPACKET)\n"
        f"s.connect({lender.address!r})\n"
        "s.sendall(b'{\"lease\":true}')\n"
        "print(len(s.recv(256)))\n"
    )
    try:
        # from a subshell that exits at once: the borrower is nobody's child of ours
        done = subprocess.run(
            ["sh", "-c", f'("{sys.executable}" -c "$0" &)', script],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        assert done.stdout.strip() in ("0", "") and len(lender.pool) == 0, done.stderr
    finally:
        lender.close()


def test_persistent_workers_that_outlive_their_producer_make_the_loaders_own_batches():
    """Their collate_fn stays wrapped; with no lender to answer, batches are made as alone."""
    loader = DataLoader(
        Samples(), batch_size=5, num_workers=2, persistent_workers=True,
        multiprocessing_context=FORK,
    )  # fmt: skip
    alone = list(DataLoader(Samples(), batch_size=5))
    served, _ = _served(loader)
    for got, want in zip(served, alone, strict=True):
        _same(got, want)
    for got, want in zip(loader, alone, strict=True):  # the same workers, no producer now
        _same(got, want)


FORKSERVER = """
import threading
import torch
from torch.utils.data import DataLoader, TensorDataset
from sharing import Consumer, Producer

if __name__ == "__main__":
    data = TensorDataset(torch.arange(40.0).view(40, 1))
    loader = DataLoader(data, batch_size=8, num_workers=1, multiprocessing_context="forkserver")
    producer = Producer(loader)
    serving = threading.Thread(target=producer.serve)
    serving.start()
    got = [batch[0][:, 0].tolist() for batch in Consumer(producer.endpoint)]
    serving.join(30)
    print(sum(got, []) == list(range(40)), producer.metrics()["batches_lent"])
    producer.close()
"""


def test_forkserver_workers_borrow_too(tmp_path):
    """A forkserver's workers are the producer's grandchildren; they borrow like children.
    (In a process of its own: a forkserver outlives the test in the process that starts it.)"""
    script = tmp_path / "forkserver_borrow.py"
    script.write_text(FORKSERVER)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=90)
    assert done.stdout.split() == ["True", "5"], done.stderr[-2000:]
