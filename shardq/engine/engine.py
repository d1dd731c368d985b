"""The job engine of one shard: a pure state machine over the tubes that shard owns.

Every method takes `now` (monotonic nanoseconds) instead of reading a clock, and
answers with the reply bytes the client will see. Things that happen later — a
waiting reserve being served, timing out, a job offered to a cross-shard reserver —
are appended to `self.events` as (rid, payload) pairs for the process shell to send.

Connections are identified by integers the acceptor hands out; `rid` identifies
one reserve request. The engine never trusts a connection to own a job: it checks.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from itertools import islice
from typing import Any

from shardq.engine.job import (
    BURY,
    ID_MASK,
    KICK,
    NS,
    RELEASE,
    STATE_NAMES,
    TIMEOUT,
    URGENT_KEY,
    Job,
    State,
)
from shardq.engine.tube import Tube, Waiter
from shardq.protocol import proto

RECORD_OVERHEAD = 100  #: log bytes of a job beyond its body, roughly
SAFETY_MARGIN = NS  #: DEADLINE_SOON fires this long before a reserved job's TTR runs out

# Kinds of reserve outcome, sent to the acceptor with the reply bytes.
RESERVED, OFFER, WAITING, FINAL, CANCELLED = 1, 2, 3, 4, 5

# Timer kinds in the engine's heap; every entry is re-checked when it fires.
_T_DELAY, _T_TTR, _T_PAUSE, _T_WAIT = 1, 2, 3, 4
TIMERS_MIN_BOUND = 4096  #: the timer heap is never compacted below this size


def reserved_payload(job: Job) -> list[Any]:
    """What a reserve answers: kind, reply bytes, id, TTR deadline."""
    return [RESERVED, proto.job_reply(b"RESERVED", job.id, job.body), job.id, job.deadline]


class Engine:
    """All tubes and jobs of one shard."""

    def __init__(self, owns_default: bool = True) -> None:
        self.tubes: dict[str, Tube] = {}
        self.jobs: dict[int, Job] = {}
        self.owned: dict[int, set[int]] = {}  # conn -> ids of jobs it has reserved or been offered
        self.waiters: dict[int, Waiter] = {}  # rid -> waiter
        self.timers: list[tuple[int, int, int, Any]] = []
        self._timers_bound = TIMERS_MIN_BOUND  # compact the heap when it grows past this
        self.events: list[tuple[int, list[Any]]] = []
        self.total_jobs = 0
        self.job_timeouts = 0
        self._stamp = 0
        self._created = 0
        #: job events for the analytics log, or None when nobody listens:
        #: (now, event, id, tube, pri, delay s, ttr s, body bytes)
        self.audit: list[tuple[int, str, int, str, int, int, int, int]] | None = None
        #: records for the write-ahead log, or None when there is none (see wal.py)
        self.wal_out: list[list[Any]] | None = None
        self.wall_offset = 0  #: wall-clock ns minus monotonic ns, set by the shell each turn
        self.live_bytes = 0  #: about what the live jobs take in the log (for compaction)
        self.log_stats: dict[str, int] = {}  #: binlog-* stats, kept by the shell
        if owns_default:
            self.ensure_tube("default", 0)

    # ----------------------------------------------------------------- tubes
    def ensure_tube(self, name: str, now: int) -> Tube:
        tube = self.tubes.get(name)
        if tube is None:
            self._created += 1
            tube = self.tubes[name] = Tube(name, order=(now, self._created))
        return tube

    def _gc(self, tube: Tube) -> None:
        """Drop a tube nothing refers to; the newest tube takes its list position (swap-remove)."""
        if tube.in_use():
            return
        del self.tubes[tube.name]
        if self.tubes:
            last = max(self.tubes.values(), key=lambda t: t.order)
            if last.order > tube.order:
                last.order = tube.order

    def ref(self, name: str, using: int, watching: int, now: int) -> None:
        """A connection started or stopped using or watching a tube."""
        tube = self.ensure_tube(name, now)
        tube.using += using
        tube.watching += watching
        self._gc(tube)

    def list_tubes(self) -> list[tuple[tuple[int, int], str]]:
        return [(t.order, t.name) for t in self.tubes.values()]

    # ----------------------------------------------------------------- timers
    def _at(self, when: int, kind: int, key: Any) -> None:
        self._stamp += 1
        heapq.heappush(self.timers, (when, self._stamp, kind, key))
        if len(self.timers) > self._timers_bound:
            self._compact_timers()

    def _compact_timers(self) -> None:
        """Drop the timers that can no longer do anything. A timer is not removed when its
        reason goes (a reserved job deleted, a delayed job kicked): it is checked when it
        fires. Under steady load that would keep one dead entry per reserve for a whole
        TTR; rebuilding when the heap doubles keeps it within twice the live timers, at an
        amortised O(1) per timer."""
        self.timers = [t for t in self.timers if self._timer_live(t[0], t[2], t[3])]
        heapq.heapify(self.timers)
        self._timers_bound = max(TIMERS_MIN_BOUND, 2 * len(self.timers))

    def _timer_live(self, when: int, kind: int, key: Any) -> bool:
        if kind == _T_PAUSE:
            return True  # few, and cheap to keep
        if kind == _T_WAIT:
            waiter = self.waiters.get(key)
            return waiter is not None and waiter.expire_at == when
        return self._timed_job(kind, key, when) is not None

    def _timed_job(self, kind: int, job_id: int, when: int) -> Job | None:
        """The job a delay or TTR timer firing at `when` is still for, or None."""
        job = self.jobs.get(job_id)
        if job is None:
            return None
        if kind == _T_DELAY:
            return job if job.state == State.DELAYED and job.deadline == when else None
        return job if job.state == State.RESERVED and job.deadline + 1 == when else None

    def next_wakeup(self) -> int | None:
        return self.timers[0][0] if self.timers else None

    def tick(self, now: int) -> None:
        """Run every timer that is due: delays end, TTRs run out, pauses end, waits expire."""
        unpaused: list[Tube] = []
        while self.timers and self.timers[0][0] <= now:
            when, _, kind, key = heapq.heappop(self.timers)
            if kind == _T_DELAY:
                self._promote(key, when, now)
            elif kind == _T_TTR:
                self._expire(key, when, now)
            elif kind == _T_PAUSE:
                self._unpause(key, when, unpaused)
            else:
                self._wait_expired(key, when)
        if unpaused:
            self._serve_tubes(unpaused, now)

    def _promote(self, job_id: int, when: int, now: int) -> None:
        job = self._timed_job(_T_DELAY, job_id, when)
        if job is not None:
            self._unlink_delayed(job)
            job.move("promote")
            self._enqueue(job, now)

    def _expire(self, job_id: int, when: int, now: int) -> None:
        job = self._timed_job(_T_TTR, job_id, when)
        if job is not None:
            self._unreserve(job)
            job.counts += TIMEOUT
            self.job_timeouts += 1
            self._note(now, "timeout", job)
            job.move("timeout")
            self._enqueue(job, now)

    def _unpause(self, name: str, when: int, unpaused: list[Tube]) -> None:
        tube = self.tubes.get(name)
        if tube is not None and tube.pause and tube.unpause_at == when:
            tube.pause = 0
            tube.unpause_at = 0
            unpaused.append(tube)

    def _wait_expired(self, rid: int, when: int) -> None:
        waiter = self.waiters.get(rid)
        if waiter is not None and waiter.expire_at == when:
            self._drop_waiter(waiter)
            self.events.append((rid, [FINAL, waiter.expire_reply]))

    def _note(self, now: int, event: str, job: Job) -> None:
        if self.audit is not None:
            self.audit.append(
                (now, event, job.id, job.tube, job.pri, job.delay, job.ttr, len(job.body))
            )

    # ----------------------------------------------------------------- persistence
    def _wall(self, mono: int) -> int:
        return mono + self.wall_offset if mono else 0

    def _persist(self, job: Job) -> None:
        """Log a job's new state (release, bury, kick) for the write-ahead log."""
        if self.wal_out is not None:
            self.wal_out.append(
                ["S", job.id, int(job.state), job.pri, job.delay * NS, self._wall(job.deadline)]
                + job.counters()
            )

    def full_record(self, job: Job) -> list[Any]:
        """Everything a restart needs to rebuild the job; a reserved job comes back ready."""
        state = job.state if job.state in (State.DELAYED, State.BURIED) else State.READY
        deadline = self._wall(job.deadline) if state == State.DELAYED else 0
        key = job.key
        return [
            "J", job.id, key >> 64 & ID_MASK, job.tube, key >> 128, job.delay * NS, job.ttr * NS,
            self._wall(job.created), int(state), deadline, *job.counters(), job.body,
        ]  # fmt: skip

    def snapshot(self) -> list[list[Any]]:
        """Full records of every live job, buried ones in their bury order (for compaction)."""
        buried = [j for t in self.tubes.values() for j in t.buried]
        order = [j for j in self.jobs if self.jobs[j].state != State.BURIED] + buried
        return [self.full_record(self.jobs[j]) for j in order]

    def restore(self, records: Iterable[list[Any]], now: int) -> None:
        """Rebuild the jobs from write-ahead log records, oldest first (last record wins)."""
        rebuilt: dict[int, Job] = {}
        for rec in records:
            kind = rec[0]
            if kind == "J":
                job = Job(
                    rec[1],
                    rec[2],
                    rec[3],
                    rec[4],
                    rec[5] // NS,  # the log keeps durations in ns
                    rec[6] // NS,
                    rec[15],
                    rec[7] - self.wall_offset,
                )
                rebuilt.pop(rec[1], None)  # a re-logged job moves to the end (bury order)
                rebuilt[rec[1]] = job
                self._restore_state(job, rec[8], rec[9], rec[10:15])
            elif kind == "S" and rec[1] in rebuilt:
                job = rebuilt.pop(rec[1])
                rebuilt[rec[1]] = job
                job.pri, job.delay = rec[3], rec[4] // NS
                self._restore_state(job, rec[2], rec[5], rec[6:11])
            elif kind == "D":
                rebuilt.pop(rec[1], None)
        for job in rebuilt.values():
            self._place(job, now)

    def _restore_state(self, job: Job, state: int, deadline_wall: int, counts: list[int]) -> None:
        job.state = State(state) if state in (State.DELAYED, State.BURIED) else State.READY
        job.deadline = deadline_wall - self.wall_offset if deadline_wall else 0
        job.set_counters(counts)

    def _place(self, job: Job, now: int) -> None:
        tube = self.ensure_tube(job.tube, now)
        self.jobs[job.id] = job
        tube.total_jobs += 1
        self.total_jobs += 1
        self.live_bytes += len(job.body) + RECORD_OVERHEAD
        if job.state == State.BURIED:
            tube.buried[job.id] = None
        elif job.state == State.DELAYED and job.deadline > now:
            tube.delayed.add(job.delayed_key)
            self._at(job.deadline, _T_DELAY, job.id)
        else:
            job.state = State.READY
            tube.add_ready(job)

    # ----------------------------------------------------------------- moving jobs
    def _enqueue(self, job: Job, now: int) -> None:
        """Make a job ready and hand it to a waiter of its tube if there is one."""
        tube = self.tubes[job.tube]
        tube.add_ready(job)
        if tube.waiters and not tube.paused(now):
            self._serve_tube(tube, now)

    def _delay(self, job: Job, delay: int, now: int) -> None:
        job.deadline = now + delay
        self.tubes[job.tube].delayed.add(job.delayed_key)
        self._at(job.deadline, _T_DELAY, job.id)

    def _unlink_delayed(self, job: Job) -> None:
        self.tubes[job.tube].delayed.remove(job.delayed_key)

    def _unlink(self, job: Job) -> None:
        """Take a job out of whatever its tube holds it in (not reserved bookkeeping)."""
        tube = self.tubes[job.tube]
        if job.state == State.READY:
            tube.remove_ready(job)
        elif job.state == State.DELAYED:
            self._unlink_delayed(job)
        elif job.state == State.BURIED:
            del tube.buried[job.id]

    def _reserve(self, job: Job, conn: int, now: int, op: str = "reserve") -> None:
        self._unlink(job)
        job.move(op)
        job.owner = conn
        job.counts += 1  # reserves
        self._note(now, "reserve", job)
        job.deadline = now + (job.dur & ID_MASK) * NS  # ttr
        self.tubes[job.tube].reserved += 1
        self.owned.setdefault(conn, set()).add(job.id)
        self._at(job.deadline + 1, _T_TTR, job.id)

    def _unreserve(self, job: Job) -> None:
        """Forget who holds a reserved or offered job (the job stays where it is)."""
        tube = self.tubes[job.tube]
        if job.state == State.RESERVED:
            tube.reserved -= 1
        else:
            tube.offered -= 1
            if job.key < URGENT_KEY:
                tube.urgent -= 1
        held = self.owned.get(job.owner)
        if held is not None:
            held.discard(job.id)
            if not held:
                del self.owned[job.owner]
        job.owner = 0

    def _owned_by(self, job_id: int, conn: int) -> Job | None:
        job = self.jobs.get(job_id)
        if job is None or job.state != State.RESERVED or job.owner != conn:
            return None
        return job

    # ----------------------------------------------------------------- reserve and waiters
    def _best_job(self, tubes: Iterable[str], now: int) -> Job | None:
        best = None
        for name in tubes:
            tube = self.tubes.get(name)
            if tube is None or not tube.ready or tube.paused(now):
                continue
            head = tube.ready[0]
            if best is None or head < best:
                best = head
        return None if best is None else self.jobs[best & ID_MASK]

    def _serve_tube(self, tube: Tube, now: int) -> None:
        """Hand the tube's best ready jobs to its oldest waiters, while both exist."""
        self._serve_tubes([tube], now)

    def _serve_tubes(self, tubes: list[Tube], now: int) -> None:
        """While some of these tubes have both waiters and ready jobs, give the best job of
        them all to the oldest waiter of its tube (beanstalkd's process_queue)."""
        while True:
            live = [t for t in tubes if t.ready and t.waiters and not t.paused(now)]
            if not live:
                return
            tube = min(live, key=lambda t: t.ready[0])
            waiter = tube.oldest_waiter()
            self._drop_waiter(waiter)
            job = self.jobs[tube.ready[0] & ID_MASK]
            self.events.append((waiter.rid, self._hand_over(job, waiter.conn, waiter.offer, now)))

    def _hand_over(self, job: Job, conn: int, offer: bool, now: int) -> list[Any]:
        if not offer:
            self._reserve(job, conn, now)
            return reserved_payload(job)
        self._unlink(job)
        job.move("offer")
        job.owner = conn
        tube = self.tubes[job.tube]
        tube.offered += 1
        key = job.key
        if key < URGENT_KEY:
            tube.urgent += 1  # an offered job is still ready as far as stats go
        self.owned.setdefault(conn, set()).add(job.id)
        return [
            OFFER,
            proto.job_reply(b"RESERVED", job.id, job.body),
            job.id,
            job.ttr * NS,
            key >> 128,  # pri
            key >> 64 & ID_MASK,  # seq
            conn,  # whoever receives an offer it cannot place declines it for this conn
        ]

    def _drop_waiter(self, waiter: Waiter) -> None:
        del self.waiters[waiter.rid]
        for name in waiter.tubes:
            tube = self.tubes.get(name)
            if tube is not None:
                tube.waiters.pop(waiter.rid, None)

    def reserve(
        self,
        conn: int,
        rid: int,
        tubes: tuple[str, ...],
        now: int,
        timeout_at: int | None,
        soon_at: int | None,
        offer: bool = False,
    ) -> list[Any] | None:
        """Answer a reserve now, or register it as a waiter and answer None.

        `soon_at` is when the connection's soonest reserved job enters the safety margin
        (the acceptor knows every shard's reservations of the connection, so it computes it).
        An offer-mode reserve answers WAITING instead of waiting silently, and leaves its
        deadlines to the acceptor.
        """
        self.tick(now)  # a pause that just ended serves the waiters that came first
        job = self._best_job(tubes, now)
        if job is not None:
            return self._hand_over(job, conn, offer, now)
        if soon_at is not None and now >= soon_at:
            return [FINAL, proto.DEADLINE_SOON]
        if timeout_at is not None and now >= timeout_at:
            return [FINAL, proto.TIMED_OUT]
        expire_at, reply = timeout_at, proto.TIMED_OUT
        if soon_at is not None and (expire_at is None or soon_at <= expire_at):
            expire_at, reply = soon_at, proto.DEADLINE_SOON
        if offer:
            expire_at = None
        waiter = Waiter(conn, rid, tubes, offer, expire_at, reply)
        self.waiters[rid] = waiter
        for name in tubes:
            self.ensure_tube(name, now).waiters[rid] = waiter
        if expire_at is not None:
            self._at(expire_at, _T_WAIT, rid)
        return [WAITING] if offer else None

    def cancel(self, rid: int) -> bool:
        """Withdraw a waiting reserve (the acceptor timed it out or was served elsewhere).
        False when there was no such waiter: it was served already, and its answer (an
        event) is on its way or still in `events`."""
        waiter = self.waiters.get(rid)
        if waiter is None:
            return False
        self._drop_waiter(waiter)
        return True

    def accept(self, conn: int, job_id: int, now: int) -> None:
        """The cross-shard reserver took the offered job: it is now reserved by it."""
        job = self.jobs.get(job_id)
        if job is None or job.state != State.OFFERED or job.owner != conn:
            return
        self._unreserve(job)
        self._reserve(job, conn, now, "accept")

    def decline(self, conn: int, job_id: int, now: int) -> None:
        """The reserver was gone or served elsewhere: the job goes back to its place."""
        job = self.jobs.get(job_id)
        if job is None or job.state != State.OFFERED or job.owner != conn:
            return
        self._unreserve(job)
        job.move("decline")
        self._enqueue(job, now)

    def reserve_job(self, conn: int, job_id: int, now: int) -> list[Any]:
        job = self.jobs.get(job_id)
        if job is None or not job.can("reserve"):
            return [FINAL, proto.NOT_FOUND]
        self._reserve(job, conn, now)
        return reserved_payload(job)

    def disconnect(self, conn: int, now: int) -> None:
        """A connection closed: its waiters go away and its jobs are ready again at once."""
        for waiter in [w for w in self.waiters.values() if w.conn == conn]:
            self._drop_waiter(waiter)
        for job_id in sorted(self.owned.get(conn, ())):
            job = self.jobs[job_id]
            if job.state == State.OFFERED:
                self.decline(conn, job_id, now)
            else:
                self._unreserve(job)
                job.move("release")
                self._enqueue(job, now)

    def reassert(self, conn: int, job_id: int, deadline: int, now: int) -> None:
        """After this shard restarted from its log, a live connection still holds this job:
        reserve it for that connection again, with its old TTR deadline (no new reserve)."""
        job = self.jobs.get(job_id)
        if job is None or job.state != State.READY:
            return
        self._unlink(job)
        job.state = State.RESERVED
        job.owner = conn
        job.deadline = deadline
        self.tubes[job.tube].reserved += 1
        self.owned.setdefault(conn, set()).add(job.id)
        self._at(deadline + 1, _T_TTR, job.id)

    def forget_connections(self, now: int) -> None:
        """The acceptor restarted: its connections are gone; free their jobs and tubes."""
        for conn in list(self.owned) + [w.conn for w in self.waiters.values()]:
            self.disconnect(conn, now)
        for tube in list(self.tubes.values()):
            tube.using = tube.watching = 0
            self._gc(tube)

    # ----------------------------------------------------------------- commands
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
    ) -> bytes:
        if job_id in self.jobs:  # a put resent after a restart that had already reached the log
            return b"INSERTED %d\r\n" % job_id
        tube = self.ensure_tube(tube_name, now)
        job = Job(job_id, seq, tube_name, pri, delay, max(ttr, 1), body, now)
        self.jobs[job_id] = job
        tube.total_jobs += 1
        self.total_jobs += 1
        self.live_bytes += len(body) + RECORD_OVERHEAD
        self._note(now, "put", job)
        if delay > 0:
            job.state = State.DELAYED
            self._delay(job, delay * NS, now)
        else:
            self._enqueue(job, now)
        if self.wal_out is not None:
            self.wal_out.append(self.full_record(job))
        return b"INSERTED %d\r\n" % job_id

    def delete(self, conn: int, job_id: int, now: int, resent: bool = False) -> bytes:
        """`resent`: the acceptor resends a delete of a job the connection held to a shard that
        restarted; if the job is gone, the first try reached the log before the crash."""
        job = self.jobs.get(job_id)
        if job is None and resent:
            return proto.DELETED
        if job is None or job.state == State.OFFERED:
            return proto.NOT_FOUND
        if job.state == State.RESERVED:
            if job.owner != conn:
                return proto.NOT_FOUND
            self._unreserve(job)
        else:
            self._unlink(job)
        del self.jobs[job_id]
        self.live_bytes -= len(job.body) + RECORD_OVERHEAD
        self._note(now, "delete", job)
        if self.wal_out is not None:
            self.wal_out.append(["D", job_id])
        tube = self.tubes[job.tube]
        tube.cmd_delete += 1
        self._gc(tube)
        return proto.DELETED

    def release(self, conn: int, job_id: int, pri: int, delay: int, now: int) -> bytes:
        job = self._owned_by(job_id, conn)
        if job is None:
            return proto.NOT_FOUND
        self._unreserve(job)
        job.pri = pri
        job.counts += RELEASE
        job.delay = delay
        self._note(now, "release", job)  # the event carries the release's own delay
        if delay > 0:
            job.move("release-delayed")
            self._delay(job, delay * NS, now)
        else:
            job.move("release")
            self._persist(job)  # before _enqueue: a waiter may take it at once
            self._enqueue(job, now)
            return proto.RELEASED
        self._persist(job)
        return proto.RELEASED

    def bury(self, conn: int, job_id: int, pri: int, now: int, resent: bool = False) -> bytes:
        if resent and job_id in self.jobs and self.jobs[job_id].state == State.BURIED:
            return proto.BURIED  # the first try reached the log before the shard restarted
        job = self._owned_by(job_id, conn)
        if job is None:
            return proto.NOT_FOUND
        self._unreserve(job)
        job.pri = pri
        job.counts += BURY
        self._note(now, "bury", job)
        job.move("bury")
        self.tubes[job.tube].buried[job.id] = None
        self._persist(job)
        return proto.BURIED

    def touch(self, conn: int, job_id: int, now: int) -> list[Any]:
        """Answer TOUCHED with the new deadline, so the acceptor can track DEADLINE_SOON."""
        job = self._owned_by(job_id, conn)
        if job is None:
            return [proto.NOT_FOUND, 0]
        job.deadline = now + job.ttr * NS
        self._at(job.deadline + 1, _T_TTR, job.id)
        self._note(now, "touch", job)
        return [proto.TOUCHED, job.deadline]

    def _kick_one(self, job: Job, now: int) -> None:
        self._unlink(job)
        job.counts += KICK
        self._note(now, "kick", job)
        job.move("kick")
        self._persist(job)
        self._enqueue(job, now)

    def kick(self, tube_name: str, bound: int, now: int) -> bytes:
        tube = self.tubes.get(tube_name)
        if tube is None:
            return b"KICKED 0\r\n"
        if tube.buried:
            ids = list(islice(tube.buried, bound))
        else:
            ids = [key & ID_MASK for key in tube.delayed.islice(0, bound)]
        for job_id in ids:
            self._kick_one(self.jobs[job_id], now)
        return b"KICKED %d\r\n" % len(ids)

    def kick_job(self, job_id: int, now: int) -> bytes:
        job = self.jobs.get(job_id)
        if job is None or not job.can("kick"):
            return proto.NOT_FOUND
        self._kick_one(job, now)
        return proto.KICKED

    def peek(self, job_id: int) -> bytes:
        job = self.jobs.get(job_id)
        return proto.NOT_FOUND if job is None else proto.job_reply(b"FOUND", job.id, job.body)

    def _peek_key(self, key: int | None) -> bytes:
        """A ready or delayed queue key (the id is its low 64 bits), or a buried job's id."""
        return proto.NOT_FOUND if key is None else self.peek(key & ID_MASK)

    def peek_ready(self, tube_name: str) -> bytes:
        tube = self.tubes.get(tube_name)
        return self._peek_key(tube.best_ready() if tube else None)

    def peek_delayed(self, tube_name: str) -> bytes:
        tube = self.tubes.get(tube_name)
        return self._peek_key(tube.delayed[0] if tube and tube.delayed else None)

    def peek_buried(self, tube_name: str) -> bytes:
        tube = self.tubes.get(tube_name)
        return self._peek_key(next(iter(tube.buried), None) if tube else None)

    def pause_tube(self, tube_name: str, delay: int, now: int) -> bytes:
        tube = self.tubes.get(tube_name)
        if tube is None:
            return proto.NOT_FOUND
        tube.pause = delay * NS or 1
        tube.unpause_at = now + tube.pause
        tube.cmd_pause += 1
        self._at(tube.unpause_at, _T_PAUSE, tube.name)
        return proto.PAUSED

    # ----------------------------------------------------------------- stats
    def stats_job(self, job_id: int, now: int) -> bytes:
        job = self.jobs.get(job_id)
        if job is None:
            return proto.NOT_FOUND
        left = 0
        if job.state in (State.RESERVED, State.DELAYED):
            left = _seconds(job.deadline - now)
        return proto.yaml_map(
            [
                ("id", job.id),
                ("tube", job.tube),
                ("state", proto.Raw(STATE_NAMES[job.state])),
                ("pri", job.pri),
                ("age", _seconds(now - job.created)),
                ("delay", job.delay),
                ("ttr", job.ttr),
                ("time-left", left),
                ("file", 0),
                ("reserves", job.reserves),
                ("timeouts", job.timeouts),
                ("releases", job.releases),
                ("buries", job.buries),
                ("kicks", job.kicks),
            ]
        )

    def stats_tube(self, tube_name: str, now: int) -> bytes:
        tube = self.tubes.get(tube_name)
        if tube is None:
            return proto.NOT_FOUND
        paused = tube.paused(now)
        return proto.yaml_map(
            [
                ("name", tube.name),
                ("current-jobs-urgent", tube.urgent),
                ("current-jobs-ready", len(tube.ready) + tube.offered),
                ("current-jobs-reserved", tube.reserved),
                ("current-jobs-delayed", len(tube.delayed)),
                ("current-jobs-buried", len(tube.buried)),
                ("total-jobs", tube.total_jobs),
                ("current-using", tube.using),
                ("current-watching", tube.watching),
                ("current-waiting", len(tube.waiters)),
                ("cmd-delete", tube.cmd_delete),
                ("cmd-pause-tube", tube.cmd_pause),
                ("pause", tube.pause // NS if paused else 0),
                ("pause-time-left", _seconds(tube.unpause_at - now) if paused else 0),
            ]
        )

    def counts(self) -> dict[str, int]:
        """This shard's share of the server-wide `stats`."""
        tubes = self.tubes.values()
        return {
            "current-jobs-urgent": sum(t.urgent for t in tubes),
            "current-jobs-ready": sum(len(t.ready) + t.offered for t in tubes),
            "current-jobs-reserved": sum(t.reserved for t in tubes),
            "current-jobs-delayed": sum(len(t.delayed) for t in tubes),
            "current-jobs-buried": sum(len(t.buried) for t in tubes),
            "job-timeouts": self.job_timeouts,
            "total-jobs": self.total_jobs,
            "current-tubes": len(self.tubes),
        }


def _seconds(ns: int) -> int:
    """Whole seconds, truncated toward zero like beanstalkd's int64 division."""
    return -(-ns // NS) if ns < 0 else ns // NS
