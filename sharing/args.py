"""Argument checks shared by the shared loader's constructors."""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable
from typing import Any

from sharing.protocol import LATE_JOIN_MODES

__all__ = [
    "RENAMED",
    "accepting_former_names",
    "check_consumer",
    "check_int",
    "check_seconds",
    "check_state",
    "check_stream",
    "extends_init",
    "signature_of_init",
]


def check_stream(
    epochs: object, max_lag: object, replay_batches: object, replay_bytes: object,
    consumers: object, join_grace_s: object,
) -> None:  # fmt: skip
    """Validate the stream arguments every producer takes (`sharing.Producer`'s).

    Raises:
        ValueError: One is invalid; the message names it.
    """
    check_int(epochs, "epochs", minimum=1, allow_none=True)
    check_int(max_lag, "max_lag", minimum=1)
    check_int(replay_batches, "replay_batches", allow_none=True)
    check_int(replay_bytes, "replay_bytes")
    check_int(consumers, "consumers", minimum=1)
    valid = isinstance(join_grace_s, (int, float)) and not isinstance(join_grace_s, bool)
    if not valid or not 0 <= join_grace_s < float("inf"):  # type: ignore[operator]
        raise ValueError(f"join_grace_s must be a number of seconds >= 0, got {join_grace_s!r}")


def check_consumer(
    batch_size: object, late_join: object, echo_on_stall: object, connect_timeout_s: object,
    timeout_s: object,
) -> None:  # fmt: skip
    """Validate the arguments every consumer takes (`sharing.Consumer`'s).

    Raises:
        ValueError: One is invalid; the message names it and, for ``late_join``, the valid.
    """
    check_int(batch_size, "batch_size", minimum=1, allow_none=True)
    check_int(echo_on_stall, "echo_on_stall", minimum=1)
    if late_join not in LATE_JOIN_MODES:
        raise ValueError(f"late_join={late_join!r}; valid: {list(LATE_JOIN_MODES)}")
    check_seconds(connect_timeout_s, "connect_timeout_s")
    check_seconds(timeout_s, "timeout_s", allow_none=True)


def check_seconds(value: object, name: str, *, allow_none: bool = False) -> None:
    """Validate a duration: a number of seconds > 0 (math.inf: no limit).

    Args:
        value: The value to check.
        name: Argument name used in the error message.
        allow_none: Whether None (no limit) is valid too. Default False.

    Raises:
        ValueError: ``value`` is not a number > 0 (nor None where ``allow_none``).
    """
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        valid = "a number of seconds > 0" + (" or None" if allow_none else "")
        raise ValueError(f"{name} must be {valid}, got {value!r}")


def check_state(state: object) -> list[int] | None:
    """Validate a consumer's saved ``state`` (`sharing.Consumer.state_dict`'s); where it
    resumes: [epoch, producer batch, rows of that batch given before], or None for no state.

    Raises:
        ValueError: ``state`` is not such a dict; the message names what is wrong.
    """
    if state is None:
        return None
    keys = {"epoch", "examples", "epochs_done", "producer_batch_size"}
    if not isinstance(state, dict) or set(state) != keys:
        raise ValueError(f"state must be a Consumer.state_dict(), a dict of {sorted(keys)}")
    for key in ("epoch", "examples", "epochs_done"):
        check_int(state[key], f"state[{key!r}]")
    size = check_int(state["producer_batch_size"], "state['producer_batch_size']", minimum=1,
                     allow_none=not state["examples"])  # fmt: skip
    examples = state["examples"]
    return [state["epoch"], examples // size, examples % size] if size else [state["epoch"], 0, 0]


def signature_of_init(cls: type) -> type:
    """Give ``cls`` its ``__init__``'s signature (without ``self``), which ``inspect`` would
    otherwise take from a ``__new__(cls, *args, **kwargs)`` that picks a backend; returns
    ``cls`` (a class decorator)."""
    init = inspect.signature(cls.__init__)
    cls.__signature__ = init.replace(parameters=list(init.parameters.values())[1:])
    return cls


def check_int(
    value: object, name: str, minimum: int = 0, *, allow_none: bool = False
) -> int | None:
    """Validate an integer argument (a Python int, not bool) and return it.

    It takes `echo.core.check_int`'s arguments, and ``allow_none``: the two libraries import
    nothing of each other, so each keeps its own.

    Args:
        value: The value to check.
        name: Argument name used in the error message.
        minimum: Smallest valid value. Default 0.
        allow_none: Whether None is valid too. Default False.

    Raises:
        ValueError: ``value`` is not an integer (nor None where ``allow_none``) or is below
            ``minimum``.
    """
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        valid = f"an integer >= {minimum}" + (" or None" if allow_none else "")
        raise ValueError(f"{name} must be {valid}, got {value!r}")
    return value


RENAMED = {"wait_for": "consumers"}
"""A producer's former keyword -> its name now; the former one is still accepted, with a
DeprecationWarning."""


def accepting_former_names(init: Callable[..., None]) -> Callable[..., None]:
    """``init`` that also takes each `RENAMED` keyword under its former name, warning."""

    @functools.wraps(init)
    def accepting(self: Any, *args: Any, **kwargs: Any) -> None:
        for former, name in RENAMED.items():
            if former in kwargs:
                if name in kwargs:
                    raise TypeError(f"pass {name}= alone: {former}= is its former name")
                message = f"{former}= is now {name}= (the former name will go)"
                warnings.warn(message, DeprecationWarning, stacklevel=2)
                kwargs[name] = kwargs.pop(former)
        init(self, *args, **kwargs)

    return accepting


def extends_init(base: type, *, without: tuple[str, ...] = ()) -> Callable[..., Any]:
    """Decorate an ``__init__(self, first, *, own=..., **inherited)`` that takes
    ``base.__init__``'s keyword-only arguments (but ``without``) as ``**inherited``, each
    filled in with ``base``'s default when not given: its signature (what ``help`` and
    ``inspect`` show, and what is checked) is ``base``'s, less ``without``, plus its own.

    Args:
        base: The class whose ``__init__`` it extends.
        without: ``base``'s arguments it does not take. Default none.
    """
    keyword = inspect.Parameter.KEYWORD_ONLY

    def decorate(init: Callable[..., None]) -> Callable[..., None]:
        parameters = inspect.signature(init).parameters.values()
        inherited = [
            p
            for p in inspect.signature(base.__init__).parameters.values()
            if p.kind is keyword and p.name not in without
        ]
        own = [p for p in parameters if p.kind is not inspect.Parameter.VAR_KEYWORD]
        first = [p for p in own if p.kind is not keyword]
        signature = inspect.signature(init).replace(
            parameters=[*first, *inherited, *(p for p in own if p.kind is keyword)]
        )
        names = {p.name for p in inherited}

        @functools.wraps(init)
        def extended(*args: Any, **kwargs: Any) -> None:
            given = signature.bind(*args, **kwargs).arguments
            passed = {name: value for name, value in given.items() if name not in names}
            init(**passed, **{p.name: given.get(p.name, p.default) for p in inherited})

        extended.__signature__ = signature  # type: ignore[attr-defined]
        return extended

    return decorate
