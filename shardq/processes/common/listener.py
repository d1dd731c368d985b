"""The listening socket: TCP (IPv4 or IPv6) or, as beanstalkd 1.12 does with ``-l unix:PATH``,
a unix socket. The CLI binds it before it becomes the supervisor (so a client that connects
while the processes start is queued, not refused), and every serving process accepts on it.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import TYPE_CHECKING

from shardq.processes.common.bind import (  # noqa: F401  (re-exported: the listening socket's room)
    BACKLOG,
    UNIX_PREFIX,
    bind_listener,
    close_listener,
    describe,
    listening_address,
    remove_stale_socket,
    unix_path,
    why,
)

if TYPE_CHECKING:
    import ssl

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


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
    OSError or ssl.SSLError when a file is missing or not what it should be. ssl is
    imported here, where TLS is configured, not at every start (≈ 10 ms: `door.loaded_ssl`)."""
    import ssl

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert, key)
    if client_ca:
        context.load_verify_locations(cafile=client_ca)
        context.verify_mode = ssl.CERT_REQUIRED
    return context
