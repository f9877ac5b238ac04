"""The control channel's messages: length-prefixed JSON objects, checked against a schema.

Nothing but these small messages crosses the socket (the batch data lives in shared memory,
whose descriptor is passed once with SCM_RIGHTS); nothing is unpickled. Each message is a JSON
object with a ``type`` and exactly the fields its schema lists, of the listed types; anything
else is a `ProtocolError`.
"""

from __future__ import annotations

import json
import socket
import struct
from typing import Any

from sharing.errors import ProtocolError

__all__ = ["MAX_MESSAGE_BYTES", "PROTOCOL_VERSION", "SCHEMAS", "decode", "encode", "recv", "send"]

PROTOCOL_VERSION = 1
MAX_MESSAGE_BYTES = 1 << 20
_HEADER = struct.Struct("!I")

_INT = (int,)
_OPT_INT = (int, type(None))
_STR = (str,)

# type -> {field: allowed Python types}; every field is required, no other field is allowed.
SCHEMAS: dict[str, dict[str, tuple[type, ...]]] = {
    # consumer -> producer
    "hello": {"version": _INT, "batch_size": _OPT_INT, "late_join": _STR, "pid": _INT},
    "release": {"seq": _INT},
    "leave": {},
    # producer -> consumer
    "welcome": {
        "version": _INT,
        "consumer_id": _INT,
        "slot_bytes": _INT,
        "slots": _INT,
        "batches_per_epoch": _OPT_INT,
        "epoch": _INT,
        "start_index": _INT,
        "mode": _STR,
    },
    "batch": {"seq": _INT, "epoch": _INT, "index": _INT, "slot": _INT, "layout": (dict,)},
    "end_epoch": {"epoch": _INT, "batches": _INT},
    "end": {},
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
        raise ProtocolError(f"unknown message type {kind!r}; valid: {sorted(SCHEMAS)}")
    fields = set(message) - {"type"}
    if fields != set(schema):
        raise ProtocolError(
            f"{kind!r} message has fields {sorted(fields)}, expected {sorted(schema)}"
        )
    for name, types in schema.items():
        value = message[name]
        if isinstance(value, bool) or not isinstance(value, types):
            raise ProtocolError(f"{kind!r} field {name!r} has bad value {value!r}")
    return message


def encode(kind: str, **fields: Any) -> bytes:
    """A framed message of type ``kind`` (checked before it is sent)."""
    body = json.dumps(check({"type": kind, **fields}), separators=(",", ":")).encode()
    if len(body) > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"message of {len(body)} bytes exceeds {MAX_MESSAGE_BYTES}")
    return _HEADER.pack(len(body)) + body


def decode(body: bytes) -> dict[str, Any]:
    """Parse and check one message body (without its length header)."""
    try:
        message = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ProtocolError(f"message is not JSON: {error}") from None
    return check(message)


def send(sock: socket.socket, kind: str, **fields: Any) -> None:
    """Send one message on a blocking socket."""
    sock.sendall(encode(kind, **fields))


def _recv_exactly(sock: socket.socket, size: int) -> bytes | None:
    chunks, remaining = [], size
    while remaining:
        chunk = sock.recv(remaining)
        if not chunk:
            return None
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def recv(sock: socket.socket) -> dict[str, Any] | None:
    """Receive one message from a blocking socket; None when the peer closed the connection.

    Raises:
        ProtocolError: The message is oversized or malformed.
    """
    header = _recv_exactly(sock, _HEADER.size)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    if size > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"message of {size} bytes exceeds {MAX_MESSAGE_BYTES}")
    body = _recv_exactly(sock, size)
    if body is None:
        return None
    return decode(body)


class FrameReader:
    """Incremental framing for a non-blocking socket: feed bytes, take whole messages."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        """Add received bytes; return the complete messages they finish.

        Raises:
            ProtocolError: A message is oversized or malformed.
        """
        self._buffer += data
        messages = []
        while len(self._buffer) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self._buffer)
            if size > MAX_MESSAGE_BYTES:
                raise ProtocolError(f"message of {size} bytes exceeds {MAX_MESSAGE_BYTES}")
            end = _HEADER.size + size
            if len(self._buffer) < end:
                break
            messages.append(decode(bytes(self._buffer[_HEADER.size : end])))
            del self._buffer[:end]
        return messages
