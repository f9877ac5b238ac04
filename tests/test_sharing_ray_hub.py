"""The Ray backend's hub as a plain object (its state machine, no cluster): who joins how,
what is held, when the producer may put. The cluster tests are in test_sharing_ray.py."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

pytest.importorskip("ray", reason="ray is not installed (the ray extra: pip install .[ray])")

from sharing import Consumer, Producer
from sharing.ray_backend import RayConsumer, RayProducer
from sharing.ray_backend.hub import Hub


def hub(**overrides: Any) -> Hub:
    settings = {
        "consumers": 1, "max_lag": 4, "max_bytes": 1000, "lease_s": 60.0, "join_grace_s": 0.0,
        "epochs": 2, "batches_per_epoch": 6, "replay_batches": 2, "replay_bytes": 1 << 20,
    }  # fmt: skip
    settings.update(overrides)
    return Hub(settings)


def hello(late_join: str = "auto", batch_size: int | None = None) -> dict[str, Any]:
    from sharing import protocol

    return {
        "version": protocol.PROTOCOL_VERSION,
        "batch_size": batch_size,
        "late_join": late_join,
        "pid": 1,
        "resume": None,
    }


async def put(state: Hub, count: int, nbytes: int = 100) -> None:
    for _ in range(count):
        assert await state.reserve(nbytes)
        state.publish({"ref": [None], "nbytes": nbytes, "rows": 4})


def test_joins_follow_the_local_policy_and_refusals_name_the_way_out() -> None:
    async def scenario() -> list[Any]:
        state = hub()
        first = await state.hello(hello())
        await put(state, 1)
        replay = await state.hello(hello("replay"))
        await put(state, 3)
        refused = await state.hello(hello("replay"))
        wraps = await state.hello(hello())
        waits = await state.hello(hello("next_epoch"))
        bad = await state.hello(hello(batch_size=0))
        return [first, replay, refused, wraps, waits, bad]

    first, replay, refused, wraps, waits, bad = asyncio.run(scenario())
    assert [first["mode"], replay["mode"], wraps["mode"], waits["mode"]] == [
        "start", "replay", "wrap", "next_epoch",
    ]  # fmt: skip
    assert refused["type"] == "error" and refused["code"] == "late_join"
    assert "replay_batches" in refused["reason"]
    assert bad["code"] == "bad_argument" and "batch_size" in bad["reason"]


def test_the_producer_waits_for_max_lag_and_for_max_bytes() -> None:
    async def scenario() -> tuple[bool, bool, bool]:
        state = hub(max_lag=3, max_bytes=450, replay_batches=0)
        await state.hello(hello())
        await put(state, 3)
        at_lag = await state.reserve(100)  # 3 unread: max_lag
        await state.next(0, 2)  # two read and let go: lag 1, 100 bytes held
        under = await state.reserve(100)
        state.publish({"ref": [None], "nbytes": 100, "rows": 4})
        over = await state.reserve(400)  # 200 held + 400 > 450
        return at_lag, under, over

    at_lag, under, over = asyncio.run(scenario())
    assert (at_lag, under, over) == (False, True, False)


def test_batches_no_consumer_needs_are_let_go_but_the_replay_window_is_kept() -> None:
    async def scenario() -> tuple[int, int]:
        state = hub(replay_batches=2, max_lag=10)
        await state.hello(hello())
        await put(state, 5)
        await state.next(0, 5)  # the consumer has read all five
        return len(state.log.entries), state.held_bytes

    entries, held = asyncio.run(scenario())
    assert (entries, held) == (2, 200)  # batches 0 and 1, for late joiners


@pytest.mark.parametrize(
    ("local", "remote", "left_out", "own"),
    [
        (Producer, RayProducer, {"device"}, {"max_bytes", "lease_s"}),
        (Consumer, RayConsumer, set(), {"copy"}),
    ],
)
def test_the_ray_classes_take_the_local_signature_less_what_they_do_not_serve(
    local, remote, left_out, own
):
    mine, theirs = inspect.signature(local).parameters, inspect.signature(remote).parameters
    assert {name: p for name, p in mine.items() if name not in left_out} == {
        name: p for name, p in theirs.items() if name not in own
    }
    for name in left_out:
        with pytest.raises(TypeError, match=name):  # refused before Ray is asked
            remote("ray:x", **{name: None})
