"""The job engine of one shard: a pure state machine over the tubes that shard owns.

Every method takes `now` (monotonic nanoseconds) instead of reading a clock, and
answers with what happened: the fixed reply the client will see (protocol/replies.py), or
a fact the shard formats (`put`: taken or not; `kick`: how many). Things that happen later — a
waiting reserve being served, timing out, a job offered to a cross-shard reserver —
are appended to `self.events` as (rid, payload) pairs for the process shell to send.

Connections are identified by integers the serving process hands out; `rid` identifies
one reserve request. The engine never trusts a connection to own a job: it checks.

`Engine` is this module's commands (put, delete, release, bury, touch, kick, peek, pause)
on top of the engine's parts: its state (core.py), timers (timers.py), reserves and
waiters (reserve.py), write-ahead log records (persist.py, records.py), per-tube policies
(policing.py, policy.py), its concurrency and rate limits (throttling.py, limits.py),
fanout (fanout.py) and statistics (stats.py). The names other modules need are
importable from here.
"""

from __future__ import annotations

from itertools import islice
from typing import Any

from shardq.engine.fanout import Fanning
from shardq.engine.job import (
    BURY,
    ID_MASK,
    KICK,
    NS,
    RELEASE,
    ST_BURIED,
    Job,
)
from shardq.engine.kinds import (
    CANCELLED,
    FINAL,
    NONE_BETTER,
    OFFER,
    RESERVED,
    TIMERS_MIN_BOUND,
    WAITING,
)
from shardq.engine.policing import Policing
from shardq.engine.records import RECORD_OVERHEAD
from shardq.engine.refs import TubeRefs
from shardq.engine.reserve import SAFETY_MARGIN, Reserving, reserved_payload
from shardq.engine.stats import Stats
from shardq.engine.throttling import Throttling
from shardq.engine.timers import T_PAUSE, T_TTR, Timers
from shardq.protocol import replies
from shardq.protocol.replies import NOT_FOUND

__all__ = [
    "CANCELLED",
    "FINAL",
    "NONE_BETTER",
    "OFFER",
    "RECORD_OVERHEAD",
    "RESERVED",
    "SAFETY_MARGIN",
    "TIMERS_MIN_BOUND",
    "WAITING",
    "Engine",
    "reserved_payload",
]


class Engine(Timers, Reserving, Policing, Throttling, Fanning, Stats, TubeRefs):
    """All tubes and jobs of one shard."""

    __slots__ = ()  # the state is EngineCore's

    def release(self, conn: int, job_id: int, pri: int, delay: int, now: int) -> bytes:
        job = self._owned_by(job_id, conn)
        if job is None:
            return NOT_FOUND
        self._unreserve(job)
        job.pri = pri
        if self.policed and self._bury_instead(job, now):  # max_reserves: answered as a bury is
            return replies.BURIED
        job.dur += RELEASE
        job.delay = delay
        self._note(now, "release", job)  # the event carries the release's own delay
        if delay > 0:
            job.move("release-delayed")
            self._delay(job, delay * NS, now)
            tube = self.tubes[job.tube]
            if tube.throttle is not None:
                self._freed(tube, now)  # max_reserved
        else:
            job.move("release")
            self._persist(job)  # before _enqueue: a waiter may take it at once
            self._enqueue(job, now)
            return replies.RELEASED
        self._persist(job)
        return replies.RELEASED

    def bury(self, conn: int, job_id: int, pri: int, now: int, resent: bool = False) -> bytes:
        if resent and job_id in self.jobs and self.jobs[job_id].state == ST_BURIED:
            return replies.BURIED  # the first try reached the log before the shard restarted
        job = self._owned_by(job_id, conn)
        if job is None:
            return NOT_FOUND
        self._unreserve(job)
        job.pri = pri
        job.dur += BURY
        self._note(now, "bury", job)
        job.move("bury")
        tube = self.tubes[job.tube]
        tube.buried[job.id] = None
        self._persist(job)
        if tube.throttle is not None:
            self._freed(tube, now)  # max_reserved
        return replies.BURIED

    def touch(self, conn: int, job_id: int, now: int) -> list[Any]:
        """Answer TOUCHED with the new deadline, so the serving process can track DEADLINE_SOON."""
        job = self._owned_by(job_id, conn)
        if job is None:
            return [NOT_FOUND, 0]
        self._note(now, "touch", job)  # before the deadline moves (engine/timing.py)
        job.deadline = now + job.ttr * NS
        self._at(job.deadline + 1, T_TTR, job.id)
        return [replies.TOUCHED, job.deadline]

    def _kick_one(self, job: Job, now: int) -> None:
        self._unlink(job)
        job.dur += KICK
        self._note(now, "kick", job)
        job.move("kick")
        self._persist(job)
        self._enqueue(job, now)

    def kick(self, tube_name: str, bound: int, now: int) -> int:
        """Kick up to `bound` jobs (buried ones first, else delayed): how many."""
        tube = self.tubes.get(tube_name)
        if tube is None:
            return 0
        if tube.buried:
            ids = list(islice(tube.buried, bound))
        else:
            ids = [key & ID_MASK for key in tube.delayed.islice(0, bound)]
        for job_id in ids:
            self._kick_one(self.jobs[job_id], now)
        return len(ids)

    def kick_job(self, job_id: int, now: int) -> bytes:
        job = self.jobs.get(job_id)
        if job is None or not job.can("kick"):
            return NOT_FOUND
        self._kick_one(job, now)
        return replies.KICKED

    def peek(self, job_id: int) -> bytes:
        job = self.jobs.get(job_id)
        if job is None:
            return NOT_FOUND
        return replies.job_reply(b"FOUND", job.id, job.body)

    def _peek_key(self, key: int | None) -> bytes:
        """A ready or delayed queue key (the id is its low 64 bits), or a buried job's id."""
        return NOT_FOUND if key is None else self.peek(key & ID_MASK)

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
            return NOT_FOUND
        tube.pause = delay * NS or 1
        tube.unpause_at = now + tube.pause
        tube.cmd_pause += 1
        self._at(tube.unpause_at, T_PAUSE, tube.name)
        return replies.PAUSED
