"""The acceptor process: client TCP connections in, batched requests out to the shards.

One epoll loop owns every client socket and the ZeroMQ sockets to the shards and the
coordinator. Each connection runs one command at a time, like beanstalkd: its next
command is parsed only once the reply to the current one is written, so replies are
always in order. Requests produced in one turn of the loop go to each shard as one
message, and the shard answers them with one message.

The acceptor may *host* a shard (`hosted`): that shard's ShardCore runs in this process,
so commands for its tubes are applied in the same turn with no ZeroMQ hop; its ROUTER
socket still answers the coordinator. Its log is committed before any output of the turn
leaves, so a reply is never sent for a change the log does not hold.

A reserve whose watched tubes all live on one shard goes to that shard, which keeps the
waiter, its timeout and its DEADLINE_SOON. A reserve that spans shards is run here: each
shard is asked to *offer* a job; the acceptor accepts the best (priority, put order) one,
declines the rest (they go back to their place) and cancels the other waiters. Every
offer is answered, so a job is never lost to a reserver that went away.
"""

from __future__ import annotations

import contextlib
import errno
import heapq
import os
import resource
import selectors
import signal
import socket
import sys
import time
from collections.abc import Callable
from typing import Any

import zmq
from zmq.utils.monitor import recv_monitor_message

from shardq.cluster import wire
from shardq.cluster.routing import ID_BLOCK, block_ids, id_block, tube_shard
from shardq.engine.engine import CANCELLED, OFFER, RESERVED, SAFETY_MARGIN, WAITING
from shardq.engine.job import NS
from shardq.processes import lifeline
from shardq.processes.shard import ShardCore, ShardServer
from shardq.protocol import commands as c
from shardq.protocol import proto

RECV_BYTES = 256 * 1024
COORDINATOR = -1  #: target index for the coordinator in request batches
POLLIN = int(zmq.POLLIN)  #: plain ints: pyzmq's flag enums cost a microsecond per use
ZMQ_EVENTS = int(zmq.EVENTS)
RETRY_S = 0.002  #: how soon a batch the peer could not take yet is tried again
LOCAL = b""  #: the peer identity of the acceptor's own requests to its hosted shard
SPIN_S = 100e-6  #: how long poll_briefly polls before sleeping (measured: docs/BENCHMARKS.md)
SPIN_MAX_CONNS = 4  #: poll_briefly only with at most this many client connections
SPARE_BLOCKS = 4  #: id blocks leased ahead per shard
MAX_CACHED_TUBES = 10_000  #: shard_of cache bound (clients may invent any number of names)
NO_REPLY = frozenset(
    {wire.ACCEPT, wire.DECLINE, wire.DISCONNECT, wire.REASSERT, wire.RESET}
)  #: fire-and-forget ops

Done = Callable[["Conn", list[Any]], None]

#: command class -> the `cmd-*` stats counter it bumps
STAT_KEYS: dict[type, str] = {
    c.Put: "cmd-put",
    c.Peek: "cmd-peek",
    c.PeekReady: "cmd-peek-ready",
    c.PeekDelayed: "cmd-peek-delayed",
    c.PeekBuried: "cmd-peek-buried",
    c.Reserve: "cmd-reserve",
    c.ReserveWithTimeout: "cmd-reserve-with-timeout",
    c.Delete: "cmd-delete",
    c.Release: "cmd-release",
    c.Use: "cmd-use",
    c.Watch: "cmd-watch",
    c.Ignore: "cmd-ignore",
    c.Bury: "cmd-bury",
    c.Kick: "cmd-kick",
    c.Touch: "cmd-touch",
    c.Stats: "cmd-stats",
    c.StatsJob: "cmd-stats-job",
    c.StatsTube: "cmd-stats-tube",
    c.ListTubes: "cmd-list-tubes",
    c.ListTubeUsed: "cmd-list-tube-used",
    c.ListTubesWatched: "cmd-list-tubes-watched",
    c.PauseTube: "cmd-pause-tube",
}
CMD_KEYS = tuple(dict.fromkeys(STAT_KEYS.values()))


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


class Acceptor:
    def __init__(
        self,
        listen_fd: int,
        run_dir: str,
        shards: int,
        max_job_size: int,
        hosted: ShardCore | None = None,
    ) -> None:
        self.listener = socket.socket(fileno=listen_fd)
        self.listener.setblocking(False)
        self.shard_count = shards
        self.max_job_size = max_job_size
        self.ctx = zmq.Context.instance()
        self.socks: dict[int, zmq.Socket] = {}
        endpoints = {i: f"ipc://{run_dir}/shard-{i}" for i in range(shards)}
        endpoints[COORDINATOR] = f"ipc://{run_dir}/coordinator"
        self.sel = selectors.DefaultSelector()
        self.hosted: ShardServer | None = None
        self.hosted_index = -2  # no shard index
        self.hosted_out: dict[bytes, list[Any]] = {}  # peer -> replies of the hosted shard
        if hosted is not None:
            self.hosted_index = hosted.index
            self.hosted = ShardServer(hosted, endpoints.pop(hosted.index))
            hosted_sock = self.hosted.sock
            self.sel.register(hosted_sock.getsockopt(zmq.FD), selectors.EVENT_READ, hosted_sock)
        for target in endpoints:
            self.socks[target] = self._dealer()
        self.dealers = list(self.socks.values())
        self.monitors: dict[int, zmq.Socket] = {}
        self.monitor_target: dict[zmq.Socket, int] = {}
        self.up: dict[int, bool] = {}  # target -> connected now
        self.seen_up: set[int] = set()  # targets that were connected at least once
        self.inflight: dict[int, tuple[int, list[Any]]] = {}  # rid -> (target, request)
        for target, s in self.socks.items():
            self.sel.register(s.getsockopt(zmq.FD), selectors.EVENT_READ, s)
            mon = s.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED)
            self.monitors[target] = mon
            self.monitor_target[mon] = target
            self.sel.register(mon.getsockopt(zmq.FD), selectors.EVENT_READ, mon)
            s.connect(endpoints[target])  # after the monitor, so no CONNECTED event is missed
        zsocks = self.dealers + list(self.monitors.values())
        if self.hosted is not None:
            zsocks.append(self.hosted.sock)
        # ZeroMQ sockets whose state may have changed (their fd fired, or we sent on them):
        # only these need asking for input before the loop sleeps (each ask is 2 syscalls).
        self.touched: set[zmq.Socket] = set(zsocks)
        self.conns: dict[int, Conn] = {}
        self.next_conn = time.time_ns() // 1000  # unique across acceptor restarts
        self.next_rid = 1
        self.pending: dict[int, tuple[Conn | None, Done]] = {}
        self.cross: dict[int, CrossReserve] = {}
        self.outq: dict[int, list[list[Any]]] = {}
        self.dirty: set[Conn] = set()
        self.timers: list[tuple[int, int, CrossReserve]] = []
        self.blocks: dict[int, int] = {}  # id block -> shard
        self.next_id: dict[int, int] = {}  # shard -> the next id of its current block
        self.end_id: dict[int, int] = {}  # shard -> the first id past its current block
        self.tube_shards: dict[str, int] = {}  # a cache of shard_of
        self.spare: dict[int, list[range]] = {}  # shard -> the next blocks, leased ahead
        self.leasing: dict[int, int] = {}  # shard -> leases asked for and not answered
        self.lease_waiters: dict[int, list[Callable[[], None]]] = {}
        self.stats = dict.fromkeys(CMD_KEYS, 0)
        self.total_connections = 0
        self.draining = False
        self.last_stamp = 0
        self.retry_soon = False
        self.worked = False  # the last turn had something to do (see poll_briefly)
        self.ready_fd = -1  # the supervisor's start-up pipe, written once all peers are up
        self.blocks_loaded = False
        self.serving = False  # accepting clients: only once the id-block table is loaded

    def _dealer(self) -> zmq.Socket:
        s = self.ctx.socket(zmq.DEALER)
        s.linger = 0
        s.setsockopt(zmq.IMMEDIATE, 1)  # queue here, not in a pipe to a process that died
        return s

    # ----------------------------------------------------------------- requests
    def request(
        self, target: int, op: int, conn: Conn | None, args: list[Any], done: Done | None
    ) -> int:
        rid = self.next_rid
        self.next_rid += 1
        if done is not None and conn is not None:
            self.pending[rid] = (conn, done)
        req = [op, rid, conn.id if conn else 0, *args]
        if op not in NO_REPLY and (op != wire.REF or done is not None):
            self.inflight[rid] = (target, req)  # resent if the target restarts
        self.outq.setdefault(target, []).append(req)
        return rid

    def cancel(self, target: int, rid: int, conn: Conn) -> None:
        """Withdraw a cross-shard waiter; the CANCELLED answer says no offer can follow."""
        req = [wire.CANCEL, rid, conn.id]
        self.inflight[rid] = (target, req)
        self.outq.setdefault(target, []).append(req)

    def call(self, conn: Conn, target: int, op: int, args: list[Any], done: Done) -> None:
        """Send a command for a connection. A plain request/reply op to a shard is pipelined:
        the connection may send more to the same shard before the answer, since that shard
        answers in order; anything else makes the connection wait for its answer. For the
        hosted shard a plain op is applied at once, when nothing for that shard waits ahead
        of it (its reply still leaves only after the turn's log commit)."""
        if op in PIPELINED:
            if target == self.hosted_index and not self.outq.get(target):
                assert self.hosted is not None
                done(conn, self.hosted.core.run(op, conn.id, args, time.monotonic_ns()))
                return
            conn.piped += 1
            conn.pipe_target = target

            def piped_done(k: Conn, payload: list[Any]) -> None:
                k.piped -= 1
                done(k, payload)

            self.request(target, op, conn, args, piped_done)
            return
        conn.busy = True
        self.request(target, op, conn, args, done)

    def joins_pipe(self, conn: Conn, cmd: c.Command) -> bool:
        """Would this command go, pipelined, to the shard the connection's pipeline uses?"""
        kind = type(cmd)
        if kind is c.Put:
            shard = self.shard_of(conn.use)
            return (
                cmd.error is None
                and not self.draining
                and self.next_id.get(shard, 0) < self.end_id.get(shard, 0)
                and (shard == conn.pipe_target)
            )
        if kind in BY_ID:
            return self.job_shard(cmd.id) == conn.pipe_target
        if kind in BY_USED_TUBE:
            return self.shard_of(conn.use) == conn.pipe_target
        if kind is c.StatsTube or kind is c.PauseTube:
            return self.shard_of(cmd.tube) == conn.pipe_target
        return False

    def flush_requests(self) -> None:
        self.retry_soon = False
        for target, batch in self.outq.items():
            if batch and self.up.get(target):
                sock = self.socks[target]
                self.touched.add(sock)
                try:
                    sock.send(wire.pack(batch), zmq.NOBLOCK)
                except zmq.Again:
                    self.retry_soon = True  # the peer is not writable yet; try next turn
                    continue
                batch.clear()

    def on_monitor(self, target: int, event: int) -> None:
        if event == zmq.EVENT_DISCONNECTED:
            self.up[target] = False
            return
        self.up[target] = True
        if target in self.seen_up:
            self.resync(target)
        elif target != COORDINATOR:  # first contact: drop what a previous acceptor left there
            self.outq.setdefault(target, []).insert(0, [wire.RESET, 0, 0])
        else:
            rid = self.request(COORDINATOR, wire.BLOCKS, None, [], None)
            self.pending[rid] = (None, lambda _c, p: self.on_blocks(p[0]))
        self.seen_up.add(target)
        self.maybe_ready()

    def on_blocks(self, table: list[list[int]]) -> None:
        """The id blocks leased before this acceptor started (a restart, or a log replayed)."""
        for block, shard in table:
            self.blocks[block] = shard
        self.blocks_loaded = True
        self.maybe_ready()

    def maybe_ready(self) -> None:
        """Once every process is reachable and every id routable, start taking connections
        (until then clients wait in the listen backlog) and tell the supervisor."""
        if self.serving or not self.blocks_loaded or len(self.seen_up) < len(self.socks):
            return
        self.serving = True
        self.sel.register(self.listener, selectors.EVENT_READ, None)
        if self.ready_fd >= 0:
            os.write(self.ready_fd, b"ready\n")
            os.close(self.ready_fd)
            self.ready_fd = -1

    def resent(self, req: list[Any]) -> list[Any]:
        """A request as it is sent again to a restarted process (its first try may have
        reached the log): references are already restored, and a delete or bury of a job
        the connection held is marked so the shard can tell "done before" from "not found"."""
        if req[0] == wire.REF:
            return [wire.REF, req[1], req[2], req[3], 0, 0]
        conn = self.conns.get(req[2])
        if req[0] in (wire.DELETE, wire.BURY) and conn is not None and req[3] in conn.reserved:
            return [*req, True]
        return req

    def resync(self, target: int) -> None:
        """The target restarted: restore tube references, then resend what it never answered."""
        refs: list[list[Any]] = []
        if target != COORDINATOR:
            counts: dict[str, list[int]] = {}
            for conn in self.conns.values():
                counts.setdefault(conn.use, [0, 0])[0] += 1
                for tube in conn.watch:
                    counts.setdefault(tube, [0, 0])[1] += 1
            for tube, (using, watching) in counts.items():
                if self.shard_of(tube) == target:
                    refs.append([wire.REF, 0, 0, tube, using, watching])
            now = time.monotonic_ns()
            for conn in self.conns.values():
                for job_id, deadline in conn.reserved.items():
                    if deadline >= now and self.job_shard(job_id) == target:
                        refs.append([wire.REASSERT, 0, conn.id, job_id, deadline])
        self.reask_offers(target)
        resend = []
        for rid, (t, req) in sorted(self.inflight.items()):
            if t != target:
                continue
            if req[2] == 0 or req[2] in self.conns:
                resend.append(self.resent(req))
            else:
                self.drop_request(rid)  # its connection is gone: nothing of it survives
        queued = [r for r in self.outq.get(target, []) if r[1] not in self.inflight]
        self.outq[target] = refs + resend + queued

    def reask_offers(self, target: int) -> None:
        """Offers from the target that a cross-shard reserve collected and has not settled yet
        died with the process (the restarted shard has the jobs ready again): ask again, so
        an ACCEPT never goes out for a job the shard no longer holds for the connection."""
        for cross in {id(x): x for x in self.cross.values()}.values():
            if cross.done:
                continue
            for offer in [o for o in cross.offers if cross.rids[o[0]] == target]:
                cross.offers.remove(offer)
                rid = offer[0]
                cross.answered.discard(rid)
                cross.live.add(rid)
                req = [wire.RESERVE, rid, cross.conn.id, cross.tubes[rid], None, None, True]
                self.inflight[rid] = (target, req)  # resent below with the other requests

    def drop_request(self, rid: int) -> None:
        """Forget an unanswered request of a closed connection instead of resending it to a
        restarted process (a reserve sent again would wait, or take a job, for nobody). A
        cross-shard reserve's part counts as cancelled: no offer can come from it."""
        self.inflight.pop(rid, None)
        self.pending.pop(rid, None)
        cross = self.cross.get(rid)
        if cross is not None:
            self.on_cross(rid, cross, [CANCELLED])

    def on_replies(self, batch: list[list[Any]]) -> None:
        for reply in batch:
            rid, payload = reply[0], reply[1:]
            if rid == 0:
                continue
            cross = self.cross.get(rid)
            if cross is not None:
                self.on_cross(rid, cross, payload)
                continue
            self.inflight.pop(rid, None)
            entry = self.pending.pop(rid, None)
            if entry is None:
                if payload and payload[0] == OFFER:
                    self.decline_stray(payload)
                continue
            conn, done = entry
            if conn is None or not conn.closed:
                done(conn, payload)  # type: ignore[arg-type]

    def decline_stray(self, offer: list[Any]) -> None:
        """An offer for a reserve this acceptor no longer tracks: give the job back. Offers
        and cancels are ordered, so this should not happen; if it does, a job must not stay
        offered to a connection that is not waiting for it."""
        job_id, conn_id = offer[2], offer[6]
        shard = self.job_shard(job_id)
        if shard is not None:
            self.outq.setdefault(shard, []).append([wire.DECLINE, 0, conn_id, job_id])

    # ----------------------------------------------------------------- output
    def reply(self, conn: Conn, data: bytes) -> None:
        """Answer the current command and let the connection go on to its next one."""
        conn.busy = False
        conn.out += data
        self.dirty.add(conn)
        if not conn.pumping:  # a reply given inside pump(): its loop goes on by itself
            self.pump(conn)

    def flush_output(self) -> None:
        for conn in list(self.dirty):
            self.write(conn)
            if conn.closing:
                self.close(conn)
        self.dirty.clear()

    def finish(self, conn: Conn) -> None:
        """Close the connection once this turn's output (committed to the log) is written."""
        conn.closing = True
        self.dirty.add(conn)

    def write(self, conn: Conn) -> None:
        if conn.closed or not conn.out:
            return
        try:
            sent = conn.sock.send(conn.out)
        except BlockingIOError:
            sent = 0
        except OSError:
            self.close(conn)
            return
        del conn.out[:sent]
        if bool(conn.out) != conn.wants_write:  # epoll_ctl only when the interest changes
            conn.wants_write = bool(conn.out)
            mask = selectors.EVENT_READ | (selectors.EVENT_WRITE if conn.out else 0)
            self.sel.modify(conn.sock, mask, conn)

    # ----------------------------------------------------------------- connections
    def accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                if e.errno in (errno.EMFILE, errno.ENFILE, errno.ECONNABORTED):
                    return
                raise
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = Conn(self.next_conn, sock, self.max_job_size)
            self.next_conn += 1
            self.total_connections += 1
            self.conns[conn.id] = conn
            self.sel.register(sock, selectors.EVENT_READ, conn)
            self.request(
                tube_shard("default", self.shard_count), wire.REF, conn, ["default", 1, 1], None
            )

    def read(self, conn: Conn) -> None:
        try:
            data = conn.sock.recv(RECV_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.close(conn)
            return
        if not data:
            conn.eof = True
            if isinstance(conn.waiting, CrossReserve):
                self.finish_cross(conn.waiting, proto.TIMED_OUT)
            elif conn.waiting is not None:
                self.pending.pop(conn.waiting, None)
                self.inflight.pop(conn.waiting, None)
                conn.waiting = None
                conn.out += proto.TIMED_OUT
                conn.busy = False
            if not conn.busy and not conn.piped and conn.held is None:
                self.finish(conn)
            return
        conn.parser.feed(data)
        self.pump(conn)

    def pump(self, conn: Conn) -> None:
        """Run the connection's buffered commands until one must wait for a reply. Replies
        stay in order: a command joins a pipeline only if its answer comes from the same
        shard; any other waits (held) until the pipeline has drained."""
        conn.pumping = True
        try:
            while not conn.busy and not conn.closing and not conn.closed:
                cmd = conn.held or conn.parser.next_command()
                if cmd is None:
                    if conn.eof and not conn.piped:
                        self.finish(conn)
                    return
                if conn.piped and not self.joins_pipe(conn, cmd):
                    conn.held = cmd
                    return
                conn.held = None
                self.dispatch(conn, cmd)
        finally:
            conn.pumping = False

    def close(self, conn: Conn) -> None:
        if conn.closed:
            return
        conn.closed = True
        self.conns.pop(conn.id, None)
        self.dirty.discard(conn)
        with contextlib.suppress(KeyError, ValueError):
            self.sel.unregister(conn.sock)
        conn.sock.close()
        if isinstance(conn.waiting, CrossReserve):
            self.finish_cross(conn.waiting, None)
        elif conn.waiting is not None:  # the DISCONNECT below ends it in the shard
            self.pending.pop(conn.waiting, None)
            self.inflight.pop(conn.waiting, None)
            conn.waiting = None
        for shard in conn.shards:
            self.request(shard, wire.DISCONNECT, conn, [], None)
        self.request(self.shard_of(conn.use), wire.REF, conn, [conn.use, -1, 0], None)
        for tube in conn.watch:
            self.request(self.shard_of(tube), wire.REF, conn, [tube, 0, -1], None)

    # ----------------------------------------------------------------- routing
    def shard_of(self, tube: str) -> int:
        shard = self.tube_shards.get(tube)
        if shard is None:
            if len(self.tube_shards) >= MAX_CACHED_TUBES:
                self.tube_shards.clear()
            shard = self.tube_shards[tube] = tube_shard(tube, self.shard_count)
        return shard

    def take_id(self, shard: int) -> int | None:
        """The next id of the shard's block (leasing the next block ahead when half of this
        one is used), or None while a block has to be leased first."""
        job_id = self.next_id.get(shard, 0)
        end = self.end_id.get(shard, 0)
        if job_id >= end:
            spare = self.spare.get(shard)
            if not spare:
                self.lease(shard)
                return None
            ids = spare.pop(0)
            job_id, end = ids.start, ids.stop
            self.end_id[shard] = end
        self.next_id[shard] = job_id + 1
        if end - job_id < ID_BLOCK // 2:
            self.lease(shard)
        return job_id

    def alloc_id(self, shard: int, then: Callable[[int], None]) -> None:
        """Hand out the next id of the shard's block, leasing blocks from the coordinator."""
        job_id = self.take_id(shard)
        if job_id is None:
            self.lease_waiters.setdefault(shard, []).append(lambda: self.alloc_id(shard, then))
        else:
            then(job_id)

    def lease(self, shard: int) -> None:
        """Ask for one more block unless SPARE_BLOCKS are held or asked for already: one turn
        under load can take more than a block's worth of puts, and a put that has to wait
        for a lease waits a whole round trip to the coordinator."""
        asked = self.leasing.get(shard, 0)
        if asked + len(self.spare.get(shard, ())) >= SPARE_BLOCKS:
            return
        self.leasing[shard] = asked + 1
        rid = self.request(COORDINATOR, wire.LEASE, None, [shard], None)
        self.pending[rid] = (None, lambda _c, p: self.on_lease(shard, p[0]))

    def on_lease(self, shard: int, block: int) -> None:
        self.leasing[shard] -= 1
        self.blocks[block] = shard
        self.spare.setdefault(shard, []).append(block_ids(block))  # blocks come in order
        for resume in self.lease_waiters.pop(shard, []):
            resume()

    def job_shard(self, job_id: int) -> int | None:
        return self.blocks.get(id_block(job_id))

    # ----------------------------------------------------------------- commands
    def dispatch(self, conn: Conn, cmd: c.Command) -> None:
        key = cmd.stat if isinstance(cmd, c.ErrorReply) else STAT_KEYS.get(type(cmd))
        if key is not None:
            self.stats[key] += 1
        handler = HANDLERS.get(type(cmd))
        if handler is None:
            self.reply(conn, cmd.reply if isinstance(cmd, c.ErrorReply) else proto.INTERNAL_ERROR)
        else:
            handler(self, conn, cmd)

    def forward(
        self, conn: Conn, target: int | None, op: int, args: list[Any], done: Done | None = None
    ) -> None:
        """Send a command to the process that owns its data; reply with what it answers."""
        if target is None:
            self.reply(conn, proto.NOT_FOUND)
            return
        self.call(conn, target, op, args, done or self.reply_first)

    def reply_first(self, conn: Conn, payload: list[Any]) -> None:
        """Most answers: the reply bytes the shard formatted."""
        self.reply(conn, payload[0])

    def by_id(
        self, conn: Conn, op: int, job_id: int, args: list[Any], done: Done | None = None
    ) -> None:
        self.forward(conn, self.job_shard(job_id), op, [job_id, *args], done)

    def do_put(self, conn: Conn, cmd: c.Put) -> None:
        if cmd.error == proto.JOB_TOO_BIG:
            self.reply(conn, cmd.error)
            return
        conn.producer = True
        shard = self.shard_of(conn.use)
        job_id = self.take_id(shard)
        if job_id is not None:
            self.put_with_id(conn, cmd, shard, job_id)
            return
        conn.busy = True  # until the id is there (a block has to be leased first)

        def with_id(job_id: int) -> None:
            conn.busy = False
            self.put_with_id(conn, cmd, shard, job_id)

        self.alloc_id(shard, with_id)

    def put_with_id(self, conn: Conn, cmd: c.Put, shard: int, job_id: int) -> None:
        """The id is spent whatever happens next, as in beanstalkd."""
        if cmd.error is not None:
            self.reply(conn, cmd.error)
        elif self.draining:
            self.reply(conn, proto.DRAINING)
        elif not conn.closed:
            args = [job_id, self.put_stamp(), conn.use, cmd.pri, cmd.delay, cmd.ttr, cmd.body]
            self.call(conn, shard, wire.PUT, args, self.reply_first)

    def put_stamp(self) -> int:
        """A strictly increasing put-order stamp (wall-clock ns: it orders across restarts)."""
        self.last_stamp = max(time.time_ns(), self.last_stamp + 1)
        return self.last_stamp

    def forget(self, job_id: int) -> Done:
        def done(conn: Conn, payload: list[Any]) -> None:
            conn.reserved.pop(job_id, None)
            self.reply(conn, payload[0])

        return done

    def on_reserved(self, conn: Conn, payload: list[Any]) -> None:
        conn.waiting = None
        if payload[0] == RESERVED:
            conn.reserved[payload[2]] = payload[3]
        self.reply(conn, payload[1])

    def do_reserve_job(self, conn: Conn, cmd: c.ReserveJob) -> None:
        shard = self.job_shard(cmd.id)
        if shard is not None:
            conn.shards.add(shard)
        self.by_id(conn, wire.RESERVE_JOB, cmd.id, [], self.on_reserved_job)

    def on_reserved_job(self, conn: Conn, payload: list[Any]) -> None:
        if payload[0] == RESERVED:
            conn.worker = True  # beanstalkd counts a worker only when reserve-job succeeds
        self.on_reserved(conn, payload)

    def on_touched(self, job_id: int) -> Done:
        def done(conn: Conn, payload: list[Any]) -> None:
            if payload[1]:
                conn.reserved[job_id] = payload[1]
            self.reply(conn, payload[0])

        return done

    def quit(self, conn: Conn) -> None:
        """`quit` has no reply; whatever the client pipelined after it is dropped."""
        self.finish(conn)

    def do_reserve(self, conn: Conn, timeout: int | None) -> None:
        conn.worker = True
        now = time.monotonic_ns()
        soon_at = conn.soon_at(now)
        timeout_at = None if timeout is None else now + timeout * NS
        by_shard: dict[int, list[str]] = {}
        for tube in conn.watch:
            by_shard.setdefault(self.shard_of(tube), []).append(tube)
        conn.busy = True
        conn.shards.update(by_shard)
        if len(by_shard) == 1:
            ((shard, tubes),) = by_shard.items()
            args = [tubes, timeout_at, soon_at, False]
            if shard == self.hosted_index and not self.outq.get(shard):
                self.reserve_hosted(conn, args, now)
                return
            conn.waiting = self.request(shard, wire.RESERVE, conn, args, self.on_reserved)
            return
        cross = CrossReserve(conn)
        cross.expire_at, cross.reply = timeout_at, proto.TIMED_OUT
        if soon_at is not None and (timeout_at is None or soon_at <= timeout_at):
            cross.expire_at, cross.reply = soon_at, proto.DEADLINE_SOON
        conn.waiting = cross
        for shard, tubes in by_shard.items():
            rid = self.request(shard, wire.RESERVE, conn, [tubes, None, None, True], None)
            cross.rids[rid] = shard
            cross.tubes[rid] = tubes
            cross.live.add(rid)
            self.cross[rid] = cross

    def reserve_hosted(self, conn: Conn, args: list[Any], now: int) -> None:
        """A reserve on the hosted shard, at once: answered now, or a waiter the engine
        answers later (take_events in run_hosted) under this rid."""
        assert self.hosted is not None
        rid = self.next_rid
        self.next_rid += 1
        reply = self.hosted.core.handle(LOCAL, [wire.RESERVE, rid, conn.id, *args], now)
        if reply is None:
            self.pending[rid] = (conn, self.on_reserved)
            conn.waiting = rid
        else:
            self.on_reserved(conn, reply[1:])

    def on_cross(self, rid: int, cross: CrossReserve, payload: list[Any]) -> None:
        kind = payload[0]
        if kind in (CANCELLED, OFFER):
            cross.live.discard(rid)
        if kind == OFFER:
            if cross.done:
                self.request(cross.rids[rid], wire.DECLINE, cross.conn, [payload[2]], None)
            else:
                cross.offers.append([rid, *payload])
        if kind in (OFFER, WAITING):
            cross.answered.add(rid)
        if not cross.done and len(cross.answered) == len(cross.rids):
            self.settle_cross(cross)
        if rid not in cross.live:
            self.inflight.pop(rid, None)
        if cross.done and not cross.live:
            for r in cross.rids:
                self.cross.pop(r, None)

    def settle_cross(self, cross: CrossReserve) -> None:
        """Every shard has answered once: take the best offer, or decide to wait or stop."""
        if cross.offers:
            best = min(cross.offers, key=lambda o: (o[5], o[6]))
            cross.offers.remove(best)
            self.request(cross.rids[best[0]], wire.ACCEPT, cross.conn, [best[3]], None)
            cross.conn.reserved[best[3]] = time.monotonic_ns() + best[4]  # TTR starts on accept
            self.finish_cross(cross, best[2])
            return
        now = time.monotonic_ns()
        if cross.expire_at is not None and now >= cross.expire_at:
            self.finish_cross(cross, cross.reply)
        elif cross.expire_at is not None:
            heapq.heappush(self.timers, (cross.expire_at, id(cross), cross))

    def finish_cross(self, cross: CrossReserve, reply: bytes | None) -> None:
        cross.done = True
        for offer in cross.offers:  # collected, never settled: each goes back to its place
            self.request(cross.rids[offer[0]], wire.DECLINE, cross.conn, [offer[3]], None)
        cross.offers.clear()
        for rid in cross.live:
            if rid in self.cross:
                self.cancel(cross.rids[rid], rid, cross.conn)
        if not cross.live:
            for r in cross.rids:
                self.cross.pop(r, None)
        conn = cross.conn
        if conn.waiting is cross:
            conn.waiting = None
        if reply is not None and not conn.closed:
            self.reply(conn, reply)

    def run_timers(self, now: int) -> None:
        while self.timers and self.timers[0][0] <= now:
            _, _, cross = heapq.heappop(self.timers)
            if not cross.done:
                self.finish_cross(cross, cross.reply)

    def do_use(self, conn: Conn, cmd: c.Use) -> None:
        old, conn.use = conn.use, cmd.tube
        if old == cmd.tube:
            self.reply(conn, proto.using(cmd.tube))
            return
        self.request(self.shard_of(old), wire.REF, conn, [old, -1, 0], None)
        self.forward(
            conn,
            self.shard_of(cmd.tube),
            wire.REF,
            [cmd.tube, 1, 0],
            lambda k, p: self.reply(k, proto.using(cmd.tube)),
        )

    def do_watch(self, conn: Conn, cmd: c.Watch) -> None:
        if cmd.tube in conn.watch:
            self.reply(conn, proto.watching(len(conn.watch)))
            return
        conn.watch.append(cmd.tube)
        done: Done = lambda k, p: self.reply(k, proto.watching(len(k.watch)))  # noqa: E731
        self.forward(conn, self.shard_of(cmd.tube), wire.REF, [cmd.tube, 0, 1], done)

    def do_ignore(self, conn: Conn, cmd: c.Ignore) -> None:
        if cmd.tube not in conn.watch:
            self.reply(conn, proto.watching(len(conn.watch)))
            return
        if len(conn.watch) == 1:
            self.reply(conn, proto.NOT_IGNORED)
            return
        i = conn.watch.index(cmd.tube)
        conn.watch[i] = conn.watch[-1]  # swap-remove, as beanstalkd's watch set does
        conn.watch.pop()
        done: Done = lambda k, p: self.reply(k, proto.watching(len(k.watch)))  # noqa: E731
        self.forward(conn, self.shard_of(cmd.tube), wire.REF, [cmd.tube, 0, -1], done)

    def do_stats(self, conn: Conn, cmd: c.Stats) -> None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        utime, stime = usage.ru_utime, usage.ru_stime
        if self.hosted is not None:
            utime = stime = 0.0  # the hosted shard's COUNTS already report this process
        fields = {
            **self.stats,
            "max-job-size": self.max_job_size,
            "current-connections": len(self.conns),
            "current-producers": sum(k.producer for k in self.conns.values()),
            "current-workers": sum(k.worker for k in self.conns.values()),
            "current-waiting": sum(k.waiting is not None for k in self.conns.values()),
            "total-connections": self.total_connections,
            "draining": self.draining,
            "rusage-utime": utime,
            "rusage-stime": stime,
        }
        self.forward(conn, COORDINATOR, wire.STATS, [fields])

    # ----------------------------------------------------------------- loop
    def turn(self) -> None:
        timeout = lifeline.CHECK_EVERY_S
        if self.timers:
            timeout = min(timeout, max(0.0, (self.timers[0][0] - time.monotonic_ns()) / NS))
        if self.retry_soon:
            timeout = min(timeout, RETRY_S)
        if self.hosted is not None:
            wake = self.hosted.core.next_wakeup()
            if wake is not None:
                timeout = min(timeout, max(0.0, (wake - time.monotonic_ns()) / NS))
            if self.outq.get(self.hosted_index):
                timeout = 0  # a connection closed last turn: its jobs go back at once
        # zmq fds fire on a change, not on a state: what an earlier call took in is only seen
        # by asking the socket, so ask before sleeping.
        for s in list(self.touched):
            if s.getsockopt(ZMQ_EVENTS) & POLLIN:
                timeout = 0
            else:
                self.touched.discard(s)  # its fd fires when anything arrives
        events = None
        if timeout and self.worked and len(self.conns) <= SPIN_MAX_CONNS:
            events = self.poll_briefly()
        if not events:
            events = self.sel.select(timeout)
        self.worked = bool(events)
        if self.hosted is not None:
            self.hosted.core.engine.tick(time.monotonic_ns())  # timers before new commands
        for key, mask in events:
            data = key.data
            if data is None:
                self.accept()
            elif type(data) is Conn:
                if mask & selectors.EVENT_WRITE:
                    self.write(data)
                if mask & selectors.EVENT_READ and not data.closed:
                    self.read(data)
            else:
                self.touched.add(data)  # a ZeroMQ socket
        self.drain_zmq()
        self.run_timers(time.monotonic_ns())
        if self.hosted is not None:
            self.run_hosted(self.hosted)
        self.flush_requests()
        self.flush_output()

    def poll_briefly(self) -> list[tuple[selectors.SelectorKey, int]]:
        """Poll without sleeping for up to SPIN_S after a turn that did work. A client that
        waits for each answer sends its next command within tens of µs; catching it awake
        is cheaper than sleeping in epoll and being woken. Only with few connections: with
        many there is nearly always input, and the other core belongs to the clients."""
        until = time.monotonic() + SPIN_S
        while True:
            events = self.sel.select(0)
            if events or time.monotonic() >= until:
                return events

    def run_hosted(self, server: ShardServer) -> None:
        """Apply the requests for the hosted shard, and whatever their answers lead to, until
        nothing is left; commit its log; only then may this turn's replies go out. Replies
        and engine events reach on_replies in the order they happened (see
        ShardCore.handle_into), events of commands applied directly (call) included."""
        core, index, out = server.core, self.hosted_index, self.hosted_out
        now = time.monotonic_ns()  # turn() ran the timers before reading the clients
        if server.sock in self.touched and server.sock.getsockopt(ZMQ_EVENTS) & POLLIN:
            server.take_messages(now, out)  # the coordinator, another acceptor
        handle_into = core.handle_into
        while True:
            if core.engine.events:
                core.route_events(out)  # from direct runs, before anything queued after them
            batch = self.outq.get(index)
            if batch:
                self.outq[index] = []
                for req in batch:
                    handle_into(LOCAL, req, now, out)
            else:
                core.take_events(now, out)
            local = out.pop(LOCAL, None)
            if local:
                self.on_replies(local)  # may run more commands for the hosted shard
            elif not batch:
                break
            now = time.monotonic_ns()
        core.commit()
        if out:
            server.send_replies(out)
            out.clear()
            self.touched.add(server.sock)

    def drain_zmq(self) -> None:
        if not self.touched:
            return
        hosted = self.hosted.sock if self.hosted is not None else None
        for s in list(self.touched):
            target = self.monitor_target.get(s)
            if target is not None:
                while s.getsockopt(ZMQ_EVENTS) & POLLIN:
                    self.on_monitor(target, recv_monitor_message(s)["event"])
            elif s is not hosted:
                while s.getsockopt(ZMQ_EVENTS) & POLLIN:
                    self.on_replies(wire.unpack(s.recv()))

    def serve_forever(self) -> None:
        while True:
            lifeline.check()
            self.turn()


#: shard ops answered at once and in order: a connection may pipeline them
PIPELINED = frozenset(
    {
        wire.PUT,
        wire.DELETE,
        wire.RELEASE,
        wire.BURY,
        wire.TOUCH,
        wire.PEEK,
        wire.KICK_JOB,
        wire.STATS_JOB,
        wire.PEEK_READY,
        wire.PEEK_DELAYED,
        wire.PEEK_BURIED,
        wire.KICK,
        wire.STATS_TUBE,
        wire.PAUSE_TUBE,
    }
)
BY_ID = (c.Delete, c.Release, c.Bury, c.Touch, c.Peek, c.KickJob, c.StatsJob)
BY_USED_TUBE = (c.PeekReady, c.PeekDelayed, c.PeekBuried, c.Kick)

HANDLERS: dict[type, Callable[[Acceptor, Conn, Any], None]] = {
    c.Put: Acceptor.do_put,
    c.Reserve: lambda a, k, cmd: a.do_reserve(k, None),
    c.ReserveWithTimeout: lambda a, k, cmd: a.do_reserve(k, cmd.timeout),
    c.ReserveJob: Acceptor.do_reserve_job,
    c.Delete: lambda a, k, cmd: a.by_id(k, wire.DELETE, cmd.id, [], a.forget(cmd.id)),
    c.Release: lambda a, k, cmd: a.by_id(
        k, wire.RELEASE, cmd.id, [cmd.pri, cmd.delay], a.forget(cmd.id)
    ),
    c.Bury: lambda a, k, cmd: a.by_id(k, wire.BURY, cmd.id, [cmd.pri], a.forget(cmd.id)),
    c.Touch: lambda a, k, cmd: a.by_id(k, wire.TOUCH, cmd.id, [], a.on_touched(cmd.id)),
    c.Peek: lambda a, k, cmd: a.by_id(k, wire.PEEK, cmd.id, []),
    c.KickJob: lambda a, k, cmd: a.by_id(k, wire.KICK_JOB, cmd.id, []),
    c.StatsJob: lambda a, k, cmd: a.by_id(k, wire.STATS_JOB, cmd.id, []),
    c.PeekReady: lambda a, k, cmd: a.forward(k, a.shard_of(k.use), wire.PEEK_READY, [k.use]),
    c.PeekDelayed: lambda a, k, cmd: a.forward(k, a.shard_of(k.use), wire.PEEK_DELAYED, [k.use]),
    c.PeekBuried: lambda a, k, cmd: a.forward(k, a.shard_of(k.use), wire.PEEK_BURIED, [k.use]),
    c.Kick: lambda a, k, cmd: a.forward(k, a.shard_of(k.use), wire.KICK, [k.use, cmd.bound]),
    c.StatsTube: lambda a, k, cmd: a.forward(k, a.shard_of(cmd.tube), wire.STATS_TUBE, [cmd.tube]),
    c.PauseTube: lambda a, k, cmd: a.forward(
        k, a.shard_of(cmd.tube), wire.PAUSE_TUBE, [cmd.tube, cmd.delay]
    ),
    c.Use: Acceptor.do_use,
    c.Watch: Acceptor.do_watch,
    c.Ignore: Acceptor.do_ignore,
    c.Stats: Acceptor.do_stats,
    c.ListTubes: lambda a, k, cmd: a.forward(k, COORDINATOR, wire.LIST_TUBES, []),
    c.ListTubeUsed: lambda a, k, cmd: a.reply(k, proto.using(k.use)),
    c.ListTubesWatched: lambda a, k, cmd: a.reply(k, proto.yaml_list(k.watch)),
    c.Quit: lambda a, k, cmd: a.quit(k),
}


def main(
    listen_fd: int,
    run_dir: str,
    shards: int,
    max_job_size: int,
    ready_fd: int,
    draining: bool,
    hosted: ShardCore | None = None,
) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    acceptor = Acceptor(listen_fd, run_dir, shards, max_job_size, hosted)
    acceptor.draining = draining
    acceptor.ready_fd = ready_fd

    def drain(*_: Any) -> None:
        acceptor.draining = True

    signal.signal(signal.SIGUSR1, drain)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})  # blocked by the supervisor
    try:
        acceptor.serve_forever()
    finally:
        for s in acceptor.socks.values():
            s.close(0)
        acceptor.listener.close()
        if acceptor.hosted is not None:
            acceptor.hosted.sock.close(0)
            acceptor.hosted.core.close()
