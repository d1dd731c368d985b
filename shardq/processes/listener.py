"""The listening socket: TCP (IPv4 or IPv6) or, as beanstalkd 1.12 does with ``-l unix:PATH``,
a unix socket. The CLI binds it before it becomes the supervisor (so a client that connects
while the processes start is queued, not refused), and every serving process accepts on it.
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import os
import socket
import ssl
import stat

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
UNIX_PREFIX = "unix:"  #: ``-l unix:PATH``: listen on a unix socket at PATH (the port is unused)
BACKLOG = 1024  #: beanstalkd's


def unix_path(listen: str) -> str | None:
    """PATH of a ``unix:PATH`` listen address, else None."""
    return listen[len(UNIX_PREFIX) :] if listen.startswith(UNIX_PREFIX) else None


def describe(listen: str, port: int) -> str:
    """How messages name the address: ``unix:PATH`` or ``HOST:PORT``."""
    return listen if unix_path(listen) is not None else f"{listen}:{port}"


def bind_listener(listen: str, port: int) -> socket.socket:
    """Bind and listen; the socket is inheritable (it crosses the exec into the supervisor
    and is passed to every serving process). OSError when the address cannot be used."""
    path = unix_path(listen)
    if path is not None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            remove_stale_socket(path)
            sock.bind(path)
        except OSError:
            sock.close()
            raise
    else:
        family = socket.AF_INET6 if ":" in listen else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((listen, port))
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
    if sock.family == socket.AF_UNIX:
        return "unix", str(sock.getsockname())
    host, port = sock.getsockname()[:2]
    return str(host), str(port)


def close_listener(sock: socket.socket) -> None:
    """Close the socket; a unix socket's file goes with it."""
    path = str(sock.getsockname()) if sock.family == socket.AF_UNIX else None
    sock.close()
    if path:
        with contextlib.suppress(OSError):
            os.unlink(path)


def parse_networks(texts: tuple[str, ...]) -> tuple[Network, ...]:
    """The `allow` networks (validated by the config already)."""
    return tuple(ipaddress.ip_network(t, strict=False) for t in texts)


def allowed(networks: tuple[Network, ...], sock: socket.socket) -> bool:
    """Whether a client accepted on `sock` comes from one of `networks`. A unix-socket
    client is local and always allowed; an IPv4 client on an IPv6 socket
    (``::ffff:10.0.0.1``) is matched as IPv4."""
    if sock.family == socket.AF_UNIX:
        return True
    try:
        address = ipaddress.ip_address(sock.getpeername()[0])
    except OSError:  # already gone
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address in network for network in networks)


def tls_context(cert: str, key: str, client_ca: str | None) -> ssl.SSLContext:
    """The server side of TLS on the beanstalk port: `cert` (PEM, the chain) and `key`;
    with `client_ca`, clients must show a certificate that it signed (mutual TLS).
    OSError or ssl.SSLError when a file is missing or not what it should be."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert, key)
    if client_ca:
        context.load_verify_locations(cafile=client_ca)
        context.verify_mode = ssl.CERT_REQUIRED
    return context
