"""Framework-free echo semantics: argument checks and the echo-then-shuffle generator.

One definition shared by every front end (`echo.torch`, the tf.data version mirrors it):

* an item is repeated ``floor(factor)`` times, plus once more with probability
  ``factor - floor(factor)`` drawn from a seeded generator, so the mean is ``factor``;
* the copies then pass through a shuffle buffer of ``shuffle_buffer`` items (0 keeps them
  adjacent). The buffer is drained at the end of the stream, so the output multiset is exactly
  the echoed multiset.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Iterator
from numbers import Real
from typing import TypeVar

__all__ = [
    "EchoCounts",
    "check_factor",
    "check_seed",
    "check_shuffle_buffer",
    "echo_items",
    "stage_rng",
]

T = TypeVar("T")


def check_factor(factor: object, name: str = "factor") -> float:
    """Validate an echo factor and return it as a float.

    Args:
        factor: The echo factor; a finite real number >= 1.
        name: Argument name used in the error message. Default ``"factor"``.

    Raises:
        ValueError: ``factor`` is not a real number, is NaN or infinite, or is below 1.
    """
    if isinstance(factor, bool) or not isinstance(factor, Real):
        raise ValueError(f"{name} must be a real number >= 1, got {factor!r}")
    value = float(factor)
    if not math.isfinite(value) or value < 1.0:
        raise ValueError(f"{name} must be a finite number >= 1, got {factor!r}")
    return value


def check_shuffle_buffer(shuffle_buffer: object, name: str = "shuffle_buffer") -> int:
    """Validate a shuffle buffer size (an int >= 0; 0 disables shuffling).

    Raises:
        ValueError: ``shuffle_buffer`` is not an integer or is negative.
    """
    if isinstance(shuffle_buffer, bool) or not isinstance(shuffle_buffer, int):
        raise ValueError(f"{name} must be an integer >= 0, got {shuffle_buffer!r}")
    if shuffle_buffer < 0:
        raise ValueError(f"{name} must be an integer >= 0, got {shuffle_buffer!r}")
    return shuffle_buffer


def check_seed(seed: object, name: str = "seed") -> int:
    """Validate a seed (an int >= 0).

    Raises:
        ValueError: ``seed`` is not a non-negative integer.
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"{name} must be an integer >= 0, got {seed!r}")
    return seed


def stage_rng(seed: int, *stream: object) -> random.Random:
    """A `random.Random` determined by ``seed`` and a stream name such as (worker, epoch).

    Python's generator is used rather than NumPy's because the echo loop draws one scalar per
    item, where `random.Random` is an order of magnitude cheaper per call.
    """
    return random.Random("/".join(str(part) for part in (seed, *stream)))


class EchoCounts:
    """Running counts of one echo stage.

    Attributes:
        fresh: Items taken from upstream.
        emitted: Items handed downstream.
    """

    __slots__ = ("emitted", "fresh")

    def __init__(self, fresh: int = 0, emitted: int = 0) -> None:
        self.fresh = fresh
        self.emitted = emitted

    def __repr__(self) -> str:
        return f"EchoCounts(fresh={self.fresh}, emitted={self.emitted})"


def echo_items(
    source: Iterable[T],
    factor: float,
    shuffle_buffer: int,
    rng: random.Random,
    counts: EchoCounts,
    on_exhausted: Callable[[], None] | None = None,
) -> Iterator[T]:
    """Echo every item of ``source`` and pass the copies through a shuffle buffer.

    Arguments are assumed valid (see `check_factor`, `check_shuffle_buffer`). ``counts`` is
    updated as items flow, so it is exact whenever the consumer looks at it.

    Args:
        source: The upstream items.
        factor: Mean number of copies per item (>= 1).
        shuffle_buffer: Items held by the shuffle buffer; 0 keeps copies adjacent.
        rng: Draws the fractional extra copy and the shuffle positions.
        counts: Updated in place: ``fresh`` per item read, ``emitted`` per item yielded.
        on_exhausted: Called once after the last item has been yielded. Default None.

    Yields:
        The echoed (and, with a buffer, shuffled) items.
    """
    whole = int(factor)
    extra = factor - whole
    buffer: list[T] = []
    for item in source:
        counts.fresh += 1
        copies = whole + 1 if extra and rng.random() < extra else whole
        for _ in range(copies):
            if len(buffer) < shuffle_buffer:
                buffer.append(item)
                continue
            if shuffle_buffer:
                slot = rng.randrange(shuffle_buffer)
                item_out, buffer[slot] = buffer[slot], item
            else:
                item_out = item
            counts.emitted += 1
            yield item_out
    rng.shuffle(buffer)
    while buffer:
        counts.emitted += 1
        yield buffer.pop()
    if on_exhausted is not None:
        on_exhausted()
