"""The hub: a Ray actor, named ``NAME`` in the ``sharing`` namespace and placed on the
producer's node, that keeps the stream (each batch's object reference, where each consumer
stands, who joined how) and answers the producer and the consumers."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from dataclasses import dataclass, field
from typing import Any

import ray

from sharing import policy
from sharing.again import missed
from sharing.peers import CatchUp
from sharing.ray_backend.common import (
    AHEAD,
    POLL_S,
    log,
)

__all__ = ["Hub", "RemoteHub"]


@dataclass
class _Member:
    """A consumer as the hub sees it."""

    mode: str
    base: int | None  # the log position of its first entry; None until its epoch starts
    wait_epoch: int | None
    start_index: int  # wrap: the index it joined at (its last epoch needs that many more)
    seen: float
    pid: int
    taken: int = 0  # entries it has asked past (so released)
    served: int = 0  # log position after the last entry it was given
    # Its catch-up: the entries its stream starts with, loaded again for it alone (a restart
    # or a join past the replay window), before the log from ``base``.
    catchup: list[CatchUp] = field(default_factory=list)  # ranges not yet all placed
    private_len: int = 0  # entries of the catch-up, end_epoch entries included
    private: dict[int, dict] = field(default_factory=dict)  # placed and not taken, by index
    placed: int = 0  # catch-up entries placed

    @property
    def pos(self) -> int | None:
        """Its next log position (``base`` while it catches up); None while it waits for a
        next epoch."""
        return None if self.base is None else self.base + max(0, self.taken - self.private_len)

    @property
    def catching_up(self) -> bool:
        return self.taken < self.private_len


@dataclass
class _Log:
    """The stream: log positions in order, each a batch or an epoch's end."""

    entries: dict[int, dict] = field(default_factory=dict)
    batches_before: dict[int, int] = field(default_factory=lambda: {0: 0})
    head: int = 0  # the next position

    def append(self, entry: dict) -> int:
        pos = self.head
        self.entries[pos] = entry
        self.head += 1
        self.batches_before[self.head] = self.batches_before[pos] + (entry["type"] == "batch")
        return pos

    def lag(self, pos: int) -> int:
        """Batches logged at or after ``pos``."""
        return self.batches_before[self.head] - self.batches_before.get(pos, 0)


class Hub:
    """The stream's state, one actor per producer (an asyncio actor: one thread, no locks)."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.consumers_wanted = settings["consumers"]
        self.max_lag = settings["max_lag"]
        self.max_bytes = settings["max_bytes"]
        self.lease_s = settings["lease_s"]
        self.join_grace_s = settings["join_grace_s"]
        self.epochs = settings["epochs"]
        self.batches_per_epoch = settings["batches_per_epoch"]
        self.replay_batches = settings["replay_batches"]
        self.replay_bytes = settings["replay_bytes"]
        self.repeats = settings.get("repeats", True)
        self.reload_refusal = settings.get("reload_refusal")
        self.next_private_seq = -1  # catch-up entries' seqs count down, the log's up
        self.window = 0 if self.replay_batches is None else self.replay_batches
        self.log = _Log()
        self.members: dict[int, _Member] = {}
        self.next_id = 0
        self.epoch = 0  # epoch of the next batch
        self.index = 0  # batches of ``epoch`` logged
        self.next_op = 0  # the producer's next call to apply
        self.late = 0  # batches logged after the last epoch, for wrapped consumers
        self.epoch_pos: dict[int, int] = {}
        self.regular_end: int | None = None  # set when no regular batch follows
        self.end: dict | None = None  # the stream's end, once known
        self.held_bytes = 0
        self.reserved = 0  # batches reserved and not yet published: the lag they will add
        self.started = False
        self.last_hello = 0.0
        self.counts = {"joined": 0, "left": 0, "lost": 0, "served": 0, "again": 0}
        self._changed = asyncio.Event()
        self._reaper: asyncio.Task | None = None

    # -- waiting -----------------------------------------------------------------------

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def _until(self, ready: Any, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not ready():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(left, 3600.0))
        return True

    def _ensure_reaper(self) -> None:
        if self._reaper is None:
            self._reaper = asyncio.get_running_loop().create_task(self._reap())

    async def _reap(self) -> None:
        while True:
            await asyncio.sleep(self.lease_s / 4)
            now = time.monotonic()
            lost = [cid for cid, m in self.members.items() if now - m.seen > self.lease_s]
            for cid in lost:
                self._drop(cid)
                self.counts["lost"] += 1
                log.warning("consumer %d lost: no lease renewal for %.2f s", cid, self.lease_s)
            if lost:
                self._forget()
                self._notify()

    # -- consumers ---------------------------------------------------------------------

    def _position(self) -> policy.Position:
        return policy.Position(
            epoch=self.epoch,
            index=self.index,
            window=self.window,
            batches_per_epoch=self.batches_per_epoch,
            epochs=self.epochs,
            finished=self.regular_end is not None or self.end is not None,
            repeats=self.repeats,
            reload_refusal=self.reload_refusal,
        )

    async def hello(self, hello: dict[str, Any]) -> dict[str, Any]:
        """A consumer's join: a welcome (its id, mode, epoch) or an error (code, reason)."""
        self._ensure_reaper()
        join = policy.plan(hello, self._position())
        if isinstance(join, policy.Refusal):
            return {"type": "error", "code": join.code, "reason": join.reason}
        cid = self.next_id
        self.next_id += 1
        pos: int | None
        catchup: list[CatchUp] = []
        position = self._position()
        if join.mode == "replay":
            pos = self.epoch_pos[join.epoch]
        elif join.mode == "resume" and policy.held(join.epoch, position):
            pos = self.epoch_pos.get(join.epoch, self.log.head) + join.start_index
        elif join.mode == "next_epoch":
            pos = None
        else:  # start, wrap: from the next batch logged; reload, resume: after a catch-up
            pos = self.log.head
            if join.mode == "reload":
                catchup = missed(self.epoch, 0, position)
            elif join.mode == "resume":
                catchup = missed(join.epoch, join.start_index, position)
        self.members[cid] = member = _Member(
            mode=join.mode,
            base=pos,
            wait_epoch=join.epoch if pos is None else None,
            start_index=join.start_index if join.mode == "wrap" else 0,
            seen=time.monotonic(),
            pid=hello["pid"],
            catchup=catchup,
            private_len=sum(step.stop - step.start + step.ends for step in catchup),
        )
        self._place_ends(member)
        self.counts["joined"] += 1
        self.last_hello = time.monotonic()
        self._notify()
        return {
            "type": "welcome",
            "consumer_id": cid,
            "mode": join.mode,
            "epoch": join.epoch,
            "batches_per_epoch": self.batches_per_epoch,
            "lease_s": self.lease_s,
        }

    def beat(self, cid: int) -> bool:
        """Renew ``cid``'s lease; False if it was dropped."""
        member = self.members.get(cid)
        if member is not None:
            member.seen = time.monotonic()
        return member is not None

    def leave(self, cid: int) -> None:
        """``cid`` leaves: it is served no more."""
        if self._drop(cid):
            self.counts["left"] += 1
            self._forget()
            self._notify()

    def _drop(self, cid: int) -> bool:
        """Forget consumer ``cid`` and its catch-up entries; False if it was not here."""
        member = self.members.pop(cid, None)
        if member is None:
            return False
        for entry in member.private.values():
            self.held_bytes -= entry.get("nbytes", 0)
        member.private.clear()
        return True

    def _entry_for(self, member: _Member) -> dict | None:
        """What ``member`` gets at its position now: an entry, the end, or None (wait)."""
        if self.end is not None and self.end["reason"] != "finished":
            return self.end
        if member.catching_up:
            return member.private.get(member.taken)
        if member.pos is None:
            return self.end  # waiting for a next epoch: only the end can come
        if self.regular_end is not None and member.pos >= self.regular_end:
            owed = self.regular_end + (member.start_index if member.mode == "wrap" else 0)
            if member.pos >= owed:
                return self.end or {"type": "end", "reason": "finished", "detail": ""}
        entry = self.log.entries.get(member.pos)
        if entry is None and self.end is not None:  # ended short of what it was owed
            return self.end
        return entry

    async def next(self, cid: int, taken: int) -> dict[str, Any]:
        """Entry ``taken`` of ``cid``'s stream (which releases every earlier one), waiting at
        most `POLL_S`: a batch (``ref``: its object, in a list), an epoch's end, the
        stream's end, ``wait`` (nothing yet) or ``error`` (this consumer was dropped)."""
        member = self.members.get(cid)
        if member is None:
            return {
                "type": "error",
                "code": "lost",
                "reason": f"consumer {cid} was dropped (left, or renewed no lease for "
                f"{self.lease_s:g} s)",
            }
        member.seen = time.monotonic()
        if taken > member.taken:
            for index in range(member.taken, min(taken, member.private_len)):
                entry = member.private.pop(index, None)
                if entry is not None:
                    self.held_bytes -= entry.get("nbytes", 0)
            member.taken = taken
            self._forget()
            self._notify()
        found: list[dict] = []

        def ready() -> bool:
            if cid not in self.members:
                return True
            entry = self._entry_for(member)
            if entry is not None:
                found.append(entry)
            return entry is not None

        if not await self._until(ready, POLL_S) or not found:
            return {"type": "wait"} if cid in self.members else await self.next(cid, taken)
        entry = found[-1]
        private = member.catching_up
        if member.pos is not None and entry["type"] != "end" and not private:
            member.served = member.pos + 1
        if entry["type"] == "batch":
            self.counts["served"] += 1
            reply = {key: value for key, value in entry.items() if key != "nbytes"}
            if private:
                following = range(member.taken + 1, member.private_len)
                after = (member.private.get(index) for index in following)
            else:
                after = (self.log.entries.get(p) for p in range(entry["seq"] + 1, self.log.head))
            reply["ahead"] = [
                (e["seq"], e["ref"])
                for e in itertools.islice(after, AHEAD)
                if e and e["type"] == "batch"
            ]
            return reply
        return entry

    # -- the producer ------------------------------------------------------------------

    def _lags(self) -> list[int]:
        return [self.log.lag(m.pos) for m in self.members.values() if m.pos is not None]

    def _can_put(self, nbytes: int) -> bool:
        if self.end is not None:
            return True
        now = time.monotonic()
        if not self.started:
            if self.counts["joined"] < self.consumers_wanted:
                return False
            if now - self.last_hello < self.join_grace_s:
                return False
        if not self.members:
            return False  # pause while none is connected
        lags = self._lags()
        if lags and max(lags) + self.reserved >= self.max_lag:
            return False
        return self.held_bytes == 0 or self.held_bytes + nbytes <= self.max_bytes

    async def reserve(self, nbytes: int) -> bool:
        """Wait (at most `POLL_S`) until a batch of ``nbytes`` may be put; True if so (its
        bytes are then counted as held), False to ask again."""
        self._ensure_reaper()
        timeout = POLL_S
        if not self.started and self.join_grace_s:
            timeout = min(POLL_S, self.join_grace_s)
        if not await self._until(lambda: self._can_put(nbytes), timeout):
            return False
        self.started = True
        self.held_bytes += nbytes
        self.reserved += 1
        return True

    async def apply(self, op: int, name: str, *args: Any) -> Any:
        """The producer's ``op``-th call, ``name(*args)`` (publish, end_epoch, owed, finish),
        applied in the producer's order: an asyncio actor may start calls out of order."""
        await self._until(lambda: self.next_op == op, float("inf"))
        result = getattr(self, name)(*args)
        self.next_op += 1
        self._notify()
        return result

    def publish(self, batch: dict[str, Any]) -> None:
        """Log one batch (``ref``, ``nbytes``, ``rows``; ``late``: loaded after the last epoch
        for wrapped consumers)."""
        late = batch.get("late", False)
        if self.index == 0 and not late:
            self.epoch_pos[self.epoch] = self.log.head
            if self.epoch == 0:  # the window, from the first batch's size
                window = policy.replay_window(
                    self.replay_batches, self.replay_bytes, batch["nbytes"], self.batches_per_epoch
                )
                fits = self.max_bytes // 2 // max(batch["nbytes"], 1)
                if window > fits:
                    log.warning(
                        "replay window cut from %d to %d batches to fit half of max_bytes=%d",
                        window, fits, self.max_bytes,
                    )  # fmt: skip
                self.window = min(window, fits)
        self.reserved -= 1
        index = self.late if late else self.index
        entry = {"type": "batch", "epoch": self.epoch, "index": index, **batch}
        entry["seq"] = self.log.append(entry)
        if late:
            self.late += 1
        else:
            self.index += 1
        self._forget()
        self._notify()

    def end_epoch(self) -> None:
        """The epoch in progress is whole."""
        if self.batches_per_epoch is None:
            self.batches_per_epoch = self.index
        pos = self.log.append({"type": "end_epoch", "epoch": self.epoch})
        self.epoch += 1
        self.index = 0
        for member in self.members.values():
            if member.base is None and member.wait_epoch == self.epoch:
                member.base, member.wait_epoch = pos + 1, None
        self._forget()
        self._notify()

    def owed(self) -> int:
        """No regular batch follows: how many leading batches wrapped consumers still need
        (loaded again for them alone)."""
        self.regular_end = self.log.head
        self._notify()
        wrapped = [m.start_index for m in self.members.values() if m.mode == "wrap"]
        return max(wrapped, default=0)

    def finish(self, reason: str, detail: str = "") -> None:
        """The stream ends (``finished``, ``stopped`` or ``failed``)."""
        if self.end is None:
            self.end = {"type": "end", "reason": reason, "detail": detail}
            if self.regular_end is None:
                self.regular_end = self.log.head
        self._forget()
        self._notify()

    def _complete(self, member: _Member) -> bool:
        """Whether ``member`` was given all it is owed (the end aside)."""
        if self.end is None:
            return False
        if self.end["reason"] != "finished" or member.base is None:
            return True
        if member.catching_up:
            return False
        assert self.regular_end is not None
        owed = self.regular_end + (member.start_index if member.mode == "wrap" else 0)
        return member.served >= min(owed, self.log.head)

    async def delivered(self, timeout: float) -> bool:
        """Wait (at most ``timeout``) until every consumer was given all it is owed."""
        return await self._until(
            lambda: all(self._complete(m) for m in self.members.values()), timeout
        )

    async def told(self, timeout: float) -> bool:
        """Wait (at most ``timeout``) until every consumer was given the end, or left."""
        return await self._until(lambda: not self.members, timeout)

    def _forget(self) -> None:
        """Drop the references no consumer needs and replay does not keep."""
        positions = [m.pos for m in self.members.values() if m.pos is not None]
        if self.end is not None and self.end["reason"] != "finished":
            positions = []
        low = min(positions, default=self.log.head)
        keep_from = self.epoch_pos.get(self.epoch)
        for pos in [p for p in self.log.entries if p < low]:
            entry = self.log.entries[pos]
            kept = (
                entry["type"] == "batch"
                and self.end is None
                and keep_from is not None
                and pos >= keep_from
                and entry["index"] < self.window
            )
            if not kept:
                del self.log.entries[pos]
                self.held_bytes -= entry.get("nbytes", 0)

    def gone(self, cid: int) -> None:
        """``cid`` was given the stream's end: it needs nothing more."""
        if self._drop(cid):
            self._forget()
            self._notify()

    # -- catch-ups (the producer's thread that loads past batches again) -------------

    async def again(self, timeout: float) -> list[int] | None:
        """Wait (at most ``timeout``) for a catch-up range no one has asked to load yet:
        [consumer id, epoch, start, stop], marked asked for; None if none came."""
        found: list[list[int]] = []

        def ready() -> bool:
            for cid, member in self.members.items():
                for step in member.catchup:
                    if not step.requested:
                        step.requested = True
                        found.append([cid, step.epoch, step.start, step.stop])
                        return True
            return False

        await self._until(ready, timeout)
        return found[0] if found else None

    async def room(self, cid: int) -> bool | None:
        """Wait (at most `POLL_S`) until consumer ``cid`` has room for one more catch-up
        batch (fewer than ``max_lag`` placed and not taken): True; False to ask again; None
        if it is gone (load nothing more for it)."""
        if not await self._until(
            lambda: cid not in self.members or len(self.members[cid].private) < self.max_lag,
            POLL_S,
        ):
            return False
        return True if cid in self.members else None

    def place(self, cid: int, batch: dict[str, Any]) -> bool:
        """Queue ``batch`` (``ref``, ``nbytes``, ``rows``, its ``epoch`` and ``index``),
        loaded again, for consumer ``cid`` alone; False if it is gone."""
        member = self.members.get(cid)
        if member is None or not member.catchup:
            return False
        step = member.catchup[0]
        if (batch["epoch"], batch["index"]) != (step.epoch, step.start):
            raise ValueError(
                f"batch {batch['index']} of epoch {batch['epoch']} placed for consumer {cid}, "
                f"which waits for batch {step.start} of epoch {step.epoch}"
            )
        self._add_private(member, {"type": "batch", "seq": self.next_private_seq, **batch})
        self.next_private_seq -= 1
        self.held_bytes += batch["nbytes"]
        self.counts["again"] += 1
        step.start += 1
        self._place_ends(member)
        self._notify()
        return True

    def _add_private(self, member: _Member, entry: dict) -> None:
        member.private[member.placed] = entry
        member.placed += 1

    def _place_ends(self, member: _Member) -> None:
        """Drop ``member``'s whole catch-up ranges, placing the end of each that ends its
        epoch."""
        while member.catchup and member.catchup[0].start >= member.catchup[0].stop:
            step = member.catchup.pop(0)
            if step.ends:
                self._add_private(member, {"type": "end_epoch", "epoch": step.epoch})

    def metrics(self) -> dict[str, Any]:
        """Consumers, their lag, what is held."""
        return {
            "batches_served": self.counts["served"],
            "batches_loaded_again": self.counts["again"],
            "consumers": len(self.members),
            "consumers_joined": self.counts["joined"],
            "consumers_left": self.counts["left"],
            "consumers_lost": self.counts["lost"],
            "lag": {
                cid: self.log.lag(m.pos) for cid, m in self.members.items() if m.pos is not None
            },
            "batches_held": sum(e["type"] == "batch" for e in self.log.entries.values()),
            "bytes_held": self.held_bytes,
        }


RemoteHub = ray.remote(num_cpus=0, max_concurrency=10_000)(Hub)
