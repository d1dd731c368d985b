"""A shard: one Engine with its write-ahead log and event log.

`ShardCore` is the shard without a socket: it applies requests (wire.py's shapes) to the
engine, remembers which peer waits for which reserve, commits the log once per turn and
knows when it next has to wake up. Two shells drive it: `ShardServer` (server.py), the
Router loop of a shard process, and the serving process, which can host a shard in
its own process so that commands for that shard's tubes take no hop (serving/process.py).
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from shardq.cluster import wire
from shardq.cluster.wire import Request
from shardq.engine.engine import Engine
from shardq.engine.policy import Policies
from shardq.engine.records import RECORD_OVERHEAD
from shardq.engine.timing import Timing
from shardq.processes.common import live, outofmemory, quota
from shardq.processes.common.heads import HeadTable
from shardq.processes.common.quota import JOB_OVERHEAD_BYTES
from shardq.processes.shard import ops
from shardq.processes.shard.closing import Closing
from shardq.processes.shard.direct import LOCAL_PEER, Direct
from shardq.processes.shard.holding import Answered, Holding, Outbox
from shardq.processes.shard.logfault import LogFault
from shardq.processes.shard.optable import OPS, Payload
from shardq.processes.shard.settling import Settling
from shardq.storage.events import EventLog
from shardq.storage.wal import Wal

log = logging.getLogger(__name__)


class ShardCore(Direct, Holding):
    """The engine of one shard with its logs; knows which peer waits for which reserve."""

    def __init__(
        self,
        index: int,
        owns_default: bool,
        events: EventLog | None = None,
        wal: Wal | None = None,
        settle_from: set[int] | None = None,
        metrics: bool = False,
        policies: Policies | None = None,
    ) -> None:
        """`settle_from`: a restarted shard's serving processes that may still hold jobs of
        it (see processes/shard/settling.py); None or empty for a first start. `metrics`: keep the
        histograms of the metrics endpoint (engine/timing.py). `policies`: the per-tube
        policies (engine/policy.py), before the log is replayed."""
        self.index = index
        self.engine = Engine(owns_default=owns_default)
        if policies:
            self.engine.set_policies(policies)
        self.event_log = events
        if events is not None:
            self.engine.audit = []
        self.wal = wal
        self.log_fault: LogFault | None = None  #: the log cannot be written (logfault.py)
        if wal is not None:
            self.recover(wal)
        self.waiting_peer: dict[int, bytes] = {}  # rid of a waiting reserve -> peer identity
        #: the hosting serving process's part of `stats`, added to COUNTS (None: not hosted)
        self.host_fields: Callable[[], dict[str, Any]] | None = None
        #: limits.max_jobs / max_memory across the server (None: neither is set)
        self.quota = quota.inherited
        self.settle_quota()  # what this shard holds now: recovered, or nothing
        self.settling: Settling | None = None
        #: its tubes' best ready jobs, published for the serving processes (several shards)
        self.heads: HeadTable | None = None
        self.closing = Closing()  # closes whose tubes are held (processes/shard/closing.py)
        if settle_from:
            self.settling = Settling(settle_from, time.monotonic_ns())
        if metrics:
            self.enable_timing()

    def enable_timing(self) -> None:
        """`metrics.listen` is set: keep the wait, run and fsync histograms (METRICS op)."""
        timing = self.engine.timing = Timing()
        if self.wal is not None:
            self.wal.sync = timing.timed_sync(self.wal.sync, time.monotonic_ns)
            timing.extra = self.wal.figures

    def take_live(self, settings: live.Live) -> None:
        """SIGHUP: the per-tube policies may have changed; every tube resolves its own again
        (a raised limit serves waiting reserves at once: their answers are engine events)."""
        policies = Policies(settings.tubes)
        if policies.plain != self.engine.policies.plain:
            self.engine.set_policies(policies, time.monotonic_ns())
            log.info("shard %d: tube policies now %s", self.index, policies.plain or "none")

    def settle_quota(self) -> None:
        """Tell the server-wide quota what this shard's engine holds (`quota.Quota.settle`)."""
        if self.quota is not None:
            engine = self.engine
            jobs = len(engine.jobs)
            held = engine.live_bytes + jobs * (JOB_OVERHEAD_BYTES - RECORD_OVERHEAD)
            self.quota.settle(self.index, jobs, held)

    def recover(self, wal: Wal) -> None:
        """Rebuild the engine from the log before serving anything, then log from here on."""
        started = time.monotonic()
        self.engine.wall_offset = time.time_ns() - time.monotonic_ns()
        self.engine.restore(wal.replay(), time.monotonic_ns())
        self.engine.wal_out = []
        try:
            wal.start()
        except OSError as e:  # a full or failing disk: serve what was replayed, refuse puts
            fault = LogFault(self, e, starting=True)
            self.log_fault = None if fault.over else fault
        self.engine.log_stats = wal.stats()
        gc.freeze()  # the recovered jobs hold no cycles: no collection needs to walk them
        took = time.monotonic() - started
        log.info("shard %d: recovered %d jobs in %.2f s", self.index, len(self.engine.jobs), took)

    def handle(self, peer: bytes, req: Request, now: int) -> Answered | None:
        """Apply one request; its reply (rid, payload), or None (none, or later)."""
        try:
            payload = self.apply(peer, req, now)
        except Exception as e:  # one bad request must not take the shard down
            payload = self.failed(req.op, req.rid, e)
        return None if payload is None else (req.rid, payload)

    def handle_into(self, peer: bytes, req: Request | wire.Unread, now: int, out: Outbox) -> None:
        """Apply one request and put its reply, and the events it caused, into `out` in the
        order they happened. The order matters: a put that serves an offer-mode waiter and
        a CANCEL of that waiter in the same batch must reach the serving process as OFFER, then
        CANCELLED, or the serving process would think no offer could follow and strand the job.
        A request that could not be decoded for want of memory is answered OUT_OF_MEMORY."""
        if isinstance(req, wire.Unread):
            op = req.op if req.op in OPS else ops.PUT  # a put's body is what ran memory out
            reply: Answered | None = (req.rid, self.failed(op, req.rid, MemoryError()))
        else:
            reply = self.handle(peer, req, now)
        if reply is not None:
            try:
                out.setdefault(peer, []).append(reply)
            except MemoryError:  # applied: its reply must not be lost; the reserve given
                outofmemory.note(f"shard {self.index}: a reply")  # back makes room for it
                out.setdefault(peer, []).append(reply)
        if self.engine.events:
            self.route_events(out)

    def run(self, op: int, conn: int, args: Sequence[Any], now: int) -> Payload:
        """A plain request/reply op from the hosting serving process: its payload, with no rid or
        peer to carry (the serving process's direct path, see ServingProcess.call)."""
        try:
            payload = OPS[op].apply(self, LOCAL_PEER, 0, conn, args, now)
        except Exception as e:  # one bad request must not take the shard down
            return self.failed(op, 0, e)
        assert payload is not None, op  # only ops with a reply come this way
        return payload

    def apply(self, peer: bytes, req: Request, now: int) -> Payload | None:
        """Dispatch through the op's declaration (ops.py); an op that hands out a job
        waits while the shard settles or while a close holds the tube it would take from."""
        op = OPS[req.op]
        if op.held is not None and self.holds(peer, req):
            return None  # answered when settled, or when the tube opens (UNHOLD)
        return op.apply(self, peer, req.rid, req.conn, req.args, now)

    def log_turn(self, wal: Wal) -> None:
        """The log's part of the group commit (`Direct.commit`): this turn's records
        written and synced, or, while the log cannot be written, its next try."""
        if self.log_fault is not None:
            if self.engine.wal_out:
                self.engine.wal_out.clear()  # the snapshot that ends the fault holds it
            self.log_fault.retry(time.monotonic())
            return
        try:
            self.write_log(wal)
        except (OSError, MemoryError) as e:
            if isinstance(e, MemoryError):  # the reserve given back: room to answer
                outofmemory.note(f"shard {self.index}: its log")
            fault = LogFault(self, e)  # tries a fresh segment at once
            self.log_fault = None if fault.over else fault  # else puts are refused

    def publish_heads(self) -> None:
        """While a serving process reads them: the best ready job of each tube that changed
        this turn (of each tube, when they were not published before), and when the next
        timer is due, for the serving processes' reserves. While none does, nothing: the
        table says it is not valid (readers ask), and the engine notes no changes."""
        heads, engine = self.heads, self.engine
        assert heads is not None
        if not heads.wanted(time.monotonic_ns()):
            if heads.valid:
                heads.set_valid(False)  # before any reply of this turn leaves
                engine.heads_touched = None
            return
        fresh = not heads.valid  # wanted again (or for the first time): every tube
        touched = list(engine.tubes) if fresh else engine.heads_touched
        assert touched is not None
        if touched:
            heads.publish(touched, engine.ready_head)
        heads.set_due(engine.next_due())
        if fresh:
            heads.set_valid(True)  # only now that every tube is there
            engine.heads_touched = set()
        else:
            touched.clear()

    def publish_to(self, heads: HeadTable) -> None:
        """Publish this shard's heads in `heads` from now on, while they are read."""
        self.heads = heads
        self.engine.heads_touched = None
        self.publish_heads()

    def write_log(self, wal: Wal) -> None:
        """This turn's records in one write, synced as the policy says; compaction when due.
        OSError: the log cannot be written (see processes/shard/logfault.py)."""
        records = self.engine.wal_out
        if records:
            wal.append(records)
            records.clear()
            self.engine.log_stats = wal.stats()
        wal.maybe_sync(time.monotonic())  # at once with fsync 0; else when its time is due
        try:
            if wal.compacting is not None:
                if wal.poll_compaction() is False:
                    log.error("shard %d: compaction failed (no room?); tried again", self.index)
            elif wal.needs_compaction(self.engine.live_bytes):
                wal.start_compaction(self.engine.snapshot, len(self.engine.jobs))
        except (OSError, MemoryError) as e:
            log.error("shard %d: compaction failed: %s", self.index, e)

    def next_wakeup(self) -> int | None:
        """Monotonic ns of the next timer: the engine's, or the log's next sync."""
        wake = self.engine.next_wakeup()
        if self.settling is not None:
            wake = self.settling.until if wake is None else min(wake, self.settling.until)
        held = self.closing.next_until()
        if held is not None:
            wake = held if wake is None else min(wake, held)
        if self.log_fault is not None:
            left = max(0.0, self.log_fault.next_try - time.monotonic())
            at = time.monotonic_ns() + int(left * 1e9)
            wake = at if wake is None else min(wake, at)
        elif self.wal is not None:
            due = self.wal.sync_due(time.monotonic())
            if due is not None:
                sync_at = time.monotonic_ns() + max(0, int((due - time.monotonic()) * 1e9))
                wake = sync_at if wake is None else min(wake, sync_at)
        return wake

    def close(self) -> None:
        """Sync and close the logs (SIGTERM: what was written is synced before exit)."""
        if self.heads is not None:
            self.heads.set_valid(False)  # the serving processes ask until it is back
        if self.wal is not None:
            self.wal.close()
        if self.event_log is not None:
            self.event_log.close()
