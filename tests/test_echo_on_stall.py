"""`EchoOnStall`: echoes only while the next fresh batch is not ready."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

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


def test_leaving_early_stops_the_background_thread():
    before = threading.active_count()
    stage = EchoOnStall(slow_source(1000, 0.001), max_factor=2)
    for i, _ in enumerate(stage):
        if i == 5:
            break
    deadline = time.monotonic() + 2
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert threading.active_count() == before


@pytest.mark.parametrize(("key", "bad"), [("max_factor", 0), ("max_factor", 2.5), ("prefetch", 0)])
def test_bad_arguments(key, bad):
    args = {"max_factor": 2, "prefetch": 2, key: bad}
    with pytest.raises(ValueError, match=key):
        EchoOnStall([], **args)
