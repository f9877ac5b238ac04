"""Data echoing for tf.data: ``dataset.apply(echo(factor, shuffle_buffer=...))``.

The paper's echo stage is ``dataset.flat_map(lambda t: Dataset.from_tensors(t).repeat(e))``;
this version adds fractional factors, the shuffle buffer and counters, with the semantics of
`echo.core` (the PyTorch `echo.torch.Echo` follows the same definition). Importing this module
imports TensorFlow.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

from echo.core import check_factor, check_seed, check_shuffle_buffer

__all__ = ["EchoCounter", "echo"]

_UNIFORM_BITS = 31
_CHUNK_BYTES = 1 << 20
_MAX_CHUNK = 256
_PARALLEL = {"num_parallel_calls": tf.data.AUTOTUNE, "deterministic": True}


class EchoCounter:
    """Counts of one tf.data echo stage, readable at any time from Python.

    Attributes:
        fresh: Elements taken from upstream so far.
        emitted: Elements handed downstream so far.
    """

    def __init__(self) -> None:
        self._fresh = tf.Variable(0, dtype=tf.int64, trainable=False, name="echo_fresh")
        self._emitted = tf.Variable(0, dtype=tf.int64, trainable=False, name="echo_emitted")

    @property
    def fresh(self) -> int:
        return int(self._fresh.numpy())

    @property
    def emitted(self) -> int:
        return int(self._emitted.numpy())

    def reset(self) -> None:
        """Set both counts to zero."""
        self._fresh.assign(0)
        self._emitted.assign(0)

    def __repr__(self) -> str:
        return f"EchoCounter(fresh={self.fresh}, emitted={self.emitted})"


def _counting(variable: tf.Variable) -> Callable[..., Any]:
    """A map function that adds 1 to ``variable`` and returns its element unchanged."""

    def count(*element: Any) -> Any:
        with tf.control_dependencies([variable.assign_add(1)]):
            passed = tf.nest.map_structure(tf.identity, element)
        return passed[0] if len(element) == 1 else passed

    return count


def _chunk_size(spec: Any) -> int:
    """Elements to repeat at once: fixed-shape, non-string elements only, up to ~1 MiB."""
    nbytes = 0
    for component in tf.nest.flatten(spec):
        if (
            not isinstance(component, tf.TensorSpec)
            or not component.shape.is_fully_defined()
            or component.dtype == tf.string
        ):
            return 1
        nbytes += component.shape.num_elements() * component.dtype.size
    return max(1, min(_MAX_CHUNK, _CHUNK_BYTES // max(nbytes, 1)))


def _repeated(chunk: Any, copies: tf.Tensor, counter: EchoCounter | None) -> Any:
    """Each element of ``chunk`` repeated ``copies`` times (a scalar or one per element); with
    a counter, after adding the chunk's size to ``fresh`` and its copies to ``emitted`` (one
    update per chunk, not per element)."""
    updates = []
    if counter is not None:
        size = tf.cast(tf.shape(tf.nest.flatten(chunk)[0])[0], tf.int64)
        emitted = tf.reduce_sum(copies) if copies.shape.rank else size * copies
        updates = [counter._fresh.assign_add(size), counter._emitted.assign_add(emitted)]
    with tf.control_dependencies(updates):
        return tf.nest.map_structure(lambda t: tf.repeat(t, copies, axis=0), chunk)


def _repeat_in_chunks(
    dataset: tf.data.Dataset,
    whole: int,
    extra: float,
    seed: int | None,
    chunk: int,
    counter: EchoCounter | None,
) -> tf.data.Dataset:
    """The echo as ``batch -> tf.repeat -> unbatch``: the same output as one ``flat_map`` per
    element (copies adjacent, in order), without tf.data's per-element dataset overhead. A
    counter is updated once per chunk, when the chunk is expanded.

    The expansion is an explicitly parallel, deterministic ``map``: tf.data parallelizes a
    stateless one by itself, but not one that updates a counter's variables (atomic adds,
    so chunks may be counted in any order)."""
    if not extra:

        def expand(*element: Any) -> Any:
            element = element[0] if len(element) == 1 else element
            return _repeated(element, tf.constant(whole, tf.int64), counter)

        return dataset.batch(chunk).map(expand, **_PARALLEL).unbatch()
    draws = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True)
    threshold = tf.constant(int(extra * 2**_UNIFORM_BITS), tf.int64)

    def expand_drawn(element: Any, draw: tf.Tensor) -> Any:
        uniform = tf.math.floormod(draw, 2**_UNIFORM_BITS)
        copies = whole + tf.cast(uniform < threshold, tf.int64)
        return _repeated(element, copies, counter)

    chunks = tf.data.Dataset.zip((dataset, draws)).batch(chunk)
    return chunks.map(expand_drawn, **_PARALLEL).unbatch()


def echo(
    factor: float,
    *,
    shuffle_buffer: int = 0,
    seed: int | None = 0,
    counter: EchoCounter | None = None,
) -> Callable[[tf.data.Dataset], tf.data.Dataset]:
    """An echo stage for ``Dataset.apply``.

    Put it before ``map(augment)`` for example echoing before augmentation, after it for
    echoing after augmentation, or after ``batch`` for batch echoing::

        ds = ds.apply(echo(2.0, shuffle_buffer=1024, seed=0)).map(augment).batch(128)

    Args:
        factor: Echo factor ``e >= 1``. A fractional ``e`` repeats each element ``floor(e)``
            or ``floor(e) + 1`` times, the extra copy drawn with probability ``e - floor(e)``.
        shuffle_buffer: Shuffle buffer after the echo (``Dataset.shuffle``). Default 0.
        seed: Seed of the extra-copy draws and the shuffle; each iteration draws anew but
            reproducibly. Default 0, as in `echo.torch`; None: not reproducible.
        counter: An `EchoCounter` to update with fresh and emitted counts. Default None.

    Fixed-shape elements are echoed a chunk at a time (``batch`` -> ``tf.repeat`` ->
    ``unbatch``, up to ~1 MiB of elements): the same output order as the per-element
    ``flat_map``, which variable-shape elements still use, at a fraction of its cost; the
    stage then reads ahead of what it emits by the chunks its parallel expansion holds (a
    few, sized by tf.data's autotuning). A counter on that path is
    updated once per chunk: ``fresh`` counts the elements read into expanded chunks and
    ``emitted`` their copies, so both may run ahead of what has left the stage by those
    chunks, as any ``prefetch`` downstream runs them ahead (``emitted`` also includes copies
    waiting in the shuffle buffer). On the
    per-element path the counts are exact per element, as a stateful ``map`` on each side.

    The output's cardinality is asserted when it is known (a finite input and an integer
    factor), so Keras ``model.fit`` knows the epoch length.

    Returns:
        A function from `tf.data.Dataset` to `tf.data.Dataset`. With ``factor=1``,
        ``shuffle_buffer=0`` and no counter it returns the dataset unchanged.

    Raises:
        ValueError: A bad ``factor``, ``shuffle_buffer`` or ``seed``; the message names it.
    """
    factor = check_factor(factor)
    shuffle_buffer = check_shuffle_buffer(shuffle_buffer)
    if seed is not None:
        seed = check_seed(seed)
    whole = int(factor)
    extra = factor - whole

    def apply(dataset: tf.data.Dataset) -> tf.data.Dataset:
        cardinality = int(dataset.cardinality())
        chunk = _chunk_size(dataset.element_spec)
        chunked = chunk > 1 and (factor > 1 or counter is not None)
        per_element_counter = counter if not chunked else None
        if per_element_counter is not None:
            dataset = dataset.map(_counting(per_element_counter._fresh))
        if chunked:
            dataset = _repeat_in_chunks(dataset, whole, extra, seed, chunk, counter)
        elif extra:
            draws = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True)
            threshold = tf.constant(int(extra * 2**_UNIFORM_BITS), tf.int64)

            def repeat(element: Any, draw: tf.Tensor) -> tf.data.Dataset:
                uniform = tf.math.floormod(draw, 2**_UNIFORM_BITS)
                copies = whole + tf.cast(uniform < threshold, tf.int64)
                return tf.data.Dataset.from_tensors(element).repeat(copies)

            dataset = tf.data.Dataset.zip((dataset, draws)).flat_map(repeat)
        elif whole > 1:
            dataset = dataset.flat_map(
                lambda *element: tf.data.Dataset.from_tensors(
                    element[0] if len(element) == 1 else element
                ).repeat(whole)
            )
        if shuffle_buffer:
            dataset = dataset.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
        if per_element_counter is not None:
            dataset = dataset.map(_counting(per_element_counter._emitted))
        if cardinality >= 0 and not extra and int(dataset.cardinality()) < 0:
            dataset = dataset.apply(tf.data.experimental.assert_cardinality(cardinality * whole))
        return dataset

    return apply
