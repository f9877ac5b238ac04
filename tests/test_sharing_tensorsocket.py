"""`sharing.tensorsocket`: TensorSocket's example scripts run unchanged but for the import."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
import torch
from sharing_checks import FORK, no_leftovers, start

import sharing
from sharing import tensorsocket
from sharing.tensorsocket import TensorConsumer, TensorProducer, endpoint_for

pytestmark = pytest.mark.timeout(120)
EXAMPLES = Path(__file__).parent / "tensorsocket_examples"


def _env() -> dict[str, str]:
    root = str(Path(sharing.__file__).parent.parent)
    path = [root, os.environ.get("PYTHONPATH", "")]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, path)))


@pytest.mark.slow
def test_tensorsocket_simple_producer_and_consumer_run_with_only_the_import_changed(tmp_path):
    port = str(20000 + os.getpid() % 20000)  # the examples' 5556, unique to this run
    for name in ("simple_producer.py", "simple_consumer.py"):
        text = (EXAMPLES / name).read_text()
        (tmp_path / name).write_text(text.replace('"5556"', f'"{port}"'))
    run = {"cwd": tmp_path, "env": _env(), "stdout": subprocess.PIPE, "text": True}
    with no_leftovers():
        producer = subprocess.Popen([sys.executable, "simple_producer.py"], **run)
        consumer = subprocess.Popen([sys.executable, "simple_consumer.py"], **run)
        try:
            consumed, _ = consumer.communicate(timeout=90)
            produced, _ = producer.communicate(timeout=30)
        finally:
            producer.kill()
            consumer.kill()
    assert (producer.returncode, consumer.returncode) == (0, 0)
    assert produced.splitlines()[-1] == "Finished"
    assert consumed.splitlines()[-1] == "Finished"
    steps = re.findall(r"I:(\d+) - tensor\(([\d.]+)\) (\d+) (\d+)", consumed)
    # 10 epochs of 24 batches of 8 re-cut into 12 batches of 16, each starting at an even id
    assert len(steps) == 10 * 12
    for n, (i, first_label, epoch, size) in enumerate(steps):
        assert (int(i), float(first_label), int(epoch), int(size)) == (
            n % 12,
            2.0 * (n % 12),
            n // 12,
            16,
        )


def test_unsupported_arguments_warn_once_saying_what_happens_instead(monkeypatch):
    monkeypatch.setattr(tensorsocket, "_warned", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        TensorProducer([], f"w{os.getpid()}", heart_ports=(1, 2), pack_fn=id,
                       producer_batch_size=4).join()  # fmt: skip
        TensorProducer([], f"x{os.getpid()}", heart_ports=(1, 2)).join()  # no second warning
    messages = [str(w.message) for w in caught]
    assert [m.split()[1] for m in messages] == ["heart_ports", "pack_fn", "producer_batch_size"]
    assert "heartbeat is needed" in messages[0] and "ignored" in messages[1]


def _consume_ts(port, results):
    consumer = TensorConsumer(port, batch_size=6)
    epochs = []
    for _ in range(2):
        epochs.append([int(label) for _, labels in consumer for label in labels.tolist()])
    results.put((epochs, consumer.epoch))


@pytest.mark.slow
def test_rubber_band_and_buffer_size_map_onto_replay_and_max_lag():
    batches = [(torch.zeros(4, 2), torch.arange(i * 4, i * 4 + 4)) for i in range(10)]
    port = f"map{os.getpid()}"
    producer = TensorProducer(batches, port, rubber_band_pct=0.3, consumer_max_buffer_size=3)
    assert producer.endpoint == endpoint_for(port)
    assert (producer._producer.max_lag, producer._producer._replay_batches) == (3, 3)
    results = FORK.Queue()
    with no_leftovers():
        start(_consume_ts, port, results)
        for _ in range(2):
            assert len([batch for batch in producer]) == 10
        producer.join()
        epochs, finished = results.get(timeout=30)
    assert epochs == [list(range(40))] * 2 and finished == 2


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"rubber_band_pct": 2.0}, "rubber_band_pct"), ({"consumer_max_buffer_size": 0}, "buffer")],
)
def test_bad_tensorsocket_arguments_name_themselves(kwargs, name):
    with pytest.raises(ValueError, match=name):
        TensorProducer([], f"bad{os.getpid()}", **kwargs)


@pytest.mark.parametrize("module", ["sharing", "sharing.tensorsocket"])
@pytest.mark.slow
def test_the_shared_loader_needs_neither_pyzmq_nor_tensorsocket_nor_the_rest(module):
    forbidden = ["zmq", "tensorsocket", "tensorflow", "echo", "experiments", "analysis"]
    code = f"import sys, {module}; print(','.join(m for m in {forbidden!r} if m in sys.modules))"
    command = [sys.executable, "-c", code]
    result = subprocess.run(command, capture_output=True, text=True, env=_env())
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


# TensorSocket's start order: the producer first, its consumers later (or the other way
# round), within a few seconds. Offsets in seconds from the first start.
START_ORDERS = {
    "producer-first-consumers-3s-later": {"producer": 0.0, "8": 3.0, "16": 3.0},
    "consumers-first": {"8": 0.0, "16": 0.0, "producer": 2.0},
    "staggered": {"producer": 0.0, "8": 1.0, "16": 2.5},
}


@pytest.mark.parametrize("offsets", START_ORDERS.values(), ids=START_ORDERS.keys())
@pytest.mark.slow
def test_tensorsocket_start_order_gives_every_consumer_every_epoch_whole(tmp_path, offsets):
    """A 2-worker DataLoader of 200 samples in batches of 8, 3 epochs of the producer's loop;
    consumers of batch size 8 and 16 each loop 3 epochs with a 20 ms step."""
    port = str(20000 + os.getpid() % 20000)
    for name in ("loader_producer.py", "loader_consumer.py"):
        (tmp_path / name).write_text((EXAMPLES / name).read_text())
    run = {"cwd": tmp_path, "env": _env(), "stdout": subprocess.PIPE, "text": True}
    commands = {
        "producer": ["loader_producer.py", port, str(int(port) + 1)],
        **{size: ["loader_consumer.py", port, str(int(port) + 1), size] for size in ("8", "16")},
    }
    processes, began = {}, time.monotonic()
    with no_leftovers():
        try:
            for name, offset in sorted(offsets.items(), key=lambda item: item[1]):
                time.sleep(max(0.0, began + offset - time.monotonic()))
                processes[name] = subprocess.Popen([sys.executable, *commands[name]], **run)
            outputs = {name: p.communicate(timeout=90)[0] for name, p in processes.items()}
        finally:
            for process in processes.values():
                process.kill()
    assert {name: p.returncode for name, p in processes.items()} == dict.fromkeys(offsets, 0)
    assert outputs["producer"].splitlines()[-1] == "Finished"
    for size in ("8", "16"):
        assert outputs[size].splitlines() == [
            *(f"Epoch {epoch}: 200 samples, 200 distinct, 0-199" for epoch in range(3)),
            "Finished",
        ], (size, outputs[size])


def _one_epoch_then_more(port, results):
    consumer = TensorConsumer(port, batch_size=4)
    first = sum(len(labels) for _, labels in consumer)
    try:
        next(iter(consumer))
        results.put((first, "a batch"))
    except sharing.StreamEnded as error:
        results.put((first, f"StreamEnded: {error}"))


def test_a_drop_in_loop_after_the_last_epoch_raises_naming_the_epochs_served():
    batches = [(torch.zeros(4, 2), torch.arange(i * 4, i * 4 + 4)) for i in range(5)]
    port = f"end{os.getpid()}"
    producer = TensorProducer(batches, port, join_grace_s=0.0)
    results = FORK.Queue()
    with no_leftovers():
        start(_one_epoch_then_more, port, results)
        assert len(list(producer)) == 5
        producer.join()
        first, after = results.get(timeout=30)
    assert first == 20
    assert after.startswith("StreamEnded") and "finished its stream" in after, after
    assert "1 whole epoch" in after


@pytest.mark.parametrize(("gpus", "device"), [(0, None), (1, torch.device("cuda"))])
def test_device_auto_counts_gpus_without_initialising_cuda(monkeypatch, gpus, device):
    # torch.cuda.is_available() initialises CUDA, after which forked consumers cannot use it;
    # torch.cuda.device_count() asks NVML.
    def poisons_fork() -> bool:
        raise AssertionError("torch.cuda.is_available() was called")

    monkeypatch.setattr(torch.cuda, "is_available", poisons_fork)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    producer = TensorProducer([torch.zeros(2)], f"auto{gpus}-{os.getpid()}", device="auto")
    assert producer._producer.device == device
    producer._producer.stop()
    producer.join()
