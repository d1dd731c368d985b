"""The metrics endpoint's HTTP door: many clients at once, none of them able to hold it.

One selector loop over the listening socket and every connection, all non-blocking:

* every connection has a deadline: `REQUEST_TIMEOUT_S` from its accept for its TLS
  handshake and its whole request head (a client that trickles its request gets no more
  time than one that sends nothing), then as long again to take its answer; past it, it is
  closed;
* at most `MAX_OPEN` connections are open (or ``limits.max_connections``, if lower): a new
  one takes the place of the oldest still sending its request, so idle or slow clients
  cannot keep a health check out; only when every open one is being answered is a new one
  refused (`door.Gate`, which also applies the allow-list and TLS). A turn reads what came
  before it accepts, and accepts at most half the bound: a client whose request has
  arrived when the turn after its accept reads is not taken for an idle one by a flood of
  new connections;
* the requests whose heads are whole in one turn are answered together (`Respond`: one
  gathered view serves them all), then written as their clients take them. A client that
  went before its answer is closed with one DEBUG line.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from shardq.metrics.http import HttpError, Request, error, out_of_memory, parse_head
from shardq.processes.common import lifeline, outofmemory, wakeup
from shardq.processes.common.door import Gate, accept_next, receive, send_some

log = logging.getLogger(__name__)

#: to send a whole request (TLS handshake included), then as long to take the answer
REQUEST_TIMEOUT_S = 5.0
MAX_OPEN = 64  #: connections open at once (limits.max_connections lowers it)
RECV_BYTES = 16 * 1024

#: Answers requests (all those whose heads were whole in one turn): (status, bytes) each.
Respond = Callable[[list[Request]], list[tuple[int, bytes]]]


@dataclass(eq=False)
class Conn:
    sock: socket.socket
    peer: str
    deadline: float  # monotonic s: closed past it
    head: bytearray = field(default_factory=bytearray)  # the request so far
    out: bytearray = field(default_factory=bytearray)  # the answer not yet taken
    request: Request | None = None  # whole, waiting for its answer
    answering: bool = False  # its answer is made: only writing is left

    @property
    def waiting(self) -> bool:
        """Still sending its request (or its TLS handshake): one that may make room."""
        return self.request is None and not self.answering


def peer_of(sock: socket.socket) -> str:
    try:
        return str(sock.getpeername()[0])
    except (OSError, IndexError):
        return "?"


class HttpDoor:
    def __init__(self, listener: socket.socket, gate: Gate, respond: Respond) -> None:
        self.listener = listener
        self.listener.setblocking(False)
        self.gate = gate
        self.respond = respond
        self.sel = selectors.DefaultSelector()
        self.sel.register(listener, selectors.EVENT_READ, None)
        self.conns: dict[int, Conn] = {}  # by fd, oldest first
        self.ready: list[Conn] = []  # whole requests of this turn
        self.rbuf = bytearray(RECV_BYTES)

    # ------------------------------------------------------------------ connections

    def oldest_waiting(self) -> Conn | None:
        return next((c for c in self.conns.values() if c.waiting), None)

    def accept(self) -> None:
        for _ in range(max(1, self.gate.conn_limit // 2)):
            sock = accept_next(self.listener)
            if sock is None:
                return
            oldest = self.oldest_waiting()
            staying = len(self.conns) - (oldest is not None)  # if one had to make room
            admitted = self.gate.admit(sock, staying)
            if admitted is None:
                continue
            if self.gate.conn_limit and len(self.conns) >= self.gate.conn_limit:
                assert oldest is not None  # admit said there is room once it goes
                log.debug("metrics: %s closed to make room for a new client", oldest.peer)
                self.close(oldest)
            conn = Conn(admitted, peer_of(admitted), time.monotonic() + REQUEST_TIMEOUT_S)
            self.conns[admitted.fileno()] = conn
            self.sel.register(admitted, selectors.EVENT_READ, conn)

    def close(self, conn: Conn) -> None:
        self.conns.pop(conn.sock.fileno(), None)
        with contextlib.suppress(KeyError, ValueError):
            self.sel.unregister(conn.sock)
        with contextlib.suppress(OSError):
            conn.sock.close()

    def read(self, conn: Conn) -> None:
        """Take what the client sent (with TLS, the first reads do the handshake) until its
        request head is whole; a client that ends or breaks its connection first is closed."""
        try:
            n = receive(conn.sock, self.rbuf, conn.head.extend)
        except OSError as e:  # reset, or a TLS handshake that failed
            log.debug("metrics: %s: %s", conn.peer, e)
            self.close(conn)
            return
        except MemoryError:  # its request cannot be kept: told so, and closed
            outofmemory.note(f"metrics: the request of {conn.peer}, answered 503")
            self.answer(conn, 503, out_of_memory())
            return
        if n is None:
            return
        try:
            conn.request = parse_head(conn.head)
        except HttpError as e:
            self.answer(conn, e.status, error(e.status))
            return
        if conn.request is not None:
            self.ready.append(conn)  # answered at the end of this turn
        elif not n:
            log.debug("metrics: %s went before a whole request", conn.peer)
            self.close(conn)

    def answer(self, conn: Conn, status: int, data: bytes) -> None:
        asked = f"{conn.request.method} {conn.request.path}" if conn.request else "-"
        log.debug("metrics: %s %s %d", conn.peer, asked, status)
        conn.answering = True
        conn.request = None
        conn.out += data
        conn.deadline = time.monotonic() + REQUEST_TIMEOUT_S
        self.sel.modify(conn.sock, selectors.EVENT_WRITE, conn)
        self.write(conn)

    def write(self, conn: Conn) -> None:
        if not conn.answering:
            return  # whole request, answer not made yet (this turn's `answer_ready`)
        if not send_some(conn.sock, conn.out):
            log.debug("metrics: %s went before its answer", conn.peer)
            self.close(conn)
        elif not conn.out:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_WR)
            self.close(conn)

    def answer_ready(self) -> None:
        """Answer every request made whole this turn, together (one view for them all)."""
        ready, self.ready = self.ready, []
        ready = [c for c in ready if self.conns.get(c.sock.fileno()) is c and c.request]
        requests = [c.request for c in ready if c.request is not None]
        if not requests:
            return
        try:
            answers = self.respond(requests)
        except MemoryError:
            outofmemory.note(f"metrics: {len(requests)} requests, answered 503")
            answers = [(503, out_of_memory())] * len(requests)
        except Exception:
            log.exception("metrics: answering %d requests failed", len(requests))
            answers = [(500, error(500))] * len(requests)
        for conn, (status, data) in zip(ready, answers, strict=True):
            self.answer(conn, status, data)

    def expire(self) -> None:
        now = time.monotonic()
        for conn in [c for c in self.conns.values() if c.deadline <= now]:
            log.debug("metrics: %s closed: no whole request or answer taken in time", conn.peer)
            self.close(conn)

    # ------------------------------------------------------------------ the loop

    def timeout(self) -> float:
        first = min((c.deadline for c in self.conns.values()), default=None)
        if first is None:
            return lifeline.CHECK_EVERY_S
        return max(0.0, min(lifeline.CHECK_EVERY_S, first - time.monotonic()))

    def turn(self) -> None:
        waiting = False  # connections wait to be accepted: after the reads
        for key, mask in self.sel.select(self.timeout()):
            if key.data is None:
                waiting = True
            elif key.data is wakeup.SIGNALLED:
                wakeup.drain(key.fd)
            elif mask & selectors.EVENT_READ:
                self.read(key.data)
            elif mask & selectors.EVENT_WRITE:
                self.write(key.data)
        self.answer_ready()
        if waiting:
            self.accept()
        self.expire()

    def serve_forever(self) -> None:
        try:
            lifeline.run(self.sel, self.turn)
        finally:
            for conn in list(self.conns.values()):
                self.close(conn)
            self.listener.close()
