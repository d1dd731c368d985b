"""What every listening door does with a client before and while it serves it, one mechanism
for all of them (the beanstalk port, the Kestrel and Workq front-ends, the metrics
endpoint, and any door added later):

* `turned_away`: the allow-list (``allow``: a client from elsewhere is closed and counted
  in ``connections_denied``) and the connection bound (``limits.max_connections``, and a
  door's own cap: past it, closed and counted in ``connections_refused``);
* `Gate.admit`: that, then the socket made non-blocking and, with TLS, wrapped (its
  handshake is done by the first reads, as the client's messages arrive: OpenSSL's
  SSL_read goes on with it; a client that is not TLS, or has no or a wrong client
  certificate, fails that read like any broken connection);
* `receive` and `send_some`: non-blocking reads and writes that take TLS's
  want-read/want-write as "not now" and drain what TLS decrypted beyond one read (epoll
  cannot see it).

The beanstalk serving process keeps the same four fields on itself (`Door`), so
`turned_away` serves it as it serves a `Gate`.
"""

from __future__ import annotations

import logging
import socket
import sys
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from shardq.processes.common.listener import Network, allowed, parse_networks, tls_context
from shardq.processes.common.live import Live
from shardq.processes.common.settings import Door as DoorSettings

if TYPE_CHECKING:
    import ssl

log = logging.getLogger(__name__)

#: what a plain non-blocking socket raises when it has nothing to give or take now (TLS's own
#: "not now": `tls_not_now`)
NOT_NOW = (BlockingIOError, InterruptedError)


class Door(Protocol):
    """What `turned_away` reads and counts: a `Gate`, or a serving process (same names)."""

    allow: tuple[Network, ...]
    conn_limit: int  #: 0: no limit
    connections_denied: int
    connections_refused: int


def turned_away(door: Door, sock: socket.socket, open_now: int, trusted: bool = False) -> bool:
    """Whether the client just accepted on `sock` must go (then it is closed here, nothing
    answered, and counted): from outside `door.allow`, or with `open_now` connections open
    already at `door.conn_limit`. `trusted`: it came through the run directory's private
    socket (the server's own front-ends): the allow-list does not apply, the limit does."""
    if door.allow and not trusted and not allowed(door.allow, sock):
        door.connections_denied += 1
    elif door.conn_limit and open_now >= door.conn_limit:
        door.connections_refused += 1
    else:
        return False
    sock.close()
    return True


def accept_next(listener: socket.socket) -> socket.socket | None:
    """The next client waiting on the non-blocking `listener`; None when none waits now, or
    when accept failed (out of descriptors: logged; the clients in are served meanwhile)."""
    while True:
        try:
            return listener.accept()[0]
        except (BlockingIOError, InterruptedError):
            return None
        except ConnectionAbortedError:
            continue  # gone before its turn came
        except OSError as e:
            log.warning("accept(): %s", e.strerror)
            return None


def bound(max_connections: int, cap: int) -> int:
    """A door's connection limit: ``limits.max_connections`` and its own cap, the lower of
    the two that are set (0: neither is)."""
    if max_connections and cap:
        return min(max_connections, cap)
    return max_connections or cap


class Gate:
    """A door's admission settings and counters (a front-end's, the metrics endpoint's).
    `cap`: the door's own bound on open connections, besides ``limits.max_connections``."""

    allow: tuple[Network, ...]
    conn_limit: int
    tls: ssl.SSLContext | None
    cap: int
    connections_denied: int
    connections_refused: int

    def __init__(
        self,
        allow: tuple[Network, ...] = (),
        conn_limit: int = 0,
        tls: ssl.SSLContext | None = None,
        cap: int = 0,
        connections_denied: int = 0,
        connections_refused: int = 0,
    ) -> None:
        self.allow = allow
        self.conn_limit = conn_limit
        self.tls = tls
        self.cap = cap
        self.connections_denied = connections_denied
        self.connections_refused = connections_refused

    def take_live(self, settings: Live) -> None:
        """SIGHUP: the new allow-list and limit, for connections accepted from now on."""
        self.allow = parse_networks(settings.allow)
        self.conn_limit = bound(settings.max_connections, self.cap)

    def admit(self, sock: socket.socket, open_now: int) -> socket.socket | None:
        """The accepted `sock` ready to serve (non-blocking; with TLS, wrapped, its handshake
        to come), or None: turned away (closed, counted)."""
        if turned_away(self, sock, open_now):
            return None
        sock.setblocking(False)
        if sock.family != socket.AF_UNIX:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.tls is not None:
            return self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock


def make_gate(door: DoorSettings, cap: int = 0) -> Gate:
    """A door's gate from its settings (`cap`: the door's own connection bound): TLS when
    a certificate and a key are given."""
    cert, key = door.tls_cert, door.tls_key
    tls = tls_context(cert, key, door.tls_client_ca) if cert and key else None
    return Gate(parse_networks(door.allow), bound(door.max_connections, cap), tls, cap)


def loaded_ssl() -> types.ModuleType | None:
    """The ssl module where TLS is configured, else None: it is imported only there
    (`listener.tls_context`; ≈ 10 ms of every start otherwise), and without it no socket is
    a TLS socket and no error a TLS error."""
    return sys.modules.get("ssl")


def is_tls(sock: socket.socket) -> bool:
    ssl = loaded_ssl()
    return ssl is not None and isinstance(sock, ssl.SSLSocket)


def tls_not_now(error: OSError) -> bool:
    """Whether `error` is TLS's "not now" (want-read, want-write: a TLS socket's
    `NOT_NOW`), which a caller that has a TLS socket takes as nothing to do yet."""
    ssl = loaded_ssl()
    return ssl is not None and isinstance(error, (ssl.SSLWantReadError, ssl.SSLWantWriteError))


def receive(sock: socket.socket, buf: bytearray, take: Callable[[memoryview], None]) -> int | None:
    """Read what `sock` has into the reused `buf` and hand each piece to `take`, TLS's
    decrypted rest included. The bytes read (0: the client's input ended), or None: nothing
    now. OSError: the connection failed."""
    try:
        n = sock.recv_into(buf)
    except NOT_NOW:
        return None
    except OSError as e:
        if tls_not_now(e):
            return None
        raise
    if n:
        take(memoryview(buf)[:n])
        total = n
        while is_tls(sock) and sock.pending():  # type: ignore[attr-defined]
            try:
                n = sock.recv_into(buf)
            except NOT_NOW:
                break
            except OSError as e:
                if tls_not_now(e):
                    break
                raise
            if not n:
                break
            take(memoryview(buf)[:n])
            total += n
        return total
    return n


def send_some(sock: socket.socket, buf: bytearray) -> bool:
    """Send what the socket takes now and drop it from `buf`; False: the peer is gone."""
    try:
        sent = sock.send(buf)
    except NOT_NOW:
        return True
    except OSError as e:
        return tls_not_now(e)
    del buf[:sent]
    return True
