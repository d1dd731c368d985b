"""TLS connections: the handshake as the client's messages come, its time limit, the bound
on how many may be half-open at once, and what the TLS layer decrypted beyond one read.

A client that opens a TLS connection and stops mid-handshake would otherwise hold it, and
its OpenSSL state (about 48 KB), for ever: each handshake must finish within
`tls.handshake_timeout` seconds of the accept (closed and counted in `tls_failed`
otherwise), and at most MAX_HANDSHAKES may be under way per serving process — past that a
new TLS connection is closed at accept. Both count against limits.max_connections like any
connection.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from shardq.processes.common.door import tls_not_now
from shardq.processes.serving import shedding
from shardq.processes.serving.conn import CLOSED, Conn
from shardq.processes.serving.handoff import MAX_MOVES

if TYPE_CHECKING:
    from shardq.processes.serving.loop import ServingProcess

#: TLS handshakes one serving process lets be under way at once (48 KB each: 48 MiB)
MAX_HANDSHAKES = 1024
#: the default of tls.handshake_timeout, in seconds
HANDSHAKE_TIMEOUT_S = 5.0

log = logging.getLogger(__name__)


def admit_handshake(self: ServingProcess) -> bool:
    """May one more TLS connection start its handshake? False past MAX_HANDSHAKES (the
    caller closes it, counted in tls_failed)."""
    if len(self.handshakes) < self.max_handshakes:
        return True
    self.tls_failed += 1
    return False


def start_handshake(self: ServingProcess, conn: Conn) -> None:
    """A TLS connection was accepted: its handshake runs in read() as the client's
    messages come, and must be done by the deadline."""
    conn.handshaking = True
    conn.moves = MAX_MOVES  # TLS state cannot be handed to another process
    self.handshakes[conn] = time.monotonic() + self.handshake_s


def handshake(self: ServingProcess, conn: Conn) -> bool:
    """Go on with a TLS handshake; True once it is done (the client may have sent commands
    with its last handshake message: read them at once). A failed one (no or a wrong
    client certificate, not TLS at all) closes the connection, logged at DEBUG."""
    try:
        conn.sock.do_handshake()  # type: ignore[attr-defined]
    except OSError as e:  # ssl.SSLError is one
        if tls_not_now(e):
            return False
        self.tls_failed += 1
        log.debug("connection %d: TLS handshake failed: %s", conn.id, e)
        self.close(conn)
        return False
    conn.handshaking = False
    self.handshakes.pop(conn, None)
    return True


def expire_handshakes(self: ServingProcess) -> float:
    """Close the connections whose handshake ran past its deadline; the seconds until the
    next deadline (the loop sleeps no longer), or a large number when none is left.
    Deadlines are in accept order (`handshakes` keeps it), so only the oldest are looked at."""
    now = time.monotonic()
    handshakes = self.handshakes
    while handshakes:
        conn, until = next(iter(handshakes.items()))
        if until > now:
            return until - now
        del handshakes[conn]
        self.tls_failed += 1
        log.debug("connection %d: TLS handshake not done in %.1f s", conn.id, self.handshake_s)
        self.close(conn)
    return float("inf")


def read_pending(self: ServingProcess, conn: Conn) -> None:
    """Feed what the TLS layer has decrypted but not handed over yet."""
    sock = conn.sock
    while conn.phase is not CLOSED and sock.pending():  # type: ignore[attr-defined]
        try:
            n = sock.recv_into(self.rbuf)
        except OSError as e:
            if not tls_not_now(e):
                self.close(conn)
            return
        if not n or not shedding.take_input(self, conn, self.rview[:n]):
            return
