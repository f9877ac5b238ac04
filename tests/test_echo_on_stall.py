"""`EchoOnStall`: echoes only while the next fresh batch is not ready."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from sharing_checks import check_workers_gone, failing_dataloader

from echo.torch import EchoOnStall


def slow_source(n: int, delay_s: float):
    for i in range(n):
        time.sleep(delay_s)
        yield i


def test_never_echoes_when_fresh_batches_are_always_ready():
    stage = EchoOnStall(list(range(25)), max_factor=8)
    out = []
    for batch in stage:
        out.append(batch)
        time.sleep(0.02)  # the train step; the loader (a list) is ready long before
    assert out == list(range(25))
    assert (stage.fresh, stage.echoed) == (25, 0)


def test_input_bound_pipeline_echoes_up_to_max_factor():
    stage = EchoOnStall(slow_source(6, 0.05), max_factor=3)
    out = []
    for batch in stage:
        out.append(batch)
        time.sleep(0.001)
    uses = Counter(out)
    assert sorted(uses) == list(range(6))
    assert all(uses[i] == 3 for i in range(5)), uses  # 50x slower upstream: cap reached
    assert 1 <= uses[5] <= 3
    assert stage.fresh == 6
    assert stage.emitted == len(out)


def test_max_factor_one_never_echoes():
    stage = EchoOnStall(slow_source(4, 0.02), max_factor=1)
    assert list(stage) == [0, 1, 2, 3]
    assert stage.echoed == 0


def test_echoes_are_the_same_objects():
    batches = [object() for _ in range(3)]
    out = list(EchoOnStall(iter(batches), max_factor=4))
    assert set(map(id, out)) <= set(map(id, batches))


def test_loader_errors_reach_the_training_loop():
    def broken():
        yield 1
        raise RuntimeError("decode failed")

    with pytest.raises(RuntimeError, match="decode failed"):
        list(EchoOnStall(broken(), max_factor=2))


def test_a_failing_dataloaders_workers_are_gone_when_its_error_reaches_the_loop():
    """The error may be held long after it reached the loop (here by pytest.raises); the
    DataLoader's worker processes must not live as long (the error's traceback held them)."""
    loader, worker_pids = failing_dataloader()
    with pytest.raises(OSError, match="corrupt sample 40") as raised:
        list(EchoOnStall(loader, max_factor=2))
    check_workers_gone(worker_pids(), raised.value)


def test_leaving_early_stops_the_background_thread():
    # The threads started meanwhile, not a count: a thread an earlier test left may end here.
    before = set(threading.enumerate())
    stage = EchoOnStall(slow_source(1000, 0.001), max_factor=2)
    for i, _ in enumerate(stage):
        if i == 5:
            break
    deadline = time.monotonic() + 2
    while set(threading.enumerate()) - before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not set(threading.enumerate()) - before


@pytest.mark.parametrize(("key", "bad"), [("max_factor", 0), ("max_factor", 2.5), ("prefetch", 0)])
def test_bad_arguments(key, bad):
    args = {"max_factor": 2, "prefetch": 2, key: bad}
    with pytest.raises(ValueError, match=key):
        EchoOnStall([], **args)


def test_counts_and_state_describe_the_batches_trained_on():
    """Issue 14, item 7: the loader thread runs ahead; after 10 trained batches the counts
    said 13, and a resume skipped 3 batches that were never trained on."""
    import torch

    from echo.torch import build_pipeline

    def make():
        rows = [torch.tensor([i]) for i in range(160)]
        return EchoOnStall(build_pipeline(rows, batch_size=4, seed=0), max_factor=1)

    reference = [b.tolist() for b in make()]
    stage = make()
    it = iter(stage)
    head = [next(it).tolist() for _ in range(10)]
    time.sleep(0.1)  # let the loader thread fill its queue
    assert stage.fresh_examples == 40
    state = stage.state_dict()
    assert state["source"]["fresh"] == 40
    assert (state["position"], state["fresh"], state["emitted"]) == (10, 10, 10)
    del it
    resumed = make()
    resumed.load_state_dict(state)
    tail = [b.tolist() for b in resumed]
    assert head + tail == reference
    assert resumed.fresh_examples == 160


def test_leaving_early_returns_at_once_with_a_slow_upstream():
    stage = EchoOnStall(slow_source(100, 1.0), max_factor=2)
    it = iter(stage)
    next(it)
    start = time.monotonic()
    it.close()  # what a `break` or an exception does
    assert time.monotonic() - start < 1.0


def test_a_loader_that_keeps_up_is_never_echoed_even_at_epoch_start():
    """An instant loader and 5 ms steps: the next batch is always ready in time, also on a
    busy machine (with instant steps too, a descheduled loader thread would be a stall)."""
    stage = EchoOnStall(list(range(6)), max_factor=4)
    for _ in range(5):
        batches = []
        for batch in stage:
            batches.append(batch)
            time.sleep(0.005)  # the train step
        assert batches == list(range(6))
    assert stage.echoed == 0


def test_numpy_integers_are_accepted():
    np = pytest.importorskip("numpy")
    stage = EchoOnStall([], max_factor=np.int64(2), prefetch=np.int32(3))
    assert (stage.max_factor, stage.prefetch) == (2, 3)


@pytest.mark.slow
def test_an_epoch_left_open_at_exit_ends_the_process_cleanly():
    """A script that stops reading mid-epoch and just ends: the loader thread is stopped and
    joined at exit. Before, it was caught inside the loader's torch op while the interpreter
    finalized, and the process aborted ("terminate called without an active exception")."""
    import os
    import subprocess
    import sys

    script = """
import torch
from echo.torch import EchoOnStall
torch.set_num_threads(1)
class Products:
    def __iter__(self):
        a = torch.randn(700, 700)
        for _ in range(1000):
            yield torch.mm(a, a)
epoch = iter(EchoOnStall(Products(), max_factor=2))
for _ in range(3):
    next(epoch)
print("read 3")
"""
    path = [os.getcwd(), os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, path)))
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "read 3\n", "")


def test_instant_steps_on_an_instant_loader_are_rarely_echoed(monkeypatch):
    """Before, a step that found the queue empty for an instant (the loader thread had not
    had the GIL yet) echoed at once: half the steps of this loop were echoes. Now it waits
    a grace period (0.1 ms by default) for the batch. The test widens the grace to 20 ms so
    that a busy machine's scheduler wake-up latency (which can exceed 0.1 ms) cannot make
    the echoes; without any grace, the loop still echoes about half its steps."""
    monkeypatch.setattr("echo.torch.on_stall._GRACE_S", 0.02)
    stage = EchoOnStall(list(range(6)), max_factor=4)
    for _ in range(20):
        assert [b for b in stage if not stage.last_was_echo] == list(range(6))
    assert stage.echoed <= 0.25 * stage.fresh
