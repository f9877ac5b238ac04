"""A stress test of the producer's two promises under CPU load: a loader that fails surfaces
as an error in ``serve()`` and in every consumer, and a producer that is gone (stopped, or
killed) reaches every consumer within 5 s. The configuration is the one where a hang was
once seen: four consumers, 64 x 3 x 32 x 32 float32 batches from a 2-worker DataLoader with
CPU work per sample, ``max_lag=4``, ``epochs=100``, a busy machine."""

from __future__ import annotations

import os
import random
import signal
import threading
import time

import pytest
import torch
from sharing_checks import FORK, no_leftovers, start
from torch.utils.data import DataLoader, Dataset

from sharing import Consumer, Producer, ProducerGone, SharingError

pytestmark = pytest.mark.timeout(180)

CONSUMERS = 4
TRIALS = 12
PROMPT_S = 5.0


class _Samples(Dataset):
    """3x32x32 float32 samples with ~0.2 ms of CPU work each; sample ``fail_at`` raises."""

    def __init__(self, fail_at: int | None) -> None:
        self.fail_at = fail_at

    def __len__(self) -> int:
        return 64 * 128

    def __getitem__(self, index: int) -> torch.Tensor:
        if index == self.fail_at:
            raise OSError(f"corrupt sample {index}")
        deadline = time.process_time() + 0.0002
        while time.process_time() < deadline:
            pass
        return torch.full((3, 32, 32), float(index))


def _serve(endpoint: str, fail_at: int | None, stop_after_s: float | None, report) -> None:
    loader = DataLoader(_Samples(fail_at), batch_size=64, num_workers=2)
    with Producer(loader, endpoint=endpoint, epochs=100, max_lag=4, consumers=CONSUMERS) as p:
        if stop_after_s is not None:  # counted from when every consumer has connected
            threading.Thread(target=_stop_later, args=(p, stop_after_s), daemon=True).start()
        try:
            p.serve()
            report.put(("producer", "returned", time.monotonic()))
        except OSError as error:
            report.put(("producer", f"raised {error}", time.monotonic()))


def _stop_later(producer: Producer, after_s: float) -> None:
    while producer.connected() < CONSUMERS:
        time.sleep(0.01)
    time.sleep(after_s)
    producer.stop()


def _consume(endpoint: str, name: int, report) -> None:
    try:
        consumer = Consumer(endpoint, connect_timeout_s=30)
        for _epoch in range(100):
            for _batch in consumer:
                pass
        report.put((name, "ended quietly", time.monotonic()))
    except (SharingError, ConnectionError) as error:  # the latter: a failure, reported
        report.put((name, f"{type(error).__name__}: {error}", time.monotonic()))


def _burn(seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        pass


def _trial(kind: str, rng: random.Random) -> tuple[float, dict]:
    """Run one trial; the end's time as the producer saw it, and each party's outcome."""
    report = FORK.Queue()
    endpoint = f"unix:@stress-{os.getpid()}-{rng.getrandbits(32)}"
    fail_at = rng.randrange(64 * 2, 64 * 20) if kind == "fail" else None
    stop_after = rng.uniform(0.3, 1.5) if kind == "stop" else None
    producer = start(_serve, endpoint, fail_at, stop_after, report, daemon=False)
    consumers = [start(_consume, endpoint, i, report) for i in range(CONSUMERS)]
    ended_at = None
    if kind == "kill":
        time.sleep(rng.uniform(1.0, 2.5))
        os.kill(producer.pid, signal.SIGKILL)
        ended_at = time.monotonic()
    outcomes = {}
    for _ in range(CONSUMERS + (kind != "kill")):
        name, what, when = report.get(timeout=60)
        outcomes[name] = (what, when)
    for process in (producer, *consumers):
        process.join(10)
        assert not process.is_alive(), f"a {kind} trial left a process running"
    if kind != "kill":
        ended_at = outcomes.pop("producer")[1]
    return ended_at, outcomes


@pytest.mark.slow
def test_every_consumer_learns_promptly_how_the_stream_ended_under_load():
    rng = random.Random(20261202)
    burner = start(_burn, 150.0)
    try:
        with no_leftovers():
            for trial in range(TRIALS):
                kind = ("fail", "stop", "kill")[trial % 3]
                ended_at, outcomes = _trial(kind, rng)
                assert len(outcomes) == CONSUMERS, (kind, outcomes)
                for name, (what, when) in outcomes.items():
                    where = f"trial {trial} ({kind}), consumer {name}: {what}"
                    if kind == "fail":
                        assert what.startswith("SharingError") and "failed" in what, where
                        assert "corrupt sample" in what, where
                    elif kind == "stop":
                        assert what.startswith("SharingError") and "was stopped" in what, where
                    else:
                        assert what.startswith(ProducerGone.__name__), where
                    assert when - ended_at < PROMPT_S, f"{where}: {when - ended_at:.1f} s"
    finally:
        burner.kill()
