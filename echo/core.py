"""Framework-free echo semantics: argument checks and the echo-then-shuffle generator.

One definition shared by every front end (`echo.torch`, the tf.data version mirrors it):

* an item is repeated ``floor(factor)`` times, plus once more with probability
  ``factor - floor(factor)`` drawn from a seeded generator, so the mean is ``factor``;
* the copies then pass through a shuffle buffer of ``shuffle_buffer`` items (0 keeps them
  adjacent). The buffer is drained at the end of the stream, so the output multiset is exactly
  the echoed multiset.
"""

from __future__ import annotations

import inspect
import math
import random
from collections.abc import Callable, Iterable, Iterator
from numbers import Integral, Real
from typing import TypeVar

__all__ = [
    "MAX_FACTOR",
    "EchoCounts",
    "augment_takes_rng",
    "check_factor",
    "check_int",
    "check_seed",
    "check_shuffle_buffer",
    "echo_items",
    "echoed_count",
    "resolve_seed",
    "stage_rng",
]

T = TypeVar("T")

MAX_FACTOR = 2**16
"""Largest echo factor accepted: far beyond any useful one (the paper uses up to 16), and small
enough that a fractional part survives in a float and a copy count in an int64."""


def check_factor(factor: object, name: str = "factor") -> float:
    """Validate an echo factor and return it as a float.

    Args:
        factor: The echo factor; a real number (Python or NumPy) in ``[1, MAX_FACTOR]``.
        name: Argument name used in the error message. Default ``"factor"``.

    Raises:
        ValueError: ``factor`` is not a real number, is NaN or infinite, or is outside
            ``[1, MAX_FACTOR]``.
    """
    if isinstance(factor, bool) or not isinstance(factor, Real):
        raise ValueError(f"{name} must be a real number in [1, {MAX_FACTOR}], got {factor!r}")
    value = float(factor)
    if not math.isfinite(value) or not 1.0 <= value <= MAX_FACTOR:
        raise ValueError(f"{name} must be a finite number in [1, {MAX_FACTOR}], got {factor!r}")
    return value


def check_int(value: object, name: str, minimum: int = 0) -> int:
    """Validate an integer argument (Python or NumPy integer, not bool) and return an int.

    Args:
        value: The value to check.
        name: Argument name used in the error message.
        minimum: Smallest valid value. Default 0.

    Raises:
        ValueError: ``value`` is not an integer or is below ``minimum``.
    """
    if isinstance(value, bool) or not isinstance(value, Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_shuffle_buffer(shuffle_buffer: object, name: str = "shuffle_buffer") -> int:
    """Validate a shuffle buffer size (an int >= 0; 0 disables shuffling).

    Raises:
        ValueError: ``shuffle_buffer`` is not an integer or is negative.
    """
    return check_int(shuffle_buffer, name)


def check_seed(seed: object, name: str = "seed") -> int:
    """Validate a seed (an int >= 0).

    Raises:
        ValueError: ``seed`` is not a non-negative integer.
    """
    return check_int(seed, name)


def resolve_seed(seed: object, name: str = "seed") -> int:
    """Validate a seed that may be None; None draws one from the OS (not reproducible).

    Both front ends take ``seed: int | None``; the PyTorch stages resolve None once, when the
    stage is built, so every DataLoader worker and every epoch derives its draws from one seed.

    Raises:
        ValueError: ``seed`` is neither None nor a non-negative integer.
    """
    if seed is None:
        return random.SystemRandom().getrandbits(63)
    return check_seed(seed, name)


def augment_takes_rng(augment: object) -> bool:
    """Whether ``augment`` is called ``augment(example, rng)`` (True) or ``augment(example)``.

    Told apart by its signature: one that takes a single positional argument, or only
    ``*args`` (torchvision v2's ``forward(*inputs)``, which would treat ``rng`` as a second
    input), takes the example alone. An object with a ``forward`` method (a torch module,
    e.g. a torchvision transform) is judged by ``forward``; a callable without a readable
    signature is taken to follow ``(example, rng)``.

    Args:
        augment: The augmentation.

    Raises:
        ValueError: ``augment`` is not callable, or takes neither ``(example, rng)`` nor
            ``(example)``.
    """
    if not callable(augment):
        raise ValueError(
            "augment must be a callable augment(example, rng) or augment(example), "
            f"got {type(augment).__name__} {augment!r:.80}"
        )
    forward = getattr(augment, "forward", None)
    target = forward if callable(forward) and not inspect.isroutine(augment) else augment
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):  # a builtin without a signature: trust the contract
        return True
    kinds = [parameter.kind for parameter in signature.parameters.values()]
    if kinds and all(kind is inspect.Parameter.VAR_POSITIONAL for kind in kinds):
        return False
    for arguments, takes_rng in (((None, None), True), ((None,), False)):
        try:
            signature.bind(*arguments)
        except TypeError:
            continue
        return takes_rng
    raise ValueError(
        f"augment must take (example, rng) or (example), but {augment!r:.80} has the "
        f"signature {signature}"
    )


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


def echoed_count(items: int, factor: float, shuffle_buffer: int, rng: random.Random) -> int:
    """How many copies `echo_items` emits for ``items`` items drawing from ``rng``.

    An integer factor gives ``items * factor``. A fractional one replays the draws (the
    shuffle buffer's too, which come from the same generator) on the items' positions, so the
    count is exact without reading the items: about a microsecond per item.

    Args:
        items: Items that enter the stage.
        factor: Mean number of copies per item (>= 1).
        shuffle_buffer: The stage's shuffle buffer.
        rng: A generator in the state the stage's would start from (see `stage_rng`).
    """
    if factor.is_integer():
        return items * int(factor)
    counts = EchoCounts()
    for _ in echo_items(range(items), factor, shuffle_buffer, rng, counts):
        pass
    return counts.emitted
