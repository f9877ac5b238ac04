"""A consumer killed with SIGKILL and restarted from the state it saved k batches earlier:
across both lives it trains on exactly the batches one uninterrupted consumer does, each
once, whether the producer still holds them (the replay window) or loads them again."""

from __future__ import annotations

import json
import os
import signal
import threading

import pytest
import torch
from sharing_checks import FORK, start
from torch.utils.data import DataLoader, DistributedSampler

from sharing import Consumer, LateJoinError, Producer

pytestmark = pytest.mark.timeout(120)
SAMPLES, BATCH, EPOCHS = 192, 16, 3  # 12 producer batches an epoch


class _Ids(torch.utils.data.Dataset):
    def __len__(self):
        return SAMPLES

    def __getitem__(self, index):
        return {"id": index, "x": torch.full((3,), float(index))}


def _ids(batch) -> list[int]:
    assert torch.equal(batch["x"][:, 0].long(), batch["id"])
    return batch["id"].tolist()


def _train_then_die(endpoint, path, die_after, batch_size):
    """Train, saving the state after each batch (a checkpoint); SIGKILL after ``die_after``."""
    consumer = Consumer(endpoint, batch_size=batch_size)
    with open(path, "w") as log:
        count = 0
        for epoch in consumer.epochs():
            for batch in epoch:
                count += 1
                log.write(json.dumps({"ids": _ids(batch), "state": consumer.state_dict()}))
                log.write("\n")
                log.flush()
                if count == die_after:
                    os.kill(os.getpid(), signal.SIGKILL)


def _restart(endpoint, state, batch_size, joined, results):
    consumer = Consumer(endpoint, batch_size=batch_size, state=state)
    joined.set()
    ids = [i for epoch in consumer.epochs() for batch in epoch for i in _ids(batch)]
    results.put(("restarted", consumer.mode, ids, consumer.epochs_done))
    consumer.leave()


def _uninterrupted(endpoint, batch_size, pause_at, joined, results):
    """A consumer that is never killed; after ``pause_at`` batches it waits until the
    restarted one has joined (so the producer is where the case needs it)."""
    consumer = Consumer(endpoint, batch_size=batch_size)
    ids, count = [], 0
    for epoch in consumer.epochs():
        for batch in epoch:
            ids.extend(_ids(batch))
            count += 1
            if count == pause_at:
                joined.wait(60)
    results.put(("uninterrupted", consumer.mode, ids, consumer.epochs_done))
    consumer.leave()


@pytest.mark.parametrize(
    ("window", "die_after", "k", "batch_size", "again"),
    [
        (12, 14, 1, None, False),  # epoch 1: the window (a whole epoch) still holds them
        (2, 14, 5, None, True),  # back into epoch 0: gone, loaded again
        (2, 30, 3, None, True),  # in the last epoch, past the window
        (2, 11, 4, 24, True),  # consumer batches of 24 from the producer's 16
    ],
    ids=["inside-the-window", "outside-the-window", "last-epoch", "recut"],
)
def test_a_consumer_restarted_from_its_state_trains_on_each_batch_exactly_once(
    tmp_path, window, die_after, k, batch_size, again
):
    data = _Ids()
    sampler = DistributedSampler(data, num_replicas=1, rank=0, shuffle=True, seed=5)
    loader = DataLoader(data, batch_size=BATCH, sampler=sampler)
    results, joined, path = FORK.Queue(), FORK.Event(), tmp_path / "life1.jsonl"
    with Producer(loader, epochs=EPOCHS, replay_batches=window, consumers=2) as producer:
        first = start(_train_then_die, producer.endpoint, path, die_after, batch_size)
        start(_uninterrupted, producer.endpoint, batch_size, die_after, joined, results)
        serving = threading.Thread(target=producer.serve)
        serving.start()
        first.join(60)
        assert first.exitcode == -signal.SIGKILL
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        assert len(lines) == die_after
        checkpoint = lines[die_after - k - 1]  # the state saved k batches before the kill
        start(_restart, producer.endpoint, checkpoint["state"], batch_size, joined, results)
        serving.join(60)
        reports = {name: (mode, ids, done) for name, mode, ids, done in
                   (results.get(timeout=60) for _ in range(2))}  # fmt: skip
        metrics = producer.metrics()
    _, reference, _ = reports["uninterrupted"]
    assert sorted(reference) == sorted(list(range(SAMPLES)) * EPOCHS)
    mode, after, epochs_done = reports["restarted"]
    trained = [i for line in lines[: die_after - k] for i in line["ids"]] + after
    assert mode == "resume" and trained == reference and epochs_done == EPOCHS
    assert (metrics["batches_loaded_again"] > 0) == again


def _read_then_wait(endpoint, served, done):
    consumer = Consumer(endpoint)
    for count, _ in enumerate(consumer, 1):
        if count == 6:
            served.set()
            done.wait(60)


def test_a_restart_on_an_unseeded_shuffle_is_refused_saying_why():
    """Its missed batches are gone, and such a loader cannot draw that epoch again."""
    served, done = FORK.Event(), FORK.Event()
    loader = DataLoader(_Ids(), batch_size=BATCH, shuffle=True)
    with Producer(loader, replay_batches=1, consumers=2) as producer:
        serving = threading.Thread(target=producer.serve)
        serving.start()
        first = Consumer(producer.endpoint)
        start(_read_then_wait, producer.endpoint, served, done)
        batches = iter(first)
        next(batches), next(batches)
        state = first.state_dict()
        first.leave()
        served.wait(30)  # the producer is past the window of one batch
        with pytest.raises(LateJoinError) as error:
            Consumer(producer.endpoint, state=state)
        done.set()
        serving.join(60)
    assert state["epoch"] == 0 and state["examples"] == 2 * BATCH
    assert "no longer held for replay" in str(error.value)
    assert "shuffles without a seed" in str(error.value)
