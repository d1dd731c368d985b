"""The engine's timers: one heap of (when, stamp, kind, key), compacted, run by `tick`.

Delays end, TTRs run out, pauses end, waiting reserves expire, jobs reach their tube's
`max_age` (policing.py) and rate-limited tubes get their next token (throttling.py) through
this heap. A timer is not removed when its reason goes (a
reserved job deleted, a delayed job kicked): every entry is re-checked when it fires, and
the heap is compacted when it doubles.

A reserve's TTR timer is first one of the engine's `fresh` (a list in reserve order), and
joins the heap FRESH_NS later if its job is still reserved by that reserve: most workers
delete a job well within that time, so its timer costs an append, not a push onto the heap
and a share of its compactions. FRESH_NS is below the least TTR (1 s), so every timer is
in the heap before it is due; `due` and `next_due` count the fresh ones' joining as a timer.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Any

from shardq.engine.core import EngineCore
from shardq.engine.job import ID_MASK, ST_DELAYED, ST_RESERVED, TIMEOUT, Job
from shardq.engine.jobtable import JobTable
from shardq.engine.kinds import (
    FINAL,
    FRESH_NS,
    T_AGE,
    T_DELAY,
    T_PAUSE,
    T_TOKEN,
    T_TTR,
    T_WAIT,
    TIMERS_MIN_BOUND,
)
from shardq.engine.tube import Tube

if TYPE_CHECKING or __file__.endswith(".py"):  # the pure build: no-op decorators
    from shardq.nocython import cython
else:  # compiled: Cython reads the decorators (and imports nothing at run time)
    import cython


__all__ = [
    "FRESH_NS",
    "T_AGE",
    "T_DELAY",
    "T_PAUSE",
    "T_TOKEN",
    "T_TTR",
    "T_WAIT",
    "TIMERS_MIN_BOUND",
    "Timers",
]


def ttr_set_by(job: Job, when: int) -> bool:
    """Is the job still reserved by the reserve that set a TTR timer due `when` (its
    deadline's bits in `hold`)? `_timed_job`'s check, as a C call where it runs per timer."""
    return job.state == ST_RESERVED and (job.hold >> 64) & ID_MASK == (when - 1) & ID_MASK


class Timers(EngineCore):
    """The timer heap of an engine and what each kind of timer does when it fires."""

    __slots__ = ()  # the state is EngineCore's

    @cython.locals(self=EngineCore, job=Job, jobs=JobTable, kept=list)
    def _compact_timers(self) -> None:
        """Drop the timers that can no longer do anything. A timer is not removed when its
        reason goes (a reserved job deleted, a delayed job kicked): it is checked when it
        fires. Under steady load that would keep one dead entry per reserve for a whole
        TTR; rebuilding when the heap doubles keeps it within twice the live timers, at an
        amortised O(1) per timer."""
        jobs = self.jobs
        kept = []
        for timer in self.timers:
            when, _stamp, kind, key = timer
            if kind == T_TTR:  # the most of them: `_timed_job`'s check, without its calls
                job = jobs.get(key)
                if job is None or not ttr_set_by(job, when):
                    continue
            elif not self._timer_live(when, kind, key):
                continue
            kept.append(timer)
        heapq.heapify(kept)
        self.timers = kept
        self._timers_bound = max(TIMERS_MIN_BOUND, 2 * len(self.timers))

    def _timer_live(self, when: int, kind: int, key: Any) -> bool:
        if kind == T_PAUSE:
            return True  # few, and cheap to keep
        if kind == T_WAIT:
            waiter = self.waiters.get(key)
            return waiter is not None and waiter.expire_at == when
        if kind == T_AGE:
            return key in self.jobs  # re-checked against its tube's max_age when it fires
        if kind == T_TOKEN:  # a tube's next token, or when a gone tube's bucket is full
            tube = self.tubes.get(key)
            if tube is None:
                return self.buckets.get(key) == when
            return tube.throttle is not None and tube.throttle.timer_at == when
        return self._timed_job(kind, key, when) is not None

    def _timed_job(self, kind: int, job_id: int, when: int) -> Job | None:
        """The job a delay or TTR timer firing at `when` is still for, or None."""
        job = self.jobs.get(job_id)
        if job is None:
            return None
        if kind == T_DELAY:
            return job if job.state == ST_DELAYED and job.deadline == when else None
        return job if ttr_set_by(job, when) else None

    def _delay(self, job: Job, delay: int, now: int) -> None:
        """Put a job in its tube's delayed queue until `now + delay` (ns)."""
        job.deadline = now + delay
        self.tubes[job.tube].delayed.add(job.delayed_key)
        self._at(job.deadline, T_DELAY, job.id)

    def next_due(self) -> int | None:
        """When the first timer is due (it may be one left behind: never later than the
        first that matters), or the first fresh one joins the heap; None: there is none."""
        first = self.timers[0][0] if self.timers else None
        if self.fresh_head < len(self.fresh):
            joins = self.fresh[self.fresh_head][0]
            if first is None or joins < first:
                return joins
        return first

    def next_wakeup(self) -> int | None:
        return self.next_due()

    @cython.locals(
        self=EngineCore,
        fresh=list,
        head=cython.Py_ssize_t,
        end=cython.Py_ssize_t,
        jobs=JobTable,
        job=Job,
    )
    def _promote_fresh(self, now: int) -> None:
        """The fresh TTR timers whose time has come join the heap, with those whose time
        comes within FRESH_NS / 2 (so that they join in batches, one call every FRESH_NS / 2
        at most, not one for every reserve); those whose job is no longer reserved by the
        reserve that set them are dropped."""
        fresh, head, end = self.fresh, self.fresh_head, len(self.fresh)
        jobs = self.jobs
        until = now + FRESH_NS // 2
        while head < end and fresh[head][0] <= until:
            _joins, when, job_id = fresh[head]
            head += 1
            job = jobs.get(job_id)
            if job is not None and ttr_set_by(job, when):
                self._at(when, T_TTR, job_id)
        if head == end:
            fresh.clear()
            head = 0
        elif head > TIMERS_MIN_BOUND and 2 * head > end:  # the joined ones' room given back
            del fresh[:head]
            head = 0
        self.fresh_head = head

    @cython.locals(self=EngineCore)
    def _sweep_fresh(self) -> None:
        """Keep only the fresh timers whose job is still reserved by the reserve that set
        them: reserves that outpace FRESH_NS (a burst, or a clock that stands still in a
        test) keep the list within twice its live timers, as compaction keeps the heap."""
        jobs = self.jobs
        live = [
            entry
            for entry in self.fresh[self.fresh_head :]
            if (job := jobs.get(entry[2])) is not None and ttr_set_by(job, entry[1])
        ]
        self.fresh = live
        self.fresh_head = 0
        self._fresh_bound = max(TIMERS_MIN_BOUND, 2 * len(live))

    @cython.locals(self=EngineCore)
    def tick(self, now: int) -> None:
        """Run every timer that is due: delays end, TTRs run out, pauses end, waits expire,
        tokens come. Tubes that a pause's end or a token opened are served together, after."""
        opened: list[Tube] = []
        if self.fresh_head < len(self.fresh):
            self._promote_fresh(now)
        while self.timers and self.timers[0][0] <= now:
            when, _, kind, key = heapq.heappop(self.timers)
            if kind == T_DELAY:
                self._promote(key, when, now)
            elif kind == T_TTR:
                self._expire(key, when, now)
            elif kind == T_PAUSE:
                self._unpause(key, when, opened)
            elif kind == T_AGE:
                self._age_out(key, now)
            elif kind == T_TOKEN:
                self._token_due(key, when, opened)
            else:
                self._wait_expired(key, when)
        if opened:
            self._serve_tubes(opened, now)

    def _promote(self, job_id: int, when: int, now: int) -> None:
        job = self._timed_job(T_DELAY, job_id, when)
        if job is not None:
            self._unlink_delayed(job)
            job.move("promote")
            self._enqueue(job, now)

    def _expire(self, job_id: int, when: int, now: int) -> None:
        job = self._timed_job(T_TTR, job_id, when)
        if job is not None:
            self._unreserve(job)
            job.dur += TIMEOUT
            self.job_timeouts += 1
            self._note(now, "timeout", job)
            if self.policed and self._bury_instead(job, now, timed_out=True):
                return  # max_timeouts, max_reserves
            job.move("timeout")
            if self.tubes[job.tube].policy is not None:
                self._persist(job)  # its timeouts count survives a restart (max_timeouts)
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
