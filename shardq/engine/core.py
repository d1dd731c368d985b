"""The state of one shard's engine and the steps every part of it shares.

`EngineCore` holds the tubes, jobs, waiters, timers and outputs of a shard, and the small
moves a job makes between a tube's queues and a connection's hands. The concerns built on
it are mixins of their own modules (timers.py, reserve.py, persist.py, policing.py,
throttling.py, fanout.py, stats.py, refs.py), put together by `Engine` (engine.py); a
mixin calls another's methods only through the declarations at the end of this class.
The commands of the serving path's fast path (put, delete, reserve) are here, not in their
mixins: compiled, they are then C calls from the serving process and from one another.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from heapq import heappush
from typing import TYPE_CHECKING, Any

from shardq.engine.holders import Holders
from shardq.engine.job import (
    ID_MASK,
    LOW_MASK,
    NS,
    RESERVE,
    ST_BURIED,
    ST_DELAYED,
    ST_OFFERED,
    ST_READY,
    ST_RESERVED,
    TRANSITIONS,
    URGENT_KEY,
    Job,
    new_job,
)
from shardq.engine.jobtable import JobTable
from shardq.engine.kinds import (
    FRESH_NS,
    RESERVED,
    T_AGE,
    TIMERS_MIN_BOUND,
)
from shardq.engine.names import FAMILY_MARK, family_of
from shardq.engine.packed import low, pack
from shardq.engine.policy import Policies
from shardq.engine.records import DELETE, RECORD_OVERHEAD, DeleteRecord, Record, new
from shardq.engine.timing import Timing
from shardq.engine.tube import Tube, Waiter
from shardq.protocol.replies import (
    DELETED,
    NOT_FOUND,
    job_reply,
    job_reply_into,
)

if TYPE_CHECKING:
    from shardq.engine.policy import Policy

if TYPE_CHECKING or __file__.endswith(".py"):  # the pure build: no-op decorators
    from shardq.nocython import cython
else:  # compiled: Cython reads the decorators (and imports nothing at run time)
    import cython


#: a job's bytes in the log beyond its body (compiled: a C integer, core.pxd)
OVERHEAD = RECORD_OVERHEAD


def reserved_fields(job_id: int, body: bytes, deadline: int) -> list[Any]:
    """What a reserve answers when it reserved a job: the fields of `reserve.Reserved`."""
    return [RESERVED, job_reply(b"RESERVED", job_id, body), job_id, deadline]


def _by_order(tube: Tube) -> tuple[int, int]:
    return tube.order


class EngineCore:
    """The state of an engine: all tubes, jobs, waiters and timers of one shard."""

    def __init__(self, owns_default: bool = True) -> None:
        self.tubes: dict[str, Tube] = {}
        self.jobs = JobTable()  #: id -> job
        self.owned = Holders()  #: who holds which job (reserved or offered)
        self.waiters: dict[int, Waiter] = {}  # rid -> waiter
        self.timers: list[tuple[int, int, int, Any]] = []
        self._timers_bound = TIMERS_MIN_BOUND  # compact the heap when it grows past this
        #: (when it joins the heap, when it is due, job id): the TTR timers of the latest
        #: reserves, oldest first from `fresh_head` on (timers.py, `_promote_fresh`)
        self.fresh: list[tuple[int, int, int]] = []
        self.fresh_head = 0
        self._fresh_bound = TIMERS_MIN_BOUND  # swept of dead timers when it grows past this
        self.events: list[tuple[int, list[Any]]] = []
        self.total_jobs = 0
        self.job_timeouts = 0
        self._stamp = 0
        self._created = 0
        #: job events for the analytics log, or None when nobody listens:
        #: (now, event, id, tube, pri, delay s, ttr s, body bytes)
        self.audit: list[tuple[int, str, int, str, int, int, int, int]] | None = None
        #: wait and run histograms for the metrics endpoint, or None when it is off
        self.timing: Timing | None = None
        #: records for the write-ahead log, or None when there is none (see records.py)
        self.wal_out: list[Record] | None = None
        self.wall_offset = 0  #: wall-clock ns minus monotonic ns, set by the shell each turn
        self.live_bytes = 0  #: about what the live jobs take in the log (for compaction)
        self.log_stats: dict[str, int] = {}  #: binlog-* stats, kept by the shell
        #: origin (serving process) -> tube -> [using, watching] of its connections
        self.origin_refs: dict[int, dict[str, list[int]]] = {}
        self.policies = Policies()  #: per-tube policies; each tube keeps its own (`Tube.policy`)
        self.policed = False  #: are there any (a plain bool: tested on hot paths)
        #: name -> `full_at` of the token bucket of a rate-limited tube that went away while
        #: not full: a tube made again under that name starts from it (throttling.py)
        self.buckets: dict[str, int] = {}
        #: family -> the names of its tubes other than the family's own (``orders+eu``)
        self.families: dict[str, set[str]] = {}
        #: this shard's index, shown by `stats-tube` when there are several; None: one shard
        self.shard_index: int | None = None
        #: where a fanout's copies get their ids (the shell's; fanout.py); None: no copies
        self.copy_id: Callable[[], int] | None = None
        #: the tubes whose ready jobs changed since the shell last published their heads
        #: (processes/common/heads.py); None when nobody reads them (one shard)
        self.heads_touched: set[str] | None = None
        if owns_default:
            self.ensure_tube("default", 0)

    # ----------------------------------------------------------------- tubes
    @cython.locals(tube=Tube)
    def ensure_tube(self, name: str, now: int) -> Tube:
        tube = self.tubes.get(name)
        if tube is None:
            self._created += 1
            tube = self.tubes[name] = Tube(name, order=(now, self._created))
            if FAMILY_MARK in name:
                self.families.setdefault(family_of(name), set()).add(name)
            if self.policies:
                tube.set_policy(self.policies.resolve(name))
                if self.buckets and tube.throttle is not None:
                    self._restore_bucket(tube, now)
        return tube

    @cython.locals(tube=Tube)
    def _gc(self, tube: Tube) -> None:
        """Drop a tube nothing refers to; the newest tube takes its list position (swap-remove)."""
        if tube.in_use():
            return
        del self.tubes[tube.name]
        if FAMILY_MARK in tube.name:
            family = family_of(tube.name)
            members = self.families[family]
            members.discard(tube.name)
            if not members:
                del self.families[family]
        if tube.throttle is not None and tube.throttle.full_at:
            self._keep_bucket(tube)
        if self.tubes:
            last = max(self.tubes.values(), key=_by_order)
            if last.order > tube.order:
                last.order = tube.order

    def due(self, now: int) -> bool:
        """Is a timer due at `now`, or a fresh one to join the heap? (What `tick` checks
        first: the hot callers ask this, a C call, before paying for `tick`'s.)"""
        timers = self.timers
        if timers and timers[0][0] <= now:
            return True
        return self.fresh_head < len(self.fresh) and self.fresh[self.fresh_head][0] <= now

    @cython.locals(job=Job, tube=Tube, size=cython.Py_ssize_t)
    def _remove(self, job: Job, tube: Tube, now: int, job_id: int | None = None) -> None:
        """Forget a job that is out of its tube's queues already (delete; discard_old and
        max_age in policing.py), and log that it is gone. `job_id`: its id, if at hand."""
        if job_id is None:
            job_id = job.key & ID_MASK
        self.jobs.pop(job_id)
        size = len(job.body)
        self.live_bytes -= size + OVERHEAD
        tube.body_bytes -= size
        if self.audit is not None or self.timing is not None:  # (_note: a call saved)
            self._note(now, "delete", job)
        if self.wal_out is not None:
            self.wal_out.append(new(DeleteRecord, (DELETE, job_id)))

    # ----------------------------------------------------------------- moving jobs
    @cython.locals(job=Job, tube=Tube)
    def _enqueue(self, job: Job, now: int) -> None:
        """Make a job ready and hand it to a waiter of its tube if there is one."""
        tube = self.tubes[job.tube]
        tube.add_ready(job)
        if self.heads_touched is not None:
            self.heads_touched.add(tube.name)
        if tube.waiters and not tube.closed(now):
            self._serve_tube(tube, now)

    def _at(self, when: int, kind: int, key: Any) -> None:
        """A timer (timers.py) due `when`: a TTR, a delay, a pause, a wait, an age, a token."""
        self._stamp += 1
        heappush(self.timers, (when, self._stamp, kind, key))
        if len(self.timers) > self._timers_bound:
            self._compact_timers()

    def _unlink_delayed(self, job: Job) -> None:
        self.tubes[job.tube].delayed.remove(job.delayed_key)

    @cython.locals(job=Job, tube=Tube)
    def _unlink(self, job: Job) -> None:
        """Take a job out of whatever its tube holds it in (not reserved bookkeeping)."""
        tube = self.tubes[job.tube]
        if job.state == ST_READY:
            tube.remove_ready(job)
            if self.heads_touched is not None:
                self.heads_touched.add(tube.name)
        elif job.state == ST_DELAYED:
            self._unlink_delayed(job)
        elif job.state == ST_BURIED:
            del tube.buried[job.id]

    @cython.locals(job=Job, tube=Tube)
    def _unreserve(self, job: Job, job_id: int | None = None, owner: int | None = None) -> None:
        """Forget who holds a reserved or offered job (the job stays where it is).
        `job_id`, `owner`: its id and its holder, if at hand."""
        tube = self.tubes[job.tube]
        if job.state == ST_RESERVED:
            tube.reserved -= 1
        else:
            tube.offered -= 1
            if job.key < URGENT_KEY:
                tube.urgent -= 1
        hold = job.hold
        if owner is None:
            owner = hold >> 128  # job.owner, without the property's call
        self.owned.disown(owner, job.key & ID_MASK if job_id is None else job_id)
        job.hold = hold & LOW_MASK  # no owner

    @cython.locals(job=Job, tube=Tube, ns=cython.longlong, deadline=cython.longlong)
    def _reserve(self, job: Job, conn: int, now: int, op: str = "reserve") -> tuple[int, int]:
        """Reserve the job for `conn`; its id and TTR deadline (which the hot paths would
        otherwise unpack again)."""
        tube = self.tubes[job.tube]
        if job.state is ST_READY:  # the common case: _unlink's and the table's step inlined
            assert op == "reserve"  # (an accept comes from OFFERED)
            tube.remove_ready(job)
            if self.heads_touched is not None:
                self.heads_touched.add(tube.name)
            job.state = ST_RESERVED  # TRANSITIONS[(ST_READY, "reserve")]
        else:
            self._unlink(job)
            job.state = TRANSITIONS[(job.state, op)]  # job.move(op), without its call
        job.dur += RESERVE
        if self.audit is not None or self.timing is not None:  # (_note: a call saved)
            self._note(now, "reserve", job)
        ns = NS  # (compiled: the deadline's arithmetic in C)
        deadline = cython.cast(cython.longlong, now) + low(job.dur) * ns  # its ttr's
        job.hold = pack(conn, deadline, low(job.hold))  # job.held_by, inlined
        tube.reserved += 1
        if tube.throttle is not None and op == "reserve":  # an offer took its token already
            self._spend(tube, now)  # reserve_rate
        job_id = low(job.key)
        self.owned.own(conn, job_id)
        fresh = self.fresh  # its TTR timer (T_TTR), due just after the deadline: fresh first
        fresh.append((now + FRESH_NS, deadline + 1, job_id))
        if len(fresh) - self.fresh_head > self._fresh_bound:  # reserves outpacing FRESH_NS
            self._sweep_fresh()
        return job_id, deadline

    @cython.locals(job=Job, tube=Tube)
    def _best_job(self, tubes: Sequence[str], now: int) -> Job | None:
        if len(tubes) == 1:  # the common case, without the loop's comparisons
            tube = self.tubes.get(tubes[0])
            if tube is None or not tube.ready or tube.closed(now):
                return None
            return self.jobs.get(low(tube.ready[0]))
        best = None
        for name in tubes:
            tube = self.tubes.get(name)
            if tube is None or not tube.ready or tube.closed(now):
                continue
            head = tube.ready[0]
            if best is None or head < best:
                best = head
        return None if best is None else self.jobs.get(best & ID_MASK)

    # ------------------------------------------------- the fast path's commands
    # (here, not in their mixins, so that the serving path calls them as C functions)
    @cython.locals(job=Job, tube=Tube, size=cython.Py_ssize_t)
    def put(
        self,
        job_id: int,
        seq: int,
        tube_name: str,
        pri: int,
        delay: int,
        ttr: int,
        body: bytes,
        now: int,
    ) -> bool:
        """Take the job: True (INSERTED), or False when its tube's policy makes no room
        for it (OUT_OF_MEMORY, nothing taken)."""
        if self.jobs.get(job_id) is not None:  # resent after a restart, and in the log already
            return True
        tube = self.ensure_tube(tube_name, now)
        size = len(body)
        if tube.policy is not None and not self._make_room(tube, tube.policy, size, now):
            self._gc(tube)
            return False
        job = new_job(job_id, seq, tube_name, pri, delay, max(ttr, 1), body, now)
        self.jobs.add(job_id, job)
        tube.body_bytes += size
        if tube.policy is not None and tube.policy.max_age:
            self._at(now + tube.policy.max_age * NS, T_AGE, job_id)
        tube.total_jobs += 1
        self.total_jobs += 1
        self.live_bytes += size + OVERHEAD
        if self.audit is not None or self.timing is not None:  # (_note: a call saved)
            self._note(now, "put", job)
        if delay > 0:
            job.state = ST_DELAYED
            self._delay(job, delay * NS, now)
        else:
            self._enqueue(job, now)
        if self.wal_out is not None:
            self.wal_out.append(self.full_record(job))
        if tube.policy is not None and tube.policy.fanout:  # copies (fanout.py)
            for copy_id, name in self._copies(tube_name):
                # a member's policy may refuse one
                tube.fanned += self.put(copy_id, seq, name, pri, delay, ttr, body, now)
        return True

    @cython.locals(job=Job, tube=Tube)
    def delete(self, conn: int, job_id: int, now: int, resent: bool = False) -> bytes:
        """`resent`: the serving process resends a delete of a job the connection held to a shard
        that restarted; if the job is gone, the first try reached the log before the crash."""
        job = self.jobs.get(job_id)
        if job is None and resent:
            return DELETED
        if job is None or job.state == ST_OFFERED:
            return NOT_FOUND
        held = job.state == ST_RESERVED
        if held:
            if job.hold >> 128 != conn:  # job.owner
                return NOT_FOUND
            self._unreserve(job, job_id, conn)
        else:
            self._unlink(job)
        tube = self.tubes[job.tube]
        self._remove(job, tube, now, job_id)
        tube.cmd_delete += 1
        if held and tube.throttle is not None:
            self._freed(tube, now)  # max_reserved
        if not (tube.using or tube.watching):  # else in use (Tube.in_use): a call saved
            self._gc(tube)
        return DELETED

    @cython.locals(job=Job, tube=Tube)
    def _hand_over(self, job: Job, conn: int, offer: bool, now: int) -> list[Any]:
        """The job to `conn`: reserved (the fields of `Reserved`), or offered (`Offer`'s)."""
        if not offer:
            job_id, deadline = self._reserve(job, conn, now)
            return reserved_fields(job_id, job.body, deadline)
        return self._offer(job, conn, now)  # reserve.py: the cross-shard path

    @cython.locals(job=Job)
    def reserve(
        self,
        conn: int,
        rid: int,
        tubes: tuple[str, ...],
        now: int,
        timeout_at: int | None,
        soon_at: int | None,
        offer: bool = False,
        out: bytearray | None = None,
    ) -> tuple[int, int] | list[Any] | None:
        """Answer a reserve now, or register it as a waiter and answer None. `soon_at`: when
        the connection's soonest reserved job enters the safety margin (the serving process
        knows every shard's reservations of the connection). An offer-mode reserve answers
        WAITING instead of waiting silently, and leaves its deadlines to the serving process.
        With `out` (the fast path's output; not in offer mode) a job reserved has its
        RESERVED reply written onto `out` and the answer is its id and TTR deadline."""
        if self.due(now):
            self.tick(now)  # a pause that just ended serves the waiters that came first
        job = self._best_job(tubes, now)
        if job is None:
            return self._no_job(conn, rid, tubes, now, timeout_at, soon_at, offer)
        if out is None:
            return self._hand_over(job, conn, offer, now)
        held = self._reserve(job, conn, now)
        job_reply_into(out, b"RESERVED", held[0], job.body)
        return held

    if TYPE_CHECKING:  # provided by the mixins Engine is made of

        def _compact_timers(self) -> None: ...  # timers.py
        def _sweep_fresh(self) -> None: ...  # timers.py
        def tick(self, now: int) -> None: ...  # timers.py
        def _serve_tube(self, tube: Tube, now: int) -> None: ...  # reserve.py
        def _serve_tubes(self, tubes: list[Tube], now: int) -> None: ...  # reserve.py
        def _persist(self, job: Job) -> None: ...  # persist.py
        def full_record(self, job: Job) -> Record: ...  # persist.py
        def set_policies(self, policies: Policies, now: int | None = None) -> None: ...  # refs.py
        def _drop_waiter(self, waiter: Waiter) -> None: ...  # reserve.py
        def _no_job(
            self,
            conn: int,
            rid: int,
            tubes: tuple[str, ...],
            now: int,
            timeout_at: int | None,
            soon_at: int | None,
            offer: bool,
        ) -> list[Any] | None: ...  # reserve.py
        def _offer(self, job: Job, conn: int, now: int) -> list[Any]: ...  # reserve.py
        def _delay(self, job: Job, delay: int, now: int) -> None: ...  # timers.py
        def _copies(self, name: str) -> list[tuple[int, str]]: ...  # fanout.py
        def _note(self, now: int, event: str, job: Job, delay: int | None = ...) -> None: ...
        def _make_room(self, tube: Tube, policy: Policy, size: int, now: int) -> bool: ...
        # policing.py
        def _bury_instead(self, job: Job, now: int, timed_out: bool = False) -> bool: ...
        def _age_out(self, job_id: int, now: int) -> None: ...
        # throttling.py
        def _spend(self, tube: Tube, now: int) -> None: ...
        def _give_back(self, job: Job, now: int) -> None: ...
        def _freed(self, tube: Tube, now: int) -> None: ...
        def _token_due(self, name: str, when: int, opened: list[Tube]) -> None: ...
        def _keep_bucket(self, tube: Tube) -> None: ...
        def _restore_bucket(self, tube: Tube, now: int) -> None: ...
