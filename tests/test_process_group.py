"""`ProcessGroup` (tests/process_group.py), which the CUDA sharing tests start their producers
and consumers through: whatever a test did, none of its processes outlives it."""

from __future__ import annotations

import multiprocessing as mp
import signal
import time

from process_group import ProcessGroup

SPAWN = mp.get_context("spawn")  # as the CUDA tests start theirs


def _serve_forever(ready) -> None:
    ready.set()
    while True:
        time.sleep(1)


def _ignore_sigterm(ready) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _serve_forever(ready)


def _finish() -> None:
    pass


def test_stop_ends_what_still_runs_and_kills_what_ignores_sigterm():
    group = ProcessGroup(SPAWN, grace_s=1.0)
    done = group.start(_finish)
    done.join(60)
    ready = [SPAWN.Event(), SPAWN.Event()]
    forever = group.start(_serve_forever, ready[0])
    stubborn = group.start(_ignore_sigterm, ready[1])
    assert all(event.wait(60) for event in ready)  # serving; SIGTERM ignored by the second
    started = time.monotonic()
    stopped = group.stop()
    assert time.monotonic() - started < 10
    assert stopped == [forever.name, stubborn.name]
    assert not any(p.is_alive() for p in group.processes)
    assert (done.exitcode, forever.exitcode, stubborn.exitcode) == (
        0,
        -signal.SIGTERM,
        -signal.SIGKILL,
    )
    assert group.stop() == []  # a second stop has nothing left to do
