"""A client connection's state, and a cross-shard reserve in progress."""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence
from enum import IntEnum
from heapq import heapify, heappop, heappush
from typing import Any

from shardq.engine.engine import SAFETY_MARGIN
from shardq.engine.reserve import Offer
from shardq.processes.common.sockio import plain_fd
from shardq.processes.shard.core import LOCAL_PEER
from shardq.protocol import commands as c
from shardq.protocol import proto

COORDINATOR = -1  #: target index for the coordinator in request batches
LOCAL = LOCAL_PEER  #: the peer identity of the serving process's own requests to its hosted shard

#: what runs when a request is answered: the connection, the reply's payload
Done = Callable[["Conn", Sequence[Any]], None]


class Phase(IntEnum):
    """Where a connection is in running its commands. Ordered: below BUSY it may start its
    next command."""

    IDLE = 1  # may run its next command
    PIPING = 2  # plain commands in flight to one shard (`piped` of them); more may join
    BUSY = 3  # one command in flight; the next waits for its answer
    CLOSING = 4  # quit or end of input: closed once this turn's output is written
    CLOSED = 5


IDLE, PIPING, BUSY, CLOSING, CLOSED = Phase

#: (phase, event) -> next phase: the one statement of how a connection moves. A missing
#: entry is a bug in the serving process (the per-command guard answers INTERNAL_ERROR).
STEPS: dict[tuple[Phase, str], Phase] = {
    (IDLE, "call"): BUSY,  # a command that waits for its answer (reserve, use, stats...)
    (IDLE, "pipe"): PIPING,  # a plain shard command, answered in order
    (PIPING, "pipe"): PIPING,
    (PIPING, "drained"): IDLE,  # the last pipelined command was answered
    (BUSY, "resume"): IDLE,  # what it waited for came (a put's id), no answer yet
    (BUSY, "answer"): IDLE,
    (IDLE, "answer"): IDLE,  # answered at once
    (PIPING, "answer"): PIPING,  # one of the pipelined commands answered
    (CLOSING, "answer"): CLOSING,  # a waiting reserve answered at end of input
    (IDLE, "finish"): CLOSING,  # quit, or end of input with nothing in flight
    (CLOSING, "finish"): CLOSING,
    **{(phase, "close"): CLOSED for phase in Phase},  # gone: its socket is closed
    # closed is final: what was under way for it when it went (a put waiting for an id, an
    # answer on its way) still arrives, and moves nothing
    **{(CLOSED, event): CLOSED for event in ("call", "pipe", "drained", "resume", "answer")},
    (CLOSED, "finish"): CLOSED,
}


class Conn:
    """One client connection: its parser, output, tubes and reservations."""

    __slots__ = (
        "id",
        "sock",
        "fd",
        "parser",
        "max_job_size",
        "out",
        "use",
        "watch",
        "phase",
        "reserved",
        "producer",
        "worker",
        "eof",
        "waiting",
        "shards",
        "events",
        "paused",
        "piped",
        "pipe_target",
        "held",
        "pumping",
        "away",
        "leaving",
        "moves",
        "handshaking",
        "offered",
        "deadlines",
        "dirty",
    )

    def __init__(self, conn_id: int, sock: socket.socket, max_job_size: int) -> None:
        self.id = conn_id
        self.sock = sock
        #: the descriptor its reads and writes go to (sockio.py); -1: through `sock`'s own
        #: methods (TLS), or closed
        self.fd = plain_fd(sock)
        self.handshaking = False  # a TLS connection whose handshake is not done yet
        self.parser = proto.Parser(max_job_size)
        self.max_job_size = max_job_size  #: its parser's, read by the fast path (home.py)
        self.out = bytearray()
        self.use = "default"
        self.watch = ["default"]
        self.phase = IDLE
        self.piped = 0  # pipelined commands in flight to `pipe_target` (phase PIPING)
        self.pipe_target = 0
        self.held: c.Command | None = None  # parsed, waiting for the pipelined ones to finish
        self.pumping = False  # inside pump(): replies must not start another pump (recursion)
        #: job id -> TTR deadline, as far as we know: changed only by `hold` and `let_go`
        self.reserved: dict[int, int] = {}
        #: (deadline, job id) of `reserved`, a heap; an entry whose job left `reserved` or
        #: has another deadline now is stale, dropped when it comes to the top. Empty while
        #: the connection holds one job at most (its deadline is `reserved`'s one value):
        #: a worker that reserves and deletes one job at a time never pushes.
        self.deadlines: list[tuple[int, int]] = []
        self.dirty = False  #: listed to be written this turn (outgoing.py)
        self.producer = False
        self.worker = False
        self.eof = False  # the client closed its side: no more input will come
        self.waiting: CrossReserve | int | None = None  # a reserve in progress (rid or cross)
        #: the hosted shard's job offered to its reserve while another shard is asked for a
        #: better one (serving/cross.py, `reserve_against_home`)
        self.offered: Offer | None = None
        self.shards: set[int] = set()  # shards that may hold its reservations or waiters
        self.events = 0  # the selector events it is registered for (0: not registered)
        self.paused = False  # not read from: its unparsed input passed the bound
        self.away: bool | None = None  # home is another serving process's (None: find out)
        #: away, and its pipeline draining so that it can move: no new command is parsed
        self.leaving = False
        self.moves = 0  # how often it was handed to another serving process (handoff.py)

    def close_socket(self) -> None:
        """Close this process's descriptor of the client (the connection itself stays open
        where another process holds one); `fd` is -1 from now on, since its number may be
        the next socket's."""
        self.sock.close()
        self.fd = -1

    def step(self, event: str) -> None:
        """Move to the next phase (STEPS); an event the phase does not allow is a bug."""
        self.phase = STEPS[(self.phase, event)]

    def hold(self, job_id: int, deadline: int) -> None:
        """The job is reserved by this connection until `deadline` (a reserve, a touch)."""
        reserved = self.reserved
        reserved[job_id] = deadline
        heap = self.deadlines
        if heap:  # it holds every job of `reserved` (and maybe stale ones)
            heappush(heap, (deadline, job_id))
            if len(heap) > 2 * len(reserved) + 64:  # stale entries under a long-held top
                self.deadlines = heap = [(d, j) for j, d in reserved.items()]
                heapify(heap)
        elif len(reserved) > 1:  # a second job: the heap starts
            self.deadlines = heap = [(d, j) for j, d in reserved.items()]
            heapify(heap)

    def let_go(self, job_id: int) -> None:
        """The job is no longer reserved by it (deleted, released, buried)."""
        self.reserved.pop(job_id, None)

    def soon_at(self, now: int) -> int | None:
        """When the soonest reserved job enters the DEADLINE_SOON margin (None: no job). A
        job whose deadline passed is forgotten (its TTR ran out: the shard took it back).
        The heap's top, after the stale entries above it: O(log n) a reserve, where a scan
        of every reserved job made a client that holds many (the bunqueue door: 50 a pull)
        pay for all of them on each reserve."""
        reserved, heap = self.reserved, self.deadlines
        if not heap:  # one job at most: hold starts the heap at a second
            for job_id, deadline in reserved.items():
                if deadline >= now:
                    return deadline - SAFETY_MARGIN
                del reserved[job_id]
                break  # (the only one: no iteration goes on after the change)
            return None
        while heap:
            deadline, job_id = heap[0]
            if reserved.get(job_id) == deadline:
                if deadline >= now:
                    return deadline - SAFETY_MARGIN
                del reserved[job_id]
            heappop(heap)
        return None


class CrossReserve:
    """A reserve over tubes on several shards, in progress."""

    __slots__ = (
        "conn",
        "rids",
        "tubes",
        "live",
        "answered",
        "offers",
        "done",
        "expire_at",
        "reply",
        "answer",
    )

    def __init__(self, conn: Conn) -> None:
        self.conn = conn
        self.rids: dict[int, int] = {}  # rid -> shard
        self.tubes: dict[int, list[str]] = {}  # rid -> the watched tubes on its shard
        self.live: set[int] = set()  # rids whose shard may still offer a job
        self.answered: set[int] = set()  # rids whose shard gave its first answer
        self.offers: list[tuple[int, Offer]] = []  # (rid, offer) collected, not settled
        self.done = False
        self.expire_at: int | None = None
        self.reply = proto.TIMED_OUT  # the answer when expire_at comes
        self.answer: bytes | None = None  # settled: sent once the cancelled shards answer
