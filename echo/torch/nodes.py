"""`EchoNode`: the echo stage as a ``torchdata.nodes`` node. Importing this module imports
torchdata (``pip install torchdata``); `echo.torch` itself does not."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any, TypeVar

from torchdata.nodes import BaseNode

from echo.core import (
    EchoCounts,
    check_factor,
    check_shuffle_buffer,
    echo_items,
    resolve_seed,
    stage_rng,
)
from echo.state import SOURCE_KEY, check_state, make_state

__all__ = ["EchoNode"]

T = TypeVar("T")


def _pulled(source: BaseNode[T]) -> Iterator[T]:
    while True:
        try:
            yield next(source)
        except StopIteration:
            return


class EchoNode(BaseNode[T]):
    """Repeat every item of ``source`` ``factor`` times on average, then shuffle the copies.

    The semantics of `echo.torch.Echo` (and `echo.core.echo_items`) as a node::

        from torchdata.nodes import Batcher, Loader, SamplerWrapper, ParallelMapper

        node = ParallelMapper(SamplerWrapper(sampler), read, num_workers=4)
        node = EchoNode(node, 2.0, shuffle_buffer=1024, seed=0)  # before augmentation
        loader = Loader(Batcher(ParallelMapper(node, augment, num_workers=4), 128))

    Each ``reset()`` without a state starts a new epoch (its draws are seeded by
    ``(seed, epoch)``); a ``reset()`` before any item was taken keeps the epoch, as torchdata's
    ``SamplerWrapper`` does. State (``get_state`` / ``reset(initial_state)``, also under
    ``state_dict`` / ``load_state_dict``): the shared shape of `echo.state`, with the source's
    state *at the start of the epoch* under ``"source"``. Resuming resets the source to it and
    replays the epoch's draws up to ``position``, so it assumes the source yields the same
    items again from that state (torchdata's nodes do).

    Args:
        source: The upstream node.
        factor: Echo factor in ``[1, MAX_FACTOR]``.
        shuffle_buffer: Shuffle buffer after the echo. Default 0.
        seed: Seed of the draws. Default 0; None draws one when the node is built.

    Attributes:
        fresh: Items taken from ``source`` so far.
        emitted: Items handed downstream so far.

    Raises:
        ValueError: A bad ``factor``, ``shuffle_buffer`` or ``seed``; the message names it.
    """

    SOURCE_KEY = SOURCE_KEY

    def __init__(
        self, source: BaseNode[T], factor: float, *, shuffle_buffer: int = 0, seed: int | None = 0
    ) -> None:
        super().__init__()
        self.source = source
        self.factor = check_factor(factor)
        self.shuffle_buffer = check_shuffle_buffer(shuffle_buffer)
        self.seed = resolve_seed(seed)
        self._counts = EchoCounts()
        self._epoch = -1
        self._epoch_start = 0
        self._source_start: Any = None
        self._stream: Iterator[T] = iter(())
        self._finished = False

    @property
    def fresh(self) -> int:
        return self._counts.fresh

    @property
    def emitted(self) -> int:
        return self._counts.emitted

    def _begin(self, epoch: int) -> None:
        self._epoch, self._finished = epoch, False
        self._source_start = self.source.state_dict()
        self._epoch_start = self._counts.emitted
        rng = stage_rng(self.seed, "echo", 0, epoch)

        def finished() -> None:
            self._finished = True

        self._stream = echo_items(
            _pulled(self.source), self.factor, self.shuffle_buffer, rng, self._counts, finished
        )

    def reset(self, initial_state: dict[str, Any] | None = None) -> None:
        super().reset(initial_state)
        if initial_state is None:
            started = self._epoch < 0 or self._counts.emitted > self._epoch_start
            self.source.reset(None)
            self._begin(self._epoch + 1 if started else self._epoch)
            return
        state = check_state(initial_state, "EchoNode")
        self.source.reset(state.get(SOURCE_KEY))
        self._begin(state["epoch"])
        for _ in itertools.islice(self._stream, state["position"]):
            pass
        self._counts.fresh, self._counts.emitted = state["fresh"], state["emitted"]
        self._epoch_start = state["emitted"] - state["position"]

    def next(self) -> T:
        return next(self._stream)

    def get_state(self) -> dict[str, Any]:
        position = self._counts.emitted - self._epoch_start
        return make_state(
            "EchoNode",
            self._epoch,
            position,
            self._counts.fresh,
            self._counts.emitted,
            self._source_start,
        )

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """``reset(state)``, under the name the other echo stages use."""
        self.reset(state)
