"""Handing a connection to the serving process that hosts its tubes.

With several serving processes a client lands on whichever process accepted it, but its
commands are cheapest where its tubes live: there they are applied in the same turn, with
no hop. So a connection whose *home* shard is hosted by another serving process
moves there, its socket passed over a unix datagram socket (SCM_RIGHTS) with what the new
owner needs to go on (`wire.Handoff`). Its home: the shard of its used tube, or, once it
has reserved (a worker), the one shard all its watched tubes are on (if they span shards,
one of those chosen by the client's port: `spread_home`). Shards in processes of their
own have no serving process: no move.

A connection moves only at rest, so nothing of it is in flight anywhere: no pipelined or
waiting command, no job reserved, the parser between commands (its unparsed bytes go
along; bytes the client sends meanwhile wait in the socket). Its replies not written yet
go along too, and the new owner writes them: a move is decided before a turn's output
leaves (clients.flush_output), so the client sees its reply only once it is where it
goes, and whatever the reply leads to (a `stats` from another connection, say) finds it
counted there. Written first and moved after, it was in neither process's count for a
moment the client could act in (a differential test saw 3 connections of 4 once in
~90 runs on a loaded machine). Replies too long to go along are written here, and it
moves after a later one. The
new owner gives it a new id (its own origin, so a restart of either process forgets
exactly its own connections) and moves its tube references to its origin (MOVE_REF); at
accept time, when nothing was counted yet, it takes them anew. A connection moves at most
MAX_MOVES times, so a client that keeps changing tubes cannot bounce forever.

A handover is answered. Until then the sender keeps its descriptor and counts the
connection (`Handovers.moving`: against its descriptors and its share of
limits.max_connections) without reading it. The receiver takes it (TAKEN: the sender
lets its descriptor go) or refuses it (REFUSED: the sender serves it itself from then
on): refused when taking it would pass this process's descriptors for clients or its
share of max_connections, or when the descriptor did not arrive (out of descriptors, the
kernel drops it and flags the message MSG_CTRUNC). So no accepted client is lost to a
full process, and max_connections counts handed-in connections. When the receiver dies
before answering, its peers see its shard go (the link's DOWN) and serve what they had
sent it (`take_back`). Every datagram lands in one buffer allocated once per process
(HANDOFF_BYTES; a larger state is not sent: the connection stays), so a handover
allocates nothing large (socket.recv_fds allocated its whole buffer, 1 MiB, each call).
"""

from __future__ import annotations

import array
import contextlib
import logging
import os
import selectors
import socket
from typing import TYPE_CHECKING, NamedTuple

from shardq.cluster import wire
from shardq.cluster.routing import MAX_SERVING, mix32
from shardq.processes.common.sockpath import socket_path
from shardq.processes.serving.conn import CLOSED, IDLE, Conn
from shardq.processes.shard import ops
from shardq.processes.shard.ops import DisconnectArgs, MoveRefArgs, RefArgs

if TYPE_CHECKING:
    from shardq.processes.serving.loop import ServingProcess

log = logging.getLogger(__name__)

MAX_MOVES = 4  #: moves per connection
HANDOFF_BYTES = 64 * 1024  #: largest handoff datagram (unparsed bytes: less than a line;
#: the tube names: a connection watching more than fit stays where it is)
#: unparsed bytes a leaving connection takes along at most (room for its tubes beside them)
LEAVING_BYTES = HANDOFF_BYTES // 2
FD_BYTES = array.array("i").itemsize
ANCILLARY_BYTES = socket.CMSG_SPACE(FD_BYTES)  #: room for one descriptor


class HandoffInbox:
    """The selector key data of the handoff socket (tells it from clients and links), with
    the one buffer every datagram is received into."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray(HANDOFF_BYTES)
        self.view = memoryview(self.buf)


class Moving(NamedTuple):
    """A connection handed over and not answered yet."""

    conn: Conn
    owner: int  #: the serving process it was handed to
    counted: bool  #: its tube references are held here (else the taker takes them)


class Handovers:
    """A serving process's handoff state (its sockets only with several of them)."""

    def __init__(self) -> None:
        self.inbox: HandoffInbox | None = None  # where connections and answers come in
        self.out: socket.socket | None = None  # one unbound socket sends to every peer
        self.moving: dict[int, Moving] = {}  # ticket -> handed over, not answered yet
        self.answers: list[
            tuple[int, bytes]
        ] = []  # (peer, answer) not sent yet: its inbox was full
        self.handed_off = 0  # connections passed to another serving process
        self.handed_in = 0  # and taken from one
        self.refused = 0  # handovers refused (full, or the descriptor lost)


def handoff_path(run_dir: str, index: int) -> str:
    return socket_path(os.path.join(run_dir, f"handoff-{index}"))


def open_handoff(self: ServingProcess, run_dir: str) -> None:
    """Bind this process's handoff socket; one unbound socket sends to the others."""
    self.run_dir = run_dir
    path = handoff_path(run_dir, self.index)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)  # left by this process's previous life
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.setblocking(False)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, HANDOFF_BYTES * 4)
    state = self.handovers
    state.inbox = HandoffInbox(sock)
    self.sel.register(sock, selectors.EVENT_READ, state.inbox)
    out = state.out = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    out.setblocking(False)


def home_owner(self: ServingProcess, conn: Conn) -> int | None:
    """The serving process that hosts the connection's home shard, if it is another."""
    if conn.worker:
        shards = {self.shard_of(tube) for tube in conn.watch}
        if len(shards) == 1:
            (home,) = shards
        else:
            spread = spread_home(conn, sorted(s for s in shards if s < self.serving))
            if spread is None:
                return None
            home = spread
    else:
        home = self.shard_of(conn.use)
    if home >= self.serving or home == self.index:
        return None  # its own process, or a shard process: nowhere better to go
    return home


def spread_home(conn: Conn, hosted: list[int]) -> int | None:
    """The home of a worker whose watched tubes span shards: one of `hosted` (those of its
    shards that a serving process hosts, sorted), chosen by the client's port, so such
    workers spread over those processes (wherever they were accepted) instead of all
    staying where they landed (every new connection starts at the home of ``default``).
    Its reserves cost the same in any of them (a hop to the other shard); spread, they use
    every core. The port is
    mixed (a kernel may hand out only even ports) and is the connection's own, so the
    choice is the same in every process and a worker moves for it once. None: no such
    shard, or no port (a unix socket)."""
    if not hosted:
        return None
    try:
        peer = conn.sock.getpeername()
    except OSError:
        return None
    if not isinstance(peer, tuple):
        return None
    return hosted[mix32(peer[1]) % len(hosted)]


def should_move(self: ServingProcess, conn: Conn) -> bool:
    """Worth moving (cached in conn.away until its tubes or worker flag change)."""
    away = conn.away
    if away is None:
        away = conn.away = conn.moves < MAX_MOVES and self.home_owner(conn) is not None
    return away


def at_rest(conn: Conn) -> bool:
    """Nothing of it in flight (its unwritten replies may go along: hand_off)."""
    return (
        conn.phase is IDLE
        and not conn.reserved
        and conn.waiting is None
        and conn.held is None
        and not conn.eof
    )


def hand_off(self: ServingProcess, conn: Conn, counted: bool = True) -> bool:
    """Pass the connection to its home's serving process; False if it stays (not at rest,
    or that process cannot take it now: it is restarting, or its inbox is full). Until
    the answer comes it is not read here (`Handovers.moving`)."""
    owner = self.home_owner(conn)
    pending = conn.parser.handover()
    out = self.handovers.out
    if owner is None or pending is None or out is None or not at_rest(conn):
        return False
    state = wire.Handoff(
        conn.use,
        conn.watch,
        conn.producer,
        conn.worker,
        pending,
        bytes(conn.out),
        self.index,
        counted,
        conn.moves,
        conn.id,
    )
    data = wire.pack_handoff(state)
    if len(data) > HANDOFF_BYTES:
        if len(data) - len(conn.out) > HANDOFF_BYTES:  # more tubes than a datagram holds
            conn.away = False  # it stays
        return False  # (else its replies are long: written here, it moves after a later one)
    try:
        # sendmsg, not socket.send_fds: Python 3.11's send_fds drops its address argument
        out.sendmsg(
            [data],
            [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [conn.sock.fileno()]))],
            0,
            handoff_path(self.run_dir, owner),
        )
    except OSError as e:  # not there (restarting), or full: it stays, for now
        log.debug("handoff to serving process %d failed: %s", owner, e)
        conn.away = False if conn.moves >= MAX_MOVES else None
        return False
    self.unlist(conn)  # not read here while the other process may be reading it
    self.handovers.moving[conn.id] = Moving(conn, owner, counted)
    return True


def held(self: ServingProcess) -> int:
    """The connections this process answers for: its own, and those it handed over and
    has no answer for yet. At a limit, the answers already here are taken in first, so a
    connection taken by its new owner no longer counts here."""
    state = self.handovers
    count = len(self.conns) + len(state.moving)
    if state.moving and state.inbox is not None and full(self, count):
        self.adopt(state.inbox)
        count = len(self.conns) + len(state.moving)
    return count


def full(self: ServingProcess, held: int) -> bool:
    """No room for one more client: descriptors (FD_RESERVE kept) or max_connections."""
    return held >= self.max_clients or 0 < self.conn_limit <= held


def adopt(self: ServingProcess, inbox: HandoffInbox) -> None:
    """Take in every datagram of the handoff socket: connections handed to this process,
    and the answers to the ones it handed over."""
    while True:
        try:
            size, ancillary, flags, _addr = inbox.sock.recvmsg_into([inbox.view], ANCILLARY_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        fds = array.array("i")
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(data[: len(data) - len(data) % FD_BYTES])
        sock = socket.socket(fileno=fds[0]) if fds else None
        for extra in fds[1:]:  # never sent: not ours to keep
            os.close(extra)
        try:
            if flags & socket.MSG_TRUNC:
                raise ValueError(f"a datagram of more than {HANDOFF_BYTES} bytes")
            got = wire.unpack_handoff(inbox.view[:size])
        except (ValueError, TypeError) as e:
            log.error("a malformed handoff datagram (%s): dropped", e)
            if sock is not None:
                sock.close()
            continue
        if isinstance(got, wire.Handoff):
            take(self, got, sock)  # none: out of descriptors, dropped (MSG_CTRUNC)
        elif sock is not None:  # an answer carries no descriptor
            sock.close()
        else:
            answered(self, *got)


def take(self: ServingProcess, state: wire.Handoff, sock: socket.socket | None) -> None:
    """A connection handed to this process: take it, or refuse it (the sender keeps it)
    when it would pass this process's room for clients, or its descriptor did not come."""
    if sock is None or full(self, len(self.conns) + len(self.handovers.moving)):
        if sock is not None:
            sock.close()  # ours only: the sender's descriptor keeps the connection open
        why = "full" if sock is not None else "its descriptor was lost (out of descriptors)"
        log.debug("handoff from serving process %d refused: %s", state.origin, why)
        self.handovers.refused += 1
        answer(self, state.origin, wire.REFUSED, state.ticket)
        return
    sock.setblocking(False)
    conn = Conn(self.next_conn, sock, self.job_limit(self.is_private(sock)))
    self.next_conn += MAX_SERVING
    conn.use, conn.watch = state.use, list(state.watch)
    conn.producer, conn.worker = state.producer, state.worker
    conn.moves = state.moves + 1
    self.conns[conn.id] = conn
    if state.output:  # the sender's replies not written yet: before any of ours
        conn.out += state.output
        self.dirty.add(conn)
    self.interest(conn)
    self.handovers.handed_in += 1
    answer(self, state.origin, wire.TAKEN, state.ticket)  # before anything is answered here
    refs = [(conn.use, 1, 0)] + [(tube, 0, 1) for tube in conn.watch]
    for tube, using, watching in refs:
        if state.counted:
            args = MoveRefArgs(tube, using, watching, state.origin)
            self.request(self.shard_of(tube), ops.MOVE_REF, conn, args, None)
        else:
            ref = RefArgs(tube, using, watching)
            self.request(self.shard_of(tube), ops.REF, conn, ref, None)
    if state.pending:
        conn.parser.feed(state.pending)
        self.pump(conn)
    if conn.phase is not CLOSED:
        self.read(conn)  # what came meanwhile (an end of input, too) is seen at once


def answer(self: ServingProcess, origin: int, kind: int, ticket: int) -> None:
    """Tell the sender of a handover what became of it; kept and sent again next turn if
    its socket is full (`send_answers`)."""
    self.handovers.answers.append((origin, wire.pack_answer(kind, ticket)))
    send_answers(self)


def send_answers(self: ServingProcess) -> None:
    """Send the answers not sent yet, in order; the loop retries soon while any is left."""
    out, answers = self.handovers.out, self.handovers.answers
    while answers and out is not None:
        origin, data = answers[0]
        try:
            out.sendto(data, handoff_path(self.run_dir, origin))
        except (BlockingIOError, InterruptedError):
            self.retry_soon = True  # its inbox is full: it is reading it
            return
        except OSError as e:  # gone: what it handed over closed with it
            log.debug("answer to serving process %d dropped: %s", origin, e)
        answers.pop(0)


def answered(self: ServingProcess, kind: int, ticket: int) -> None:
    """The answer to a handover of ours: let the connection go, or serve it again."""
    moving = self.handovers.moving.pop(ticket, None)
    if moving is None:
        return  # taken back already (take_back): its taker had gone
    if kind == wire.TAKEN:
        let_go(self, moving.conn)
    else:
        keep(self, moving)


def let_go(self: ServingProcess, conn: Conn) -> None:
    """Taken by its new owner: close our descriptor and leave no trace of the old id."""
    conn.step("close")
    conn.close_socket()  # our descriptor only: the new owner's keeps the connection open
    for shard in conn.shards:  # nothing is held, but leave no trace of the old id
        self.request(shard, ops.DISCONNECT, conn, DisconnectArgs(False, False), None)
    self.handovers.handed_off += 1


def keep(self: ServingProcess, moving: Moving) -> None:
    """Refused (or its taker went): serve it here from now on, as if it had never moved;
    its replies that went along are written here (a refusal wrote none), and what the
    client sent meanwhile waits in its socket and is read at once."""
    conn = moving.conn
    conn.away = False
    conn.leaving = False
    self.conns[conn.id] = conn
    if conn.out:
        self.dirty.add(conn)
    self.interest(conn)
    if not moving.counted:  # handed over at accept: take its references as accept would
        self.request(self.shard_of(conn.use), ops.REF, conn, RefArgs(conn.use, 1, 1), None)
    self.read(conn)


def take_back(self: ServingProcess, owner: int) -> None:
    """Serving process `owner` went (its shard's connection dropped) with handovers not
    answered: it took none of them for good, so serve them here."""
    handed = self.handovers.moving
    for ticket, moving in list(handed.items()):
        if moving.owner == owner:
            del handed[ticket]
            keep(self, moving)


def move_home(self: ServingProcess, conn: Conn) -> bool:
    """Before a turn's output is written: move the connection if it is away from home and
    at rest, its replies with it (True: moved; its new owner writes them).

    A client that keeps a pipeline full is never at rest by itself: each reply lets the
    next command go (the bunqueue door's connections stayed away in 7 of 12 runs). So
    a connection that is away and not at rest only for what is in flight is *leaving*: it
    is not read, pump parses its commands only while it holds more than LEAVING_BYTES of
    them, its pipeline drains, and then it moves with its unparsed bytes and its last
    replies. If it cannot move after all, it goes on here (`backlog`: the commands it held
    back run next turn)."""
    if conn.phase is CLOSED:
        return False
    if not self.should_move(conn):
        stay(self, conn)
        return False
    if not at_rest(conn):
        if conn.reserved or conn.waiting is not None or conn.eof:
            stay(self, conn)  # not only in flight: it would not come to rest by draining
        elif not conn.leaving:
            conn.leaving = True
            self.interest(conn)  # not read meanwhile: what it sends waits in its socket
        return False
    if self.hand_off(conn):
        return True
    stay(self, conn)
    return False


def leaves_now(conn: Conn) -> bool:
    """A leaving connection's unparsed bytes are few enough to go along: parse no more."""
    return conn.parser.buffered <= LEAVING_BYTES


def stay(self: ServingProcess, conn: Conn) -> None:
    """It does not move now: if it was leaving, the commands it held back run next turn."""
    if conn.leaving:
        conn.leaving = False
        self.interest(conn)
        self.backlog.add(conn)
