"""Binding the listening socket: TCP, or a unix socket for ``-l unix:PATH``.

Apart from the rest of the listener's room (allow-list, TLS) because `shardqd` binds before
it imports anything else: this module imports only what binding needs (a client library's
test suite that starts the server and connects 0.1 s later finds the port bound). A TCP
port is bound with `_socket`, the C module, alone (`bind_tcp`): `socket` builds its enums
when it is imported (≈ 3.5 ms of CPU), which `shardqd` does once the port is bound.
"""

from __future__ import annotations

import _socket
import contextlib
import errno
import os
import stat

TYPE_CHECKING = False  # typing (≈ 3 ms) is not imported before the bind
if TYPE_CHECKING:
    import socket

UNIX_PREFIX = "unix:"  #: ``-l unix:PATH``: listen on a unix socket at PATH (the port is unused)
BACKLOG = 1024  #: beanstalkd's


def unix_path(listen: str) -> str | None:
    """PATH of a ``unix:PATH`` listen address, else None."""
    return listen[len(UNIX_PREFIX) :] if listen.startswith(UNIX_PREFIX) else None


def describe(listen: str, port: int) -> str:
    """How messages name the address: ``unix:PATH`` or ``HOST:PORT``."""
    return listen if unix_path(listen) is not None else f"{listen}:{port}"


def why(e: OSError) -> str:
    """What went wrong, for a message: the system's words (a path too long for a unix socket
    is refused by Python itself, with no errno)."""
    return e.strerror or str(e)


def bind_tcp(listen: str, port: int) -> int:
    """Bind and listen on a TCP address (IPv6 if it has a colon): the descriptor,
    inheritable. OSError when the address cannot be used."""
    family = _socket.AF_INET6 if ":" in listen else _socket.AF_INET
    raw = _socket.socket(family, _socket.SOCK_STREAM)
    try:
        raw.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
        raw.bind((listen, port))
        raw.listen(BACKLOG)
    except OSError:
        raw.close()
        raise
    fd: int = raw.detach()
    os.set_inheritable(fd, True)
    return fd


def bind_listener(listen: str, port: int) -> socket.socket:
    """Bind and listen; the socket is inheritable (it crosses the exec into the supervisor
    and is passed to every serving process). OSError when the address cannot be used."""
    import socket

    path = unix_path(listen)
    if path is None:
        return socket.socket(fileno=bind_tcp(listen, port))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        remove_stale_socket(path)
        sock.bind(path)
    except OSError:
        sock.close()
        raise
    sock.listen(BACKLOG)
    sock.set_inheritable(True)
    return sock


def remove_stale_socket(path: str) -> None:
    """Remove a socket file that nobody listens on any more (a server that was killed left
    it), as beanstalkd does. A socket somebody still listens on is "in use"; a file that is
    not a socket is left alone (bind then fails on it)."""
    import socket

    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        return
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(path)
        except ConnectionRefusedError:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            return
        except OSError:
            return
    raise OSError(errno.EADDRINUSE, os.strerror(errno.EADDRINUSE))


def listening_address(sock: socket.socket) -> tuple[str, str]:
    """(host, port) for the "listening" line: ("unix", PATH) for a unix socket."""
    if sock.family == _socket.AF_UNIX:
        return "unix", str(sock.getsockname())
    host, port = sock.getsockname()[:2]
    return str(host), str(port)


def close_listener(sock: socket.socket) -> None:
    """Close the socket; a unix socket's file goes with it."""
    path = str(sock.getsockname()) if sock.family == _socket.AF_UNIX else None
    sock.close()
    if path:
        with contextlib.suppress(OSError):
            os.unlink(path)
