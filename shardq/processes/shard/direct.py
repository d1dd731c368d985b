"""The hosting serving process's direct calls into its shard: the fast path's put, delete
and reserve (serving/home.py), and the hosted half of a reserve over two shards
(serving/cross.py, `reserve_against_home`): an offer of the hosted shard's best job, then
its acceptance or its return. Each is what `ShardCore.apply` does for its op, without a
request to unpack, and answers a failure as the op's reply would."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from shardq.cluster.wire import Request
from shardq.engine.core import EngineCore
from shardq.processes.common import outofmemory
from shardq.processes.common.quota import job_bytes
from shardq.processes.shard import ops
from shardq.processes.shard.closing import Closing
from shardq.processes.shard.holding import Answered
from shardq.processes.shard.ops import ReserveArgs
from shardq.processes.shard.optable import OPS, Payload
from shardq.protocol import proto
from shardq.protocol.replies import put_reply

if TYPE_CHECKING:
    from shardq.engine.engine import Engine
    from shardq.processes.common.heads import HeadTable
    from shardq.processes.common.quota import Quota
    from shardq.processes.shard.holding import Outbox
    from shardq.processes.shard.logfault import LogFault
    from shardq.processes.shard.settling import Settling
    from shardq.storage.events import EventLog
    from shardq.storage.wal import Wal

if TYPE_CHECKING or __file__.endswith(".py"):  # the pure build: no-op decorators
    from shardq.nocython import cython
else:  # compiled: Cython reads the decorators (and imports nothing at run time)
    import cython

log = logging.getLogger("shardq.processes.shard.core")

LOCAL_PEER = b""  #: the peer identity of the hosting serving process's own requests


class Direct:
    """ShardCore's direct calls, and the state they read (ShardCore's first base; compiled,
    a C struct, direct.pxd: the fast path calls these as C functions, and their reads of
    the shard's state are a struct's)."""

    index: int
    engine: Engine
    wal: Wal | None
    quota: Quota | None
    log_fault: LogFault | None
    settling: Settling | None
    closing: Closing
    waiting_peer: dict[int, bytes]
    heads: HeadTable | None  #: its tubes' best ready jobs, published (several shards)
    event_log: EventLog | None

    # What ShardCore provides. Compiled, a C class's body defines these stubs whatever the
    # `if` says, so they may only name methods of ShardCore itself (first in its MRO).
    if TYPE_CHECKING:

        def handle(self, peer: bytes, req: Request, now: int) -> Answered | None: ...

        def handle_into(self, peer: bytes, req: Request, now: int, out: Outbox) -> None: ...

        def publish_heads(self) -> None: ...

        def settle_quota(self) -> None: ...

        def log_turn(self, wal: Wal) -> None: ...

    # ------------------------------------------------------------------ every turn
    # (here, not in ShardCore: compiled, the common case of each is a few C tests)

    @cython.locals(engine=EngineCore, closing=Closing)
    def take_events(self, now: int, out: Outbox) -> None:
        """Run the timers; what the engine answered on its own goes into `out`."""
        if self.settling is not None and self.settling.done(now):
            self.release_held(now, out)
        closing = self.closing
        if closing.holds or closing.lifted:
            self.end_holds(now, out)
        engine = self.engine
        if engine.due(now):
            engine.tick(now)
        if engine.events:
            self.route_events(out)

    def end_holds(self, now: int, out: Outbox) -> None:
        """Holds past their time end; the requests deferred by ended holds run again."""
        for peer, req in self.closing.runnable(self.engine, now):
            self.handle_into(peer, req, now, out)

    def release_held(self, now: int, out: Outbox) -> None:
        """Settled: the held requests run now, in the order they came."""
        settling, self.settling = self.settling, None
        assert settling is not None
        log.info("shard %d: settled; %d held reserve(s) run now", self.index, len(settling.held))
        for peer, req in settling.held.take():
            self.handle_into(peer, req, now, out)

    @cython.locals(engine=EngineCore)
    def route_events(self, out: Outbox) -> None:
        """What the engine answered on its own so far, to the peers that wait for it."""
        engine = self.engine
        events = engine.events
        waiting_peer = self.waiting_peer
        for rid, payload in events:
            peer = waiting_peer.pop(rid, None)
            if peer is not None:
                out.setdefault(peer, []).append((rid, payload))
        events.clear()

    @cython.locals(engine=EngineCore)
    def commit(self) -> None:
        """Group commit, before any reply of the turn leaves: this turn's log records in one
        write, synced as the policy says; the turn's job events to the event log; the room
        the turn's deletes freed given back to the quota; the heads of the tubes whose
        ready jobs changed, published (processes/common/heads.py)."""
        if self.heads is not None:
            self.publish_heads()
        if self.quota is not None:
            self.settle_quota()
        wal = self.wal
        if wal is not None:
            self.log_turn(wal)
        event_log = self.event_log
        if event_log is not None:
            engine = self.engine
            if engine.audit:
                event_log.write(engine.audit, time.time_ns() - time.monotonic_ns())
                engine.audit.clear()

    # ------------------------------------------------------------------ the fast path

    @cython.locals(engine=EngineCore)
    def admit(self, tube: str, body_len: int) -> bool:
        """May a put of `body_len` bytes into `tube` be taken, with the copies its tube's
        fanout makes (engine/fanout.py)? There must be room to log them all (`Wal.admit`)
        and room under limits.max_jobs and max_memory (`quota.Quota.admit`); False: it is
        answered OUT_OF_MEMORY."""
        wal = self.wal
        if wal is None and self.quota is None:
            return True  # nothing to fill: no log, no limits
        engine = self.engine
        jobs = 1 + engine.copies(tube) if engine.families else 1
        if wal is not None:
            if self.log_fault is not None:
                return False
            for _ in range(jobs):  # a loop, not all() of a generator: no closure a put
                if not wal.admit(body_len):
                    return False
        return self.quota is None or self.quota.admit(self.index, job_bytes(body_len), jobs)

    @cython.locals(engine=EngineCore)  # (compiled: the engine's calls are C calls)
    def put_local(
        self,
        job_id: int,
        seq: int,
        tube: str,
        pri: int,
        delay: int,
        ttr: int,
        body: bytes,
        now: int,
    ) -> bytes:
        """A put from the hosting serving process's fast path (serving/home.py): the
        client's reply. As `run` does for PUT, without a request to unpack. (Not written
        onto the output here: the caller is past the put before it writes, so that a reply
        that cannot be written out of memory never leaves the put to be made again.)"""
        if not self.admit(tube, len(body)):
            return proto.OUT_OF_MEMORY
        engine = self.engine
        try:
            return put_reply(job_id, engine.put(job_id, seq, tube, pri, delay, ttr, body, now))
        except Exception as e:  # one bad request must not take the shard down
            return self.failure(ops.PUT, 0, e)

    @cython.locals(engine=EngineCore)
    def delete_local(self, conn: int, job_id: int, now: int) -> bytes:
        """A delete from the hosting serving process's fast path: the client's reply."""
        engine = self.engine
        try:
            return engine.delete(conn, job_id, now)
        except Exception as e:  # one bad request must not take the shard down
            return self.failure(ops.DELETE, 0, e)

    @cython.locals(engine=EngineCore)
    def reserve_local(
        self,
        conn: int,
        rid: int,
        tubes: tuple[str, ...],
        now: int,
        timeout_at: int | None,
        soon_at: int | None,
        out: bytearray | None = None,
    ) -> Payload | tuple[int, int] | None:
        """A reserve from the hosting serving process (serving/home.py, cross.py): its
        payload now, or None when it waits (answered later as an event under `rid`). As
        `apply` does for RESERVE, without a request to unpack. With `out` (the fast path's
        output) a job reserved may have its reply written there, and then the answer is
        its id and TTR deadline (`EngineCore.reserve`)."""
        if self.settling is not None or self.closing.holds:
            args = ReserveArgs(list(tubes), timeout_at, soon_at, False)
            reply = self.handle(LOCAL_PEER, Request(ops.RESERVE, rid, conn, args), now)
            if reply is None:
                return None
            _rid, held = reply
            return held
        engine = self.engine
        try:
            payload = engine.reserve(conn, rid, tubes, now, timeout_at, soon_at, False, out)
        except Exception as e:  # one bad request must not take the shard down
            return self.failed(ops.RESERVE, rid, e)
        if payload is None:
            self.waiting_peer[rid] = LOCAL_PEER
        return payload

    def failure(self, op: int, rid: int, error: Exception) -> bytes:
        """The client's reply to a request that raised: INTERNAL_ERROR, or OUT_OF_MEMORY
        when memory ran out (what beanstalkd answers then)."""
        if isinstance(error, MemoryError):
            outofmemory.note(f"shard {self.index}: a request, answered OUT_OF_MEMORY")
            return proto.OUT_OF_MEMORY
        log.error("shard %d: %r failed", self.index, (op, rid), exc_info=error)
        return proto.INTERNAL_ERROR

    def failed(self, op: int, rid: int, error: Exception) -> Payload:
        """The payload for a request that raised, in the op's reply shape (`Op.fail`)."""
        return OPS[op].fail(self.failure(op, rid, error))

    def offer_local(self, conn: int, tubes: tuple[str, ...], now: int) -> list[Any] | None:
        """The hosted half of a reserve over two shards: the best ready job of these tubes,
        offered to `conn` (engine.Offer's fields), or None — none ready, or the shard
        settles or holds tubes (the reserve then takes the offer protocol, which waits)."""
        if self.settling is not None or self.closing.holds:
            return None
        try:
            return self.engine.offer_best(conn, tubes, now)
        except Exception as e:  # one bad request must not take the shard down
            self.failure(ops.RESERVE, 0, e)
            return None

    def settle_local(self, conn: int, job_id: int, take: bool, now: int) -> None:
        """The offer of `offer_local` taken (`take`: reserved by `conn`, its TTR from now)
        or given back to its place, as ACCEPT and DECLINE do."""
        try:
            if take:
                self.engine.accept(conn, job_id, now)
            else:
                self.engine.decline(conn, job_id, now)
        except Exception as e:  # one bad request must not take the shard down
            self.failure(ops.ACCEPT if take else ops.DECLINE, 0, e)
