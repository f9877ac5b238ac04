"""The one resume contract every stateful echo stage speaks.

`Echo`, `EchoLoader`, `EchoOnStall` and the torchdata node `EchoNode` all save the same shape
with ``state_dict()`` and take it back with ``load_state_dict(state)`` (the node also under
torchdata's names, ``get_state()`` / ``reset(initial_state)``):

* ``epoch``: the epoch in progress, or the next one once an epoch has ended;
* ``position``: items (or batches) handed downstream in that epoch so far;
* ``fresh``: items taken from upstream so far, over all epochs;
* ``emitted``: items handed downstream so far, over all epochs;
* ``units``: what ``fresh`` and ``emitted`` (and so ``position``) count, e.g.
  ``{"fresh": "examples", "emitted": "batches"}`` for `EchoLoader` (see `UNITS`), so that a
  state and the loader state nested in it can be told apart at a glance;
* ``source`` (only for a stage that wraps a stateful stage): the wrapped stage's state, nested
  under `SOURCE_KEY` as torchdata's nodes do.

Resuming re-runs the saved epoch's seeded draws up to ``position`` (or restores the wrapped
stage), so the counts continue exactly and nothing delivered is delivered again.
"""

from __future__ import annotations

from typing import Any

from echo.core import EchoCounts

__all__ = [
    "SOURCE_KEY",
    "STATE_KEYS",
    "UNITS",
    "UNITS_KEY",
    "check_state",
    "delivered_counts",
    "make_state",
]

STATE_KEYS = ("epoch", "position", "fresh", "emitted")
"""The integer fields of every stage's state."""

SOURCE_KEY = "source"
"""Where a wrapping stage nests the state of the stage it wraps."""

UNITS_KEY = "units"
"""Where a state names the units of its counters."""

UNITS: dict[str, dict[str, str]] = {
    "Echo": {"fresh": "items", "emitted": "items"},
    "EchoNode": {"fresh": "items", "emitted": "items"},
    "EchoLoader": {"fresh": "examples", "emitted": "batches"},
    "EchoOnStall": {"fresh": "batches", "emitted": "batches"},
}
"""What each stage's ``fresh`` and ``emitted`` count (``position`` counts as ``emitted``
does). ``items`` are whatever the stage's source yields: examples inside DataLoader workers,
batches after a DataLoader."""


def make_state(
    owner: str, epoch: int, position: int, fresh: int, emitted: int, source: Any = None
) -> dict[str, Any]:
    """A state of stage ``owner`` (a key of `UNITS`) in the shared shape; ``source`` is
    included only when not None."""
    state: dict[str, Any] = {
        "epoch": epoch,
        "position": position,
        "fresh": fresh,
        "emitted": emitted,
        UNITS_KEY: dict(UNITS[owner]),
    }
    if source is not None:
        state[SOURCE_KEY] = source
    return state


def check_state(state: object, owner: str) -> dict[str, Any]:
    """Validate a state for ``owner``'s ``load_state_dict`` and return it as a dict.

    Args:
        state: A dict from some stage's ``state_dict()``.
        owner: The stage's name (a key of `UNITS`), used in the error message.

    Raises:
        ValueError: ``state`` is not a dict, one of `STATE_KEYS` is missing or not an
            integer >= 0, or the state's ``units`` are not ``owner``'s (it was saved by
            another kind of stage, e.g. the loader state nested in an `EchoOnStall` state).
            A state without ``units`` is taken as ``owner``'s.
    """
    if not isinstance(state, dict):
        raise ValueError(f"{owner}.load_state_dict needs a dict, got {type(state).__name__}")
    for key in STATE_KEYS:
        value = state.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(
                f"{owner} state[{key!r}] must be an integer >= 0, got {value!r} "
                f"(a state has the keys {', '.join(STATE_KEYS)})"
            )
    units = state.get(UNITS_KEY, UNITS[owner])
    if units != UNITS[owner]:
        raise ValueError(
            f"{owner} state[{UNITS_KEY!r}] is {units!r}, but {owner} counts {UNITS[owner]!r}: "
            "this state was saved by another kind of stage"
        )
    return state


def _is_stage_state(value: object) -> bool:
    return isinstance(value, dict) and all(
        isinstance(value.get(key), int) and not isinstance(value.get(key), bool)
        for key in STATE_KEYS
    )


def delivered_counts(loader_state: dict[str, Any]) -> EchoCounts:
    """The counts behind the batches a loader has delivered, read from its saved state.

    `echo.torch.Echo`'s ``fresh`` / ``emitted`` include what DataLoader workers have
    prefetched. torchdata's ``StatefulDataLoader`` saves each worker's stage state as of the
    latest batch it delivered (with its default ``snapshot_every_n_steps=1``), so summing
    those gives the exact counts at the point of training::

        counts = delivered_counts(loader.state_dict())

    Args:
        loader_state: A ``StatefulDataLoader.state_dict()`` (or any nesting of stage states).

    Returns:
        `EchoCounts` summed over every stage state found (nested states are not descended
        into once a stage state is found).
    """
    total = EchoCounts()
    pending: list[Any] = [loader_state]
    while pending:
        value = pending.pop()
        if _is_stage_state(value):
            total.fresh += value["fresh"]
            total.emitted += value["emitted"]
        elif isinstance(value, dict):
            pending.extend(value.values())
        elif isinstance(value, list | tuple):
            pending.extend(value)
    return total
