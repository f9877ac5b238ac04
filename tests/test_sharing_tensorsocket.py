"""`sharing.tensorsocket`: TensorSocket's example scripts run unchanged but for the import."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from sharing_checks import FORK, no_shm_left, start

import sharing
from sharing import tensorsocket
from sharing.tensorsocket import TensorConsumer, TensorProducer, endpoint_for

pytestmark = pytest.mark.timeout(120)
EXAMPLES = Path(__file__).parent / "tensorsocket_examples"


def _env() -> dict[str, str]:
    root = str(Path(sharing.__file__).parent.parent)
    path = [root, os.environ.get("PYTHONPATH", "")]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, path)))


def test_tensorsocket_simple_producer_and_consumer_run_with_only_the_import_changed(tmp_path):
    port = str(20000 + os.getpid() % 20000)  # the examples' 5556, unique to this run
    for name in ("simple_producer.py", "simple_consumer.py"):
        text = (EXAMPLES / name).read_text()
        (tmp_path / name).write_text(text.replace('"5556"', f'"{port}"'))
    run = {"cwd": tmp_path, "env": _env(), "stdout": subprocess.PIPE, "text": True}
    with no_shm_left():
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


def test_rubber_band_and_buffer_size_map_onto_replay_and_max_lag():
    batches = [(torch.zeros(4, 2), torch.arange(i * 4, i * 4 + 4)) for i in range(10)]
    port = f"map{os.getpid()}"
    producer = TensorProducer(batches, port, rubber_band_pct=0.3, consumer_max_buffer_size=3)
    assert producer.endpoint == endpoint_for(port)
    assert (producer._producer.max_lag, producer._producer._replay_batches) == (3, 3)
    results = FORK.Queue()
    with no_shm_left():
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
def test_the_shared_loader_needs_neither_pyzmq_nor_tensorsocket_nor_the_rest(module):
    forbidden = ["zmq", "tensorsocket", "tensorflow", "echo", "experiments", "analysis"]
    code = f"import sys, {module}; print(','.join(m for m in {forbidden!r} if m in sys.modules))"
    command = [sys.executable, "-c", code]
    result = subprocess.run(command, capture_output=True, text=True, env=_env())
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""
