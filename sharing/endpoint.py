"""Endpoints of the control channel: local Unix-domain sockets only.

``unix:@NAME`` is a Linux abstract socket (nothing on the filesystem, nothing to clean up);
``unix:/PATH`` is a socket file created owner-only and removed when the producer closes (one
left behind by a killed producer is detected, as nobody accepts on it, and replaced).
Either way the producer accepts only peers running as its own user (checked with
SO_PEERCRED), so another user on the machine cannot connect.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import os
import secrets
import socket
import stat
import struct
from typing import Any

__all__ = [
    "connect",
    "default_endpoint",
    "listen",
    "parse",
    "peer_credentials",
    "pid_alive",
    "unlink",
]


RAY_SCHEME = "ray:"
"""The endpoint prefix of the Ray backend (``ray:NAME``, `sharing.ray_backend`)."""


def is_ray_endpoint(endpoint: object) -> bool:
    """Whether ``endpoint`` names the Ray backend (``ray:NAME``)."""
    return isinstance(endpoint, str) and endpoint.startswith(RAY_SCHEME)


BACKENDS = {RAY_SCHEME: "sharing.ray_backend"}
"""Endpoint prefix -> the module of the backend that serves it, imported on first use of such
an endpoint (so its dependencies are needed only then); the module names its classes
``PRODUCER`` and ``CONSUMER`` (as fsspec's registry names its filesystems by path)."""


def backend_class(endpoint: object, role: str) -> Any:
    """The class that serves ``endpoint`` in ``role`` (``PRODUCER`` or ``CONSUMER``), or None
    for a local endpoint.

    Raises:
        ImportError: The backend's dependency is not installed (the message says how).
    """
    for prefix, module in BACKENDS.items():
        if isinstance(endpoint, str) and endpoint.startswith(prefix):
            try:
                loaded = importlib.import_module(module)
            except ImportError as error:
                if error.name != "ray":
                    raise
                raise ImportError(
                    f"a {prefix} endpoint needs ray: pip install 'ray>=2.60' (the project's "
                    "ray extra)"
                ) from error
            return getattr(loaded, role)
    return None


def default_endpoint() -> str:
    """A fresh abstract-socket endpoint unique to this process."""
    return f"unix:@sharing-{os.getpid()}-{secrets.token_hex(6)}"


def parse(endpoint: str) -> str | bytes:
    """The socket address of ``endpoint``.

    Raises:
        ValueError: ``endpoint`` is not ``unix:@NAME`` or ``unix:/PATH``.
    """
    if not isinstance(endpoint, str) or not endpoint.startswith("unix:") or len(endpoint) < 7:
        raise ValueError(
            f"endpoint must be 'unix:@NAME' (abstract socket) or 'unix:/PATH', got {endpoint!r}"
        )
    address = endpoint[len("unix:") :]
    if address.startswith("@"):
        return b"\0" + address[1:].encode()
    if not address.startswith("/"):
        raise ValueError(f"endpoint path must be absolute, got {endpoint!r}")
    return address


def listen(endpoint: str, backlog: int = 64) -> socket.socket:
    """A non-blocking listening socket at ``endpoint`` (a socket file is made owner-only).

    A socket file that nobody accepts on (left by a producer that was killed) is replaced.

    Raises:
        ValueError: The folder of a ``unix:/PATH`` endpoint does not exist.
        OSError: Another process listens at ``endpoint``, or a file that is not a socket is
            in the way (it is left alone).
    """
    address = parse(endpoint)
    try:
        return _bind(address, backlog)
    except FileNotFoundError:
        raise ValueError(
            f"endpoint={endpoint!r}: the folder {os.path.dirname(str(address))} does not "
            "exist; valid: 'unix:@NAME' (an abstract socket) or 'unix:/PATH' in an existing "
            "folder"
        ) from None
    except OSError as error:
        if error.errno != errno.EADDRINUSE:
            raise
        if not isinstance(address, str):  # an abstract name is freed with its last socket
            raise _in_use(endpoint) from None
        _remove_stale(endpoint, address)
    return _bind(address, backlog)


def _in_use(endpoint: str) -> OSError:
    return OSError(errno.EADDRINUSE, f"another producer is already listening at {endpoint}")


def _bind(address: str | bytes, backlog: int) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        if isinstance(address, str):
            old_umask = os.umask(0o177)
            try:
                sock.bind(address)
            finally:
                os.umask(old_umask)
        else:
            sock.bind(address)
        sock.listen(backlog)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def _remove_stale(endpoint: str, path: str) -> None:
    """Delete the socket file at ``path`` if nobody listens on it."""
    if not stat.S_ISSOCK(os.lstat(path).st_mode):
        raise OSError(errno.EADDRINUSE, f"{endpoint}: {path} exists and is not a socket")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        probe.settimeout(1.0)
        probe.connect(path)
    except ConnectionRefusedError:  # a socket file without a listener: stale
        os.unlink(path)
        return
    except FileNotFoundError:  # removed meanwhile
        return
    finally:
        probe.close()
    raise _in_use(endpoint)


def unlink(endpoint: str) -> None:
    """Remove the socket file of a ``unix:/PATH`` endpoint, if there (nothing for ``@``)."""
    address = parse(endpoint)
    if isinstance(address, str):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(address)


def connect(endpoint: str, timeout_s: float) -> socket.socket:
    """Connect to ``endpoint``, retrying until ``timeout_s`` while nobody listens yet.

    Raises:
        ConnectionError: Nothing listened at ``endpoint`` within ``timeout_s``.
    """
    import time

    address = parse(endpoint)
    deadline = time.monotonic() + timeout_s
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            sock.connect(address)
            return sock
        except (FileNotFoundError, ConnectionRefusedError) as error:
            sock.close()
            if time.monotonic() >= deadline:
                raise ConnectionError(
                    f"no producer is listening at {endpoint} (waited {timeout_s:g} s)"
                ) from error
            time.sleep(0.05)


def peer_credentials(sock: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end of a Unix socket."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, gid = struct.unpack("3i", raw)
    return pid, uid, gid


def _stat(pid: int) -> list[bytes]:
    """The fields of ``/proc/PID/stat`` after the command name (state, parent pid, ...)."""
    with open(f"/proc/{pid}/stat", "rb") as stat:
        return stat.read().rsplit(b")", 1)[1].split()


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        state = _stat(pid)[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in (b"Z", b"X")


def parent_pid(pid: int) -> int | None:
    """Process ``pid``'s parent process id, or None if it cannot be read."""
    try:
        return int(_stat(pid)[1])
    except (OSError, IndexError, ValueError):
        return None
