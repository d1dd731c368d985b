"""A client connection's state, and a cross-shard reserve in progress."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

from shardq.engine.engine import SAFETY_MARGIN
from shardq.protocol import commands as c
from shardq.protocol import proto

COORDINATOR = -1  #: target index for the coordinator in request batches
LOCAL = b""  #: the peer identity of the acceptor's own requests to its hosted shard

Done = Callable[["Conn", list[Any]], None]  #: what runs when a request is answered


class Conn:
    """One client connection: its parser, output, tubes and reservations."""

    __slots__ = (
        "id",
        "sock",
        "parser",
        "out",
        "use",
        "watch",
        "busy",
        "reserved",
        "producer",
        "worker",
        "eof",
        "closed",
        "waiting",
        "shards",
        "wants_write",
        "piped",
        "pipe_target",
        "held",
        "pumping",
        "closing",
    )

    def __init__(self, conn_id: int, sock: socket.socket, max_job_size: int) -> None:
        self.id = conn_id
        self.sock = sock
        self.parser = proto.Parser(max_job_size)
        self.out = bytearray()
        self.use = "default"
        self.watch = ["default"]
        self.busy = False  # a command is in flight; the next one waits
        self.piped = 0  # pipelined commands in flight to `pipe_target` (busy stays False)
        self.pipe_target = 0
        self.held: c.Command | None = None  # parsed, waiting for the pipelined ones to finish
        self.pumping = False  # inside pump(): replies must not start another pump (recursion)
        self.closing = False  # quit or EOF: close once this turn's output is written
        self.reserved: dict[int, int] = {}  # job id -> TTR deadline, as far as we know
        self.producer = False
        self.worker = False
        self.eof = False
        self.closed = False
        self.waiting: CrossReserve | int | None = None  # a reserve in progress (rid or cross)
        self.shards: set[int] = set()  # shards that may hold its reservations or waiters
        self.wants_write = False  # registered for EVENT_WRITE (output the kernel did not take)

    def soon_at(self, now: int) -> int | None:
        """When the soonest reserved job enters the DEADLINE_SOON margin (None: no job)."""
        live = [d for d in self.reserved.values() if d >= now]
        if len(live) != len(self.reserved):
            self.reserved = {j: d for j, d in self.reserved.items() if d >= now}
        return min(live) - SAFETY_MARGIN if live else None


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
    )

    def __init__(self, conn: Conn) -> None:
        self.conn = conn
        self.rids: dict[int, int] = {}  # rid -> shard
        self.tubes: dict[int, list[str]] = {}  # rid -> the watched tubes on its shard
        self.live: set[int] = set()  # rids whose shard may still offer a job
        self.answered: set[int] = set()  # rids whose shard gave its first answer
        self.offers: list[list[Any]] = []
        self.done = False
        self.expire_at: int | None = None
        self.reply = proto.TIMED_OUT
