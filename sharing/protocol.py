"""The control channel's messages: one JSON object per SOCK_SEQPACKET record, checked
against a schema.

Nothing but these small messages crosses the socket: batch data stays in shared memory, whose
descriptors ride along with a batch message (SCM_RIGHTS); nothing is unpickled. Each message
is a JSON object with a ``type`` and exactly the fields its schema lists, of the listed types;
anything else is a `ProtocolError`.
"""

from __future__ import annotations

import json
import os
import socket
from typing import Any

from sharing.errors import ProtocolError

__all__ = [
    "END_REASONS",
    "JOIN_MODES",
    "LATE_JOIN_MODES",
    "MAX_DESCRIPTORS",
    "MAX_INT",
    "MAX_MESSAGE_BYTES",
    "PROTOCOL_VERSION",
    "SCHEMAS",
    "check",
    "decode",
    "encode",
    "recv",
    "send",
    "short",
]

PROTOCOL_VERSION = 3
MAX_INT = 2**63 - 1  # integers beyond +-MAX_INT are refused (no field needs them)
LATE_JOIN_MODES = ("auto", "replay", "next_epoch")
"""A consumer's choices when it joins mid-epoch (its hello's ``late_join``)."""
JOIN_MODES = ("start", "replay", "reload", "wrap", "next_epoch", "resume")
"""How a consumer was let in (its welcome's ``mode``)."""
END_REASONS = ("finished", "stopped", "failed")
"""Why a stream ended (its ``end`` message's ``reason``): every epoch was served, the producer
was stopped (`Producer.stop`, SIGTERM, closing), or its loader raised (``detail`` says what)."""
MAX_MESSAGE_BYTES = 64 << 10
MAX_DESCRIPTORS = 253  # the kernel's limit per message (SCM_MAX_FD)

_INT = (int,)
_OPT_INT = (int, type(None))
_STR = (str,)

# type -> {field: allowed Python types}; every field is required, no other field is allowed.
SCHEMAS: dict[str, dict[str, tuple[type, ...]]] = {
    # consumer -> producer
    # resume: None, or [epoch, batch]: the first producer batch a restarted consumer needs
    "hello": {
        "version": _INT,
        "batch_size": _OPT_INT,
        "late_join": _STR,
        "pid": _INT,
        "resume": (list, type(None)),
    },
    "release": {"seq": _INT},  # done with the batch: counts against max_lag no more
    "free": {"seq": _INT},  # a pooled batch's memory is no longer referenced (may be reused)
    "leave": {},
    # producer -> consumer
    "welcome": {
        "version": _INT,
        "consumer_id": _INT,
        "batches_per_epoch": _OPT_INT,
        "epoch": _INT,
        "start_index": _INT,
        "mode": _STR,
    },
    # segment: None (the descriptors sent hold the batch) or the id of a pooled segment (its
    # descriptor comes with the first batch in it; later ones reuse the consumer's mapping)
    "batch": {"seq": _INT, "epoch": _INT, "index": _INT, "layout": (dict,), "segment": _OPT_INT},
    "end_epoch": {"epoch": _INT, "batches": _INT},
    "end": {"reason": _STR, "detail": _STR},
    "error": {"code": _STR, "reason": _STR},
}


def check(message: object) -> dict[str, Any]:
    """Return ``message`` if it matches its schema.

    Raises:
        ProtocolError: Not an object, unknown type, missing/extra field or wrong field type.
    """
    if not isinstance(message, dict):
        raise ProtocolError(f"message must be a JSON object, got {type(message).__name__}")
    kind = message.get("type")
    schema = SCHEMAS.get(kind) if isinstance(kind, str) else None
    if schema is None:
        raise ProtocolError(f"unknown message type {short(kind)}; valid: {sorted(SCHEMAS)}")
    fields = set(message) - {"type"}
    if fields != set(schema):
        raise ProtocolError(
            f"{kind!r} message has fields {short(sorted(fields))}, expected {sorted(schema)}"
        )
    for name, types in schema.items():
        value = message[name]
        if (
            isinstance(value, bool)
            or not isinstance(value, types)
            or (isinstance(value, int) and not -MAX_INT <= value <= MAX_INT)
        ):
            raise ProtocolError(f"{kind!r} field {name!r} has bad value {short(value)}")
    return message


def short(value: object, limit: int = 80) -> str:
    """``repr(value)``, cut to about ``limit`` characters (to quote a peer's value safely)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT:
        return f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
    try:
        text = repr(value)
    except RecursionError:
        return f"a deeply nested {type(value).__name__}"
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def encode(kind: str, **fields: Any) -> bytes:
    """One message of type ``kind`` (checked before it is sent)."""
    body = json.dumps(check({"type": kind, **fields}), separators=(",", ":")).encode()
    if len(body) > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"message of {len(body)} bytes exceeds {MAX_MESSAGE_BYTES}")
    return body


def decode(body: bytes) -> dict[str, Any]:
    """Parse and check one message.

    Raises:
        ProtocolError: Anything but a schema-valid JSON object: bad UTF-8 or JSON, nesting
            too deep to parse, an integer too long to convert, or a schema mismatch.
    """
    try:
        message = json.loads(body)
    except (ValueError, RecursionError) as error:  # ValueError: UTF-8, JSON, integer size
        raise ProtocolError(f"message is not acceptable JSON: {short(str(error))}") from None
    return check(message)


def send(sock: socket.socket, kind: str, fds: list[int] = (), **fields: Any) -> None:  # type: ignore[assignment]
    """Send one message (and descriptors) on a blocking SOCK_SEQPACKET socket."""
    body = encode(kind, **fields)
    if fds:
        socket.send_fds(sock, [body], list(fds))
    else:
        sock.send(body)


def recv(sock: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
    """Receive one message and the descriptors sent with it; (None, []) when the peer closed.

    Raises:
        ProtocolError: The message is oversized or malformed (its descriptors are closed).
    """
    body, fds, flags, _ = socket.recv_fds(sock, MAX_MESSAGE_BYTES + 1, MAX_DESCRIPTORS)
    if not body and not fds:
        return None, []
    try:
        if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC) or len(body) > MAX_MESSAGE_BYTES:
            raise ProtocolError(f"message over {MAX_MESSAGE_BYTES} bytes or too many descriptors")
        return decode(body), fds
    except ProtocolError:
        for fd in fds:
            os.close(fd)
        raise
