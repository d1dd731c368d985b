"""The coordinator process: job-id blocks and the server-wide views (stats, list-tubes).

Ids are leased in blocks (routing.ID_BLOCK) so a put needs no extra hop; the next
free block is written to a small state file before it is handed out, so ids never go
backwards when the coordinator (or the whole server) restarts on the same state dir.
`stats` and `list-tubes` fan out to every shard and are summed or merged here.
"""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import select
import signal
import socket
import sys
import time
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any

from shardq import __version__
from shardq.cluster import wire
from shardq.cluster.routing import block_shard
from shardq.cluster.wire import Answer, Asked, Lease, Reply, Request
from shardq.processes.common import lifeline, links, live, outofmemory, quota, wakeup
from shardq.processes.common.links import TOKEN, Again, Dealer, Router
from shardq.processes.common.settings import CoordinatorSettings
from shardq.processes.common.sockpath import link_path
from shardq.processes.shard import ops
from shardq.processes.shard.ops import Counts
from shardq.protocol import proto
from shardq.protocol.replies import Quoted, Raw, yaml_list, yaml_map
from shardq.protocol.stats_keys import (
    BINLOG_DAMAGED_KEY,
    BINLOG_KEYS,
    LIMIT_KEYS,
    SERVING_KEYS,
    STATS_KEYS,
)

logger = logging.getLogger(__name__)

RESEND_AFTER_S = 1.0  #: a fan-out still unanswered after this long is asked again


class Gather:
    """A fan-out in progress: who asked, and the parts received so far."""

    __slots__ = ("peer", "rid", "op", "extra", "sent_at", "every_key", "parts")

    peer: bytes
    rid: int
    op: int
    extra: Any
    sent_at: float
    every_key: bool  # stats: the limit-* keys even when no limit is set (metrics)
    parts: dict[int, Sequence[Any]]  # shard -> its payload

    def __init__(
        self,
        peer: bytes,
        rid: int,
        op: int,
        extra: Any,
        sent_at: float,
        every_key: bool = False,
        parts: dict[int, Sequence[Any]] | None = None,
    ) -> None:
        self.peer = peer
        self.rid = rid
        self.op = op
        self.extra = extra
        self.sent_at = sent_at
        self.every_key = every_key
        self.parts = dict() if parts is None else parts


class BlockTable:
    """Which shard each leased id block belongs to, in an append-only file.

    One line per lease, "<block> <shard>", fsynced before the block is handed out: an id
    is never handed out twice. A shard is leased only the blocks routing.block_shard gives
    it, above every block leased before, so each serving
    process routes every new id by that rule alone; blocks of older logs keep the owner
    the file names (the serving processes load the table at start).
    """

    def __init__(self, path: str, shards: int) -> None:
        self.path = path
        self.shards = shards
        self.blocks: dict[int, int] = {}
        try:
            with open(path) as f:
                for line in f:
                    parts = line.split()
                    if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
                        self.blocks[int(parts[0])] = int(parts[1])
        except FileNotFoundError:
            pass
        first = max(self.blocks, default=-1) + 1
        #: shard -> the next block it may be leased: the first from `first` on that the
        #: rule gives it
        self.cursor = [
            first + (shard - block_shard(first, shards)) % shards for shard in range(shards)
        ]

    def lease(self, shard: int) -> int:
        block = self.cursor[shard]
        with open(self.path, "a") as f:
            f.write(f"{block} {shard}\n")
            f.flush()
            os.fsync(f.fileno())
        self.cursor[shard] = block + self.shards
        self.blocks[block] = shard
        return block


class Coordinator:
    def __init__(
        self, run_dir: str, state_dir: str, shards: int, binlog_max: int, limited: bool = False
    ) -> None:
        self.front = Router(link_path(run_dir, "coordinator"), TOKEN)
        #: to each shard; a question asked while its shard is away waits for it (keep)
        self.shards = [
            Dealer(link_path(run_dir, f"shard-{i}"), links.name(), keep=True) for i in range(shards)
        ]
        for shard in self.shards:
            shard.connect()
        self.ids = BlockTable(os.path.join(state_dir, "id-blocks"), shards)
        self.gathers: dict[int, Gather] = {}
        self.next_rid = 1
        self.started = time.monotonic()
        self.server_id = os.urandom(8).hex()  # as secrets.token_hex(8)
        self.binlog_max = binlog_max
        self.limited = limited  # a connection limit is set (live.limits_set): show limit-*
        self.poll = select.epoll()
        self.signalled = -1  # the signal pipe (serve_forever)

    def on_front(self, peer: bytes, req: Request | wire.Unread) -> None:
        if isinstance(req, wire.Unread):  # memory was short to read it
            if req.op in (wire.STATS, wire.LIST_TUBES):
                self.answer(peer, req.rid, proto.OUT_OF_MEMORY)
            else:
                outofmemory.note(f"the coordinator: request {req.op} dropped")
            return
        op, rid = req.op, req.rid
        if op == wire.LEASE:
            block = self.ids.lease(Lease._make(req.args).shard)
            self.front.send(peer, wire.pack([Reply(rid, Answer(block))]))
            return
        if op == wire.BLOCKS:
            table = list(self.ids.blocks.items())
            self.front.send(peer, wire.pack([Reply(rid, Answer(table))]))
            return
        grid = self.next_rid
        self.next_rid += 1
        fields, every_key = Asked._make(req.args) if op == wire.STATS else (None, False)
        self.gathers[grid] = Gather(peer, rid, op, fields, time.monotonic(), every_key=every_key)
        for index in range(len(self.shards)):
            self.ask_shard(index, grid)

    def ask_shard(self, index: int, grid: int) -> None:
        op = ops.COUNTS if self.gathers[grid].op == wire.STATS else ops.LIST
        with contextlib.suppress(Again):  # MAX_QUEUED bytes wait for it: resend_stale asks
            self.shards[index].send(wire.pack([Request(op, grid, 0, ())]))

    def resend_stale(self) -> None:
        """A shard that restarted lost our question: ask the shards that have not answered."""
        now = time.monotonic()
        for grid, gather in self.gathers.items():
            if now - gather.sent_at >= RESEND_AFTER_S:
                gather.sent_at = now
                for index in range(len(self.shards)):
                    if index not in gather.parts:
                        self.ask_shard(index, grid)

    def on_shard(self, index: int, reply: Reply | wire.Unread) -> None:
        if isinstance(reply, wire.Unread):  # a shard's part memory was short to read
            gather = self.gathers.pop(reply.rid, None)
            if gather is not None:
                self.answer(gather.peer, gather.rid, proto.OUT_OF_MEMORY)
            return
        gather = self.gathers.get(reply.rid)
        if gather is None:
            return
        gather.parts[index] = reply.payload
        if len(gather.parts) < len(self.shards):
            return
        del self.gathers[reply.rid]
        parts = list(gather.parts.values())
        try:
            if gather.op == wire.STATS:
                counts = [Counts._make(part) for part in parts]
                body = self.stats(gather.extra, counts, gather.every_key)
            else:
                tubes = sorted(t for part in parts for t in Answer._make(part).value)
                body = yaml_list(name for _, name in tubes)
        except MemoryError:
            body = proto.OUT_OF_MEMORY
        self.answer(gather.peer, gather.rid, body)

    def answer(self, peer: bytes, rid: int, body: bytes) -> None:
        """`body` for request `rid` of `peer`; OUT_OF_MEMORY (what beanstalkd answers when
        it cannot allocate a reply) when memory was short to build or to pack it."""
        try:
            if body == proto.OUT_OF_MEMORY:
                raise MemoryError
            data = wire.pack([Reply(rid, Answer(body))])
        except MemoryError:
            outofmemory.note("the coordinator: a reply, answered OUT_OF_MEMORY")
            data = wire.pack([Reply(rid, Answer(proto.OUT_OF_MEMORY))])
        self.front.send(peer, data)

    def take_live(self, settings: live.Live) -> None:
        """SIGHUP: the connection limits may be set or unset now."""
        limits = (settings.max_connections, settings.max_output_bytes, settings.allow)
        self.limited = live.limits_set(*limits)

    def stats(self, asker: dict[str, Any], parts: list[Counts], every_key: bool = False) -> bytes:
        """Sum the shards' counts and the serving processes' fields (from the asker, when
        it hosts no shard, and from every hosted shard's answer) in beanstalkd's order;
        shardq's limit-* keys after them when a limit is set or has acted (`every_key`: in
        any case)."""
        counts: dict[str, int] = {}
        acc = merge_fields([asker, *(part.host for part in parts if part.host is not None)])
        utime, stime = acc.pop("rusage-utime", 0.0), acc.pop("rusage-stime", 0.0)
        for part in parts:
            for key, value in part.counts.items():
                if key == "binlog-oldest-index":  # file indexes: the oldest and newest of all
                    counts[key] = min(counts.get(key) or value, value)
                elif key == "binlog-current-index":
                    counts[key] = max(counts.get(key, 0), value)
                else:
                    counts[key] = counts.get(key, 0) + value
            utime += part.utime
            stime += part.stime
        own = resource.getrusage(resource.RUSAGE_SELF)
        utime += own.ru_utime
        stime += own.ru_stime
        uname = os.uname()  # not platform's: its import compiles regular expressions
        # 0 for what nobody reported: the serving process's part is missing when the asker
        # hosts no shard and sent none (the metrics process, with --no-colocate)
        zeros = dict.fromkeys((*BINLOG_KEYS, *LIMIT_KEYS, *SERVING_KEYS), 0)
        values = {**zeros, "draining": False, **counts, **acc}
        if quota.inherited is not None:  # limits.max_jobs / max_memory, server-wide
            values.update(quota.inherited.fields())
        values.update(
            {
                "pid": os.getppid(),
                "version": Quoted(__version__),  # quoted by 1.12 too
                "rusage-utime": Raw(f"{utime:.6f}"),
                "rusage-stime": Raw(f"{stime:.6f}"),
                "uptime": int(time.monotonic() - self.started),
                "binlog-max-size": self.binlog_max,
                "id": self.server_id,
                "hostname": socket.gethostname(),
                "os": uname.version,
                "platform": uname.machine,
            }
        )
        keys: tuple[str, ...] = STATS_KEYS
        if BINLOG_DAMAGED_KEY in values:  # only after a log with damage was replayed
            at = keys.index(BINLOG_KEYS[-1]) + 1
            keys = (*keys[:at], BINLOG_DAMAGED_KEY, *keys[at:])
        if every_key or self.limited or limits_acted(values):
            keys += LIMIT_KEYS  # shardq's own, after every key of beanstalkd's
        return yaml_map((key, values[key]) for key in keys)

    def serve_forever(self) -> None:
        self.poll.register(self.front.fd, select.EPOLLIN)
        for shard in self.shards:
            self.poll.register(shard.fd, select.EPOLLIN)
        self.signalled = wakeup.install()
        self.poll.register(self.signalled, select.EPOLLIN)
        while True:
            lifeline.check()
            outofmemory.guard(self.turn)  # out of memory, the next turn goes on

    def turn(self) -> None:
        self.resend_stale()
        now = time.monotonic()
        due = links.retry_due(self.shards, now)  # shards away: reached again when due
        timeout = RESEND_AFTER_S if due is None else min(RESEND_AFTER_S, max(0.0, due - now))
        held = self.front.held() or any(shard.held() for shard in self.shards)
        for fd, _ in self.poll.poll(0 if held else timeout):
            if fd == self.signalled:
                wakeup.drain(self.signalled)
        self.take_front()  # each reads only what is there (a turn out of memory left, too)
        for index, shard in enumerate(self.shards):
            self.take_shard(index, shard)

    def take_front(self) -> None:
        """Handle every request the front holds. A message leaves its link only once it
        is decoded (links.py); strangers are dropped there."""
        front = self.front
        while True:
            try:
                peer, data = front.peek()
            except Again:
                return
            batch = decoded(wire.unpack_requests, data)
            front.taken()
            for item in batch:
                request = item if isinstance(item, wire.Unread) else Request._make(item)
                self.on_front(peer, request)

    def take_shard(self, index: int, shard: Dealer) -> None:
        """Handle every reply `shard` holds; its ups and downs need nothing (a question a
        restarted shard lost is asked again by resend_stale)."""
        while (data := shard.next_message()) is not None:
            batch = decoded(wire.unpack_replies, data)
            shard.taken()
            for item in batch:
                reply = item if isinstance(item, wire.Unread) else Reply._make(item)
                self.on_shard(index, reply)


def decoded(unpack: Callable[[memoryview], list[Any]], data: memoryview) -> list[Any]:
    """A message's batch, or none (logged) if it is not one."""
    try:
        return unpack(data)
    except ValueError:
        logger.warning("coordinator: dropped a malformed message")
        return []


def limits_acted(values: dict[str, Any]) -> bool:
    """Whether `stats` shows the limit-* keys for a reason the coordinator sees in the
    values: limits.max_jobs or max_memory is set, or the default output bound (which is on
    without any setting) has closed a connection. (The connection limits it is told:
    `Coordinator.limited`.)"""
    return bool(
        values["limit-max-jobs"] or values["limit-max-memory"] or values["limit-output-closed"]
    )


def merge_fields(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The serving processes' stats fields as one: counters summed, `draining` if any
    drains, `max-job-size` and the limits as configured (the same in each)."""
    merged: dict[str, Any] = {}
    for fields in parts:
        for key, value in fields.items():
            if key == "draining":
                merged[key] = merged.get(key, False) or value
            elif key in ("max-job-size", "limit-max-connections", "limit-max-output-bytes"):
                merged[key] = value
            else:
                merged[key] = merged.get(key, 0) + value
    return merged


def _exit_on_sigterm(signum: int, frame: FrameType | None) -> None:
    sys.exit(0)


def main(settings: CoordinatorSettings) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    door, common = settings.door, settings.common
    limited = live.limits_set(door.max_connections, door.max_output_bytes, door.allow)
    coordinator = Coordinator(
        common.run_dir, settings.state_dir, common.shards, settings.segment_bytes, limited
    )
    live.on_change(coordinator.take_live)
    try:
        coordinator.serve_forever()
    finally:
        coordinator.front.close()
        for shard in coordinator.shards:
            shard.close()
