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


def hello(
    late_join: str = "auto", batch_size: int | None = None, resume: list[int] | None = None
) -> dict[str, Any]:
    from sharing import protocol

    return {
        "version": protocol.PROTOCOL_VERSION,
        "batch_size": batch_size,
        "late_join": late_join,
        "pid": 1,
        "resume": resume,
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


def test_reserves_granted_before_their_publish_count_toward_max_lag() -> None:
    """The producer's publish is not awaited, and an asyncio actor may run its next reserve
    first: a reservation must count as the lag its batch will add, or a consumer that never
    reads is sent one batch past max_lag."""

    async def scenario() -> list[bool]:
        state = hub(max_lag=3, replay_batches=0)
        await state.hello(hello())
        await put(state, 1)
        granted = [await state.reserve(100) for _ in range(3)]  # no publish in between
        state.publish({"ref": [None], "nbytes": 100, "rows": 4})
        state.publish({"ref": [None], "nbytes": 100, "rows": 4})
        granted.append(await state.reserve(100))  # 3 logged and unread
        return granted

    assert asyncio.run(scenario()) == [True, True, False, False]


def test_batches_no_consumer_needs_are_let_go_but_the_replay_window_is_kept() -> None:
    async def scenario() -> tuple[int, int]:
        state = hub(replay_batches=2, max_lag=10)
        await state.hello(hello())
        await put(state, 5)
        await state.next(0, 5)  # the consumer has read all five
        return len(state.log.entries), state.held_bytes

    entries, held = asyncio.run(scenario())
    assert (entries, held) == (2, 200)  # batches 0 and 1, for late joiners


def test_a_late_joiner_of_a_shuffled_loader_is_loaded_again_or_refused_never_wrapped() -> None:
    """Past the window, a loader whose epochs differ cannot wrap (its wrapped epoch would
    repeat samples): its missed batches are loaded again, or the join is refused."""

    async def join(reload_refusal: str | None) -> dict[str, Any]:
        state = hub(repeats=False, reload_refusal=reload_refusal, max_lag=10)
        await state.hello(hello())
        await put(state, 4)
        return await state.hello(hello())

    reloads = asyncio.run(join(None))
    refused = asyncio.run(join("the loader shuffles without a seed"))
    assert reloads["mode"] == "reload"
    assert refused["code"] == "late_join" and "shuffles without a seed" in refused["reason"]


def again(index: int, epoch: int = 0) -> dict[str, Any]:
    """Batch ``index`` of ``epoch``, loaded again (its ref names it)."""
    return {"epoch": epoch, "index": index, "ref": [f"again {epoch}.{index}"], "nbytes": 100,
            "rows": 4}  # fmt: skip


def test_a_restart_past_the_window_gets_its_batches_loaded_again_before_the_live_ones() -> None:
    """Resumed at batch 4 of epoch 0 with the producer at batch 2 of epoch 1 (window 1): the
    rest of epoch 0, its end, and epoch 1's first two are asked of the producer's loader,
    placed for that consumer alone, and served before the log."""

    async def scenario() -> tuple[list[Any], list[dict], tuple, int]:
        state = hub(max_lag=20, max_bytes=100_000, replay_batches=1, batches_per_epoch=6)
        first = (await state.hello(hello()))["consumer_id"]
        await put(state, 6)
        state.end_epoch()
        await put(state, 2)
        cid = (await state.hello(hello(resume=[0, 4])))["consumer_id"]
        asked = [await state.again(0.01) for _ in range(3)]
        for index in (4, 5):
            assert await state.room(cid)
            assert state.place(cid, again(index))
            if index == 4:
                with pytest.raises(ValueError, match="waits for batch 5 of epoch 0"):
                    state.place(cid, again(3))  # out of order
        assert await state.room(cid)
        state.place(cid, again(0, epoch=1))
        state.place(cid, again(1, epoch=1))
        await put(state, 1)  # the live stream goes on meanwhile
        given = [await state.next(cid, taken) for taken in range(6)]
        needs_none = state.place(first, again(0))  # first needs no catch-up
        state.leave(cid)
        left = state.place(cid, again(2, epoch=1)), await state.room(cid)
        return asked, given, (needs_none, *left), state.held_bytes

    asked, given, refused, held = asyncio.run(scenario())
    assert asked == [[1, 0, 4, 6], [1, 1, 0, 2], None]
    assert [(m["type"], m.get("epoch"), m.get("index")) for m in given] == [
        ("batch", 0, 4), ("batch", 0, 5), ("end_epoch", 0, None), ("batch", 1, 0),
        ("batch", 1, 1), ("batch", 1, 2),
    ]  # fmt: skip
    assert given[0]["ref"] == ["again 0.4"] and given[5]["seq"] >= 0  # then the log's
    assert given[0]["ahead"][0][1] == ["again 0.5"]  # the next is pulled ahead
    assert refused == (False, False, None)  # nothing is placed for those; None: gone
    assert held == 9 * 100  # the log's 9 (first has read none); none of the leaver's


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
