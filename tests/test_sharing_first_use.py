"""`sharing` as a new user first meets it: mistakes answered by errors that name the
argument, and no silent surprises."""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import pydoc
import re
import signal
import time
from pathlib import Path

import pytest
import torch
from sharing_checks import (
    FORK,
    Signalling,
    collect,
    consume,
    id_batches,
    left_entries,
    start,
)
from torch.utils.data import DataLoader, DistributedSampler

from sharing import Consumer, LateJoinError, Producer, SharingError
from sharing.pooled import PooledLoader
from sharing.tensorsocket import TensorConsumer, TensorProducer

pytestmark = pytest.mark.timeout(90)


def test_an_endpoint_in_a_missing_folder_is_a_value_error_naming_it():
    with pytest.raises(ValueError) as error:
        Producer(id_batches(8, 4), endpoint="unix:/nonexistent-dir/x.sock")
    assert "endpoint='unix:/nonexistent-dir/x.sock'" in str(error.value)
    assert "/nonexistent-dir does not exist" in str(error.value)
    assert "unix:@NAME" in str(error.value)


@pytest.mark.parametrize("name", ["connect_timeout_s", "timeout_s"])
@pytest.mark.parametrize("value", [-1, 0, "10", float("nan")])
def test_a_timeout_that_is_not_a_positive_number_of_seconds_is_refused(name, value):
    message = f"{name} must be a number of seconds > 0"
    with Producer(id_batches(8, 4)) as producer, pytest.raises(ValueError, match=message):
        Consumer(producer.endpoint, **{name: value})


def test_from_dataset_without_a_batch_size_names_the_argument_not_an_internal_class():
    with pytest.raises(TypeError) as error:
        Producer.from_dataset(list(range(10)))
    assert "Producer.from_dataset() needs batch_size=" in str(error.value)
    assert "PooledLoader" not in str(error.value)


@pytest.mark.parametrize("cls", [TensorProducer, TensorConsumer])
def test_help_shows_the_ignored_arguments_as_ignored(cls):
    text = pydoc.render_doc(cls, renderer=pydoc.plaintext)
    assert "object at 0x" not in text
    assert re.search(r"heart_ports: [^=]+ = ignored", text)


class _Ids(torch.utils.data.Dataset):
    """``{"id", "x"}`` samples; ``served`` is set once ``after`` samples have been read (in
    the producer, whose loader reads them in its own thread)."""

    def __init__(self, n, served, after):
        self.n, self.served, self.after, self.reads = n, served, after, 0

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        self.reads += 1
        if self.reads == self.after:
            self.served.set()
        return {"id": index, "x": torch.full((3,), float(index))}


def _join_late(endpoint, results, served, epochs):
    served.wait(30)  # the producer is well past its replay window of one batch
    try:
        consume(endpoint, results, epochs, None, "late")
    except LateJoinError as error:
        results.put(("late", f"LateJoinError: {error}", [], []))


def _late_join(make_loader, epochs=2) -> tuple[dict, dict]:
    """An early consumer and one that joins past the window; their reports and metrics."""
    results, served = FORK.Queue(), FORK.Event()
    loader = make_loader(_Ids(160, served, after=8 * 7))  # 20 batches of 8 an epoch
    with Producer(loader, epochs=epochs, replay_batches=1) as producer:
        start(consume, producer.endpoint, results, epochs, None, "early", per_batch_s=0.05)
        start(_join_late, producer.endpoint, results, served, epochs)
        producer.serve()
        reports = {name: (mode, ids) for name, mode, ids, _ in collect(results, 2)}
        return reports, producer.metrics()


def test_a_late_joiner_on_an_unseeded_shuffle_is_refused_naming_how_to_start_together():
    reports, _ = _late_join(lambda data: DataLoader(data, batch_size=8, shuffle=True))
    late = reports["late"][0]
    assert late.startswith("LateJoinError") and "shuffles without a seed" in late
    assert "consumers=N" in late and "join_grace_s" in late
    assert [sorted(ids) for ids in reports["early"][1]] == [list(range(160))] * 2


@pytest.mark.parametrize("how", ["sampler", "from_dataset"])
def test_a_late_joiner_on_a_seeded_shuffle_gets_exactly_the_epoch_it_joined(how):
    """Past the replay window, the batches it missed are loaded again, for it alone: its
    epochs are the producer's, sample for sample and in order."""

    def loader(data):
        if how == "from_dataset":
            return PooledLoader(data, batch_size=8, shuffle=True, seed=7)
        sampler = DistributedSampler(data, num_replicas=1, rank=0, shuffle=True, seed=7)
        return DataLoader(data, batch_size=8, sampler=sampler)

    reports, metrics = _late_join(loader)
    early, late = reports["early"][1], reports["late"]
    assert sorted(early[0]) == list(range(160)) and early[0] != early[1]  # shuffled anew
    assert late == ("reload", early)
    assert 1 < metrics["batches_loaded_again"] < 20  # past the window of one batch
    assert metrics["batches_produced"] == 40 + metrics["batches_loaded_again"]


def _wrap_epochs(endpoint, results, served):
    served.wait(30)
    consumer = Consumer(endpoint)
    epochs = [[consumer.epoch for _ in epoch] for epoch in consumer.epochs()]
    results.put((consumer.mode, epochs))
    consumer.leave()


def test_a_wrapped_consumers_epoch_names_the_producer_epoch_its_own_began_in():
    """Its last epoch ends on batches loaded after the producer's last: still epoch 2 of 0-2."""
    results, served = FORK.Queue(), FORK.Event()
    source = Signalling(id_batches(160, 8, delay_s=0.02), served, after=6)
    with Producer(source, epochs=3, replay_batches=1) as producer:
        start(consume, producer.endpoint, FORK.Queue(), 3, None, "early")
        start(_wrap_epochs, producer.endpoint, results, served)
        producer.serve()
        mode, epochs = results.get(timeout=30)
    assert mode == "wrap"
    assert [set(epoch) for epoch in epochs] == [{0}, {1}, {2}]
    assert [len(epoch) for epoch in epochs] == [20, 20, 20]


def _one_loop(port):
    """TensorSocket's README consumer: one ``for`` loop (one epoch), then it exits."""
    consumer = TensorConsumer(port, batch_size=8, connect_timeout_s=30)
    for _ in consumer:
        pass
    consumer.leave()


@pytest.mark.timeout(60)
def test_the_drop_ins_loop_says_no_consumer_is_connected_and_ends_after_idle_s(caplog):
    port = f"idle{os.getpid()}"
    producer = TensorProducer(id_batches(64, 8), port, join_grace_s=0.2, idle_s=2.0)
    start(_one_loop, port)
    began = time.monotonic()
    with caplog.at_level(logging.WARNING, "sharing.tensorsocket"):
        epochs = [len(list(producer)) for _ in range(5)]
        producer.join()
    assert epochs[0] == 8 and epochs[-2:] == [0, 0]  # once ended, every later loop is empty
    assert time.monotonic() - began < 30
    assert "no consumer is connected" in caplog.text and "waits for one" in caplog.text
    assert "for idle_s=2 s: the producer's loop ends" in caplog.text


class _Slow(torch.utils.data.Dataset):
    def __len__(self):
        return 100_000

    def __getitem__(self, index):
        time.sleep(0.001)
        return torch.full((1000,), float(index))


class _Own:
    """A DataLoader inside an iterable of one's own: its workers pass each batch's
    descriptor as they do alone (through ``pymp-*`` folders), not through lent segments."""

    def __init__(self, loader):
        self.loader = loader

    def __iter__(self):
        return iter(self.loader)


def _serve_forever(endpoint):
    # Its workers make pymp-* folders of their own, not one inherited from a parent that made one
    multiprocessing.current_process()._config.pop("tempdir", None)
    loader = DataLoader(_Slow(), batch_size=16, num_workers=2, multiprocessing_context=FORK)
    with Producer(_Own(loader), endpoint=endpoint, epochs=None) as producer:
        producer.serve()


def _read_until_gone(endpoint):
    with contextlib.suppress(SharingError):
        for _ in Consumer(endpoint):
            pass


def _tree(pid):
    """``pid`` and its descendants (children of any of its threads)."""
    tasks = Path(f"/proc/{pid}/task").iterdir()
    children = [c for task in tasks for c in (task / "children").read_text().split()]
    return [pid] + [p for child in children for p in _tree(int(child))]


def _pymp_folders_of(pids):
    """The ``pymp-*`` folders whose listener sockets the processes ``pids`` hold."""
    inodes = set()
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                inodes.add(os.readlink(fd).removeprefix("socket:[").removesuffix("]"))
    lines = Path("/proc/net/unix").read_text().splitlines()[1:]
    paths = [line.split()[-1] for line in lines if line.split()[6] in inodes]
    return {os.path.dirname(path) for path in paths if "/pymp-" in path}


def test_what_a_killed_producers_workers_left_in_the_temp_folder_goes_at_the_next_start():
    """SIGKILL for the producer and its DataLoader workers at once (a job's end on a cluster):
    their ``pymp-*`` folders stay behind, and the next producer's start removes them."""
    endpoint = f"unix:@killed-{os.getpid()}"
    producer = start(_serve_forever, endpoint, daemon=False)  # it starts workers
    start(_read_until_gone, endpoint)
    deadline, theirs = time.monotonic() + 20, set()
    while len(theirs) < 2:  # each of the two workers has passed a batch's descriptor
        assert time.monotonic() < deadline, "the workers made no pymp-* folder"
        time.sleep(0.1)
        pids = _tree(producer.pid)
        theirs = _pymp_folders_of(pids)
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    producer.join(10)
    time.sleep(0.5)
    assert theirs <= left_entries()  # as a DataLoader's killed workers leave them
    Producer(id_batches(8, 4)).close()
    assert not theirs & left_entries()


def test_the_drop_ins_consumer_resumes_from_its_state():
    """TensorSocket has no resume; its drop-in's consumer takes `Consumer`'s."""
    port = f"resume{os.getpid()}"
    producer = TensorProducer(id_batches(64, 8), port, join_grace_s=0.2, rubber_band_pct=1.0)
    results, resumed = FORK.Queue(), FORK.Event()

    def first_life_then_second():
        consumer = TensorConsumer(port, batch_size=8, connect_timeout_s=30)
        batches = iter(consumer)
        seen = [i for _ in range(3) for i in next(batches)["id"].tolist()]
        state = consumer.state_dict()
        consumer.leave()  # as if killed: its state is in the checkpoint
        again = TensorConsumer(port, batch_size=8, connect_timeout_s=30, state=state)
        resumed.set()
        results.put((seen, [i for batch in again for i in batch["id"].tolist()], again.epoch))
        again.leave()

    start(first_life_then_second)
    assert len(list(producer)) == 8
    resumed.wait(30)  # join() ends the stream once no consumer is left
    producer.join(grace_s=5.0)
    seen, rest, epoch = results.get(timeout=30)
    assert seen + rest == list(range(64)) and epoch == 1
