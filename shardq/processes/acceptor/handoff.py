"""Handing a connection to the serving process that hosts its tubes.

With several serving processes a client lands on whichever process accepted it, but its
commands are cheapest where its tubes live: there they are applied in the same turn, with
no ZeroMQ hop. So a connection whose *home* shard is hosted by another serving process
moves there, its socket passed over a unix datagram socket (SCM_RIGHTS) with what the new
owner needs to go on (`wire.Handoff`). Its home: the shard of its used tube, or, once it
has reserved (a worker), the one shard all its watched tubes are on (none if they span
shards: it stays). Shards in processes of their own have no serving process: no move.

A connection moves only at rest, so nothing of it is in flight anywhere: every reply
written, no pipelined or waiting command, no job reserved, the parser between commands
(its unparsed bytes go along; bytes the client sends meanwhile wait in the socket). The
new owner gives it a new id (its own origin, so a restart of either process forgets
exactly its own connections) and moves its tube references to its origin (MOVE_REF); at
accept time, when nothing was counted yet, it takes them anew. A connection moves at most
MAX_MOVES times, so a client that keeps changing tubes cannot bounce forever.
"""

from __future__ import annotations

import array
import contextlib
import logging
import os
import selectors
import socket
from typing import TYPE_CHECKING

from shardq.cluster import wire
from shardq.cluster.routing import MAX_SERVING
from shardq.processes import shard_ops as ops
from shardq.processes.acceptor.conn import CLOSED, IDLE, Conn
from shardq.processes.sockpath import socket_path

if TYPE_CHECKING:
    from shardq.processes.acceptor.loop import Acceptor

log = logging.getLogger(__name__)

MAX_MOVES = 4  #: moves per connection
HANDOFF_BYTES = 1 << 20  #: largest handoff datagram (unparsed bytes: at most a few lines)


class Inbox:
    """The selector key data of the handoff socket (tells it from clients and ZeroMQ)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock


def handoff_path(run_dir: str, index: int) -> str:
    return socket_path(os.path.join(run_dir, f"handoff-{index}"))


def open_handoff(self: Acceptor, run_dir: str) -> None:
    """Bind this process's handoff socket; one unbound socket sends to the others."""
    self.run_dir = run_dir
    path = handoff_path(run_dir, self.index)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)  # left by this process's previous life
    inbox = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    inbox.bind(path)
    inbox.setblocking(False)
    inbox.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, HANDOFF_BYTES * 4)
    self.sel.register(inbox, selectors.EVENT_READ, Inbox(inbox))
    self.handoff_in = inbox
    out = self.handoff_out = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    out.setblocking(False)


def home_owner(self: Acceptor, conn: Conn) -> int | None:
    """The serving process that hosts the connection's home shard, if it is another."""
    if conn.worker:
        shards = {self.shard_of(tube) for tube in conn.watch}
        if len(shards) != 1:
            return None
        (home,) = shards
    else:
        home = self.shard_of(conn.use)
    if home >= self.serving or home == self.index:
        return None  # its own process, or a shard process: nowhere better to go
    return home


def should_move(self: Acceptor, conn: Conn) -> bool:
    """Worth moving (cached in conn.away until its tubes or worker flag change)."""
    away = conn.away
    if away is None:
        away = conn.away = conn.moves < MAX_MOVES and self.home_owner(conn) is not None
    return away


def at_rest(conn: Conn) -> bool:
    return (
        conn.phase is IDLE
        and not conn.out
        and not conn.reserved
        and conn.waiting is None
        and conn.held is None
        and not conn.eof
    )


def hand_off(self: Acceptor, conn: Conn, counted: bool = True) -> bool:
    """Pass the connection to its home's serving process; False if it stays (not at rest,
    or that process cannot take it now: it is restarting, or its inbox is full)."""
    owner = self.home_owner(conn)
    pending = conn.parser.handover()
    out = self.handoff_out
    if owner is None or pending is None or out is None or not at_rest(conn):
        return False
    state = wire.Handoff(
        conn.use, conn.watch, conn.producer, conn.worker, pending, self.index, counted, conn.moves
    )
    try:
        # sendmsg, not socket.send_fds: Python 3.11's send_fds drops its address argument
        out.sendmsg(
            [wire.pack_handoff(state)],
            [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [conn.sock.fileno()]))],
            0,
            handoff_path(self.run_dir, owner),
        )
    except OSError as e:  # not there (restarting), or full: it stays, for now
        log.debug("handoff to serving process %d failed: %s", owner, e)
        conn.away = False if conn.moves >= MAX_MOVES else None
        return False
    conn.step("close")  # gone from here: whatever still arrives for it moves nothing
    self.conns.pop(conn.id, None)
    self.dirty.discard(conn)
    if conn.events:
        with contextlib.suppress(KeyError, ValueError):
            self.sel.unregister(conn.sock)
    conn.events = 0
    conn.sock.close()  # our descriptor only: the new owner's keeps the connection open
    for shard in conn.shards:  # nothing is held, but leave no trace of the old id
        self.request(shard, ops.DISCONNECT, conn, [], None)
    self.handed_off += 1
    return True


def adopt(self: Acceptor, inbox: Inbox) -> None:
    """Take the connections handed to this process."""
    while True:
        try:
            data, fds, _flags, _addr = socket.recv_fds(inbox.sock, HANDOFF_BYTES, 1)
        except (BlockingIOError, InterruptedError):
            return
        if not fds:
            continue
        sock = socket.socket(fileno=fds[0])
        try:
            state = wire.unpack_handoff(data)
        except (ValueError, TypeError):
            log.error("a malformed handoff: its connection is closed")
            sock.close()
            continue
        sock.setblocking(False)
        conn = Conn(self.next_conn, sock, self.job_limit(self.is_private(sock)))
        self.next_conn += MAX_SERVING
        conn.use, conn.watch = state.use, list(state.watch)
        conn.producer, conn.worker = state.producer, state.worker
        conn.moves = state.moves + 1
        self.conns[conn.id] = conn
        self.interest(conn)
        self.handed_in += 1
        refs = [(conn.use, 1, 0)] + [(tube, 0, 1) for tube in conn.watch]
        for tube, using, watching in refs:
            if state.counted:
                args = [tube, using, watching, state.origin]
                self.request(self.shard_of(tube), ops.MOVE_REF, conn, args, None)
            else:
                self.request(self.shard_of(tube), ops.REF, conn, [tube, using, watching], None)
        if state.pending:
            conn.parser.feed(state.pending)
            self.pump(conn)
        if conn.phase is not CLOSED:
            self.read(conn)  # what came meanwhile (an end of input, too) is seen at once


def move_home(self: Acceptor, conn: Conn) -> None:
    """After a turn's output: move the connection if it is away from home and at rest."""
    if conn.phase is not CLOSED and self.should_move(conn):
        self.hand_off(conn)
