"""The Workq jobs a front-end knows, pure: an injected clock (unix ms), no IO.

A Workq job is a shardq job while it waits in its tube (`job`: the beanstalk id); the
record here holds the rest — its UUID, ttl, attempts, fails, lease and result. `State` is
Workq's (its numbers are what `inspect` shows) and `STEPS` the one statement of how a job
moves. Timers: a lease ends at `deadline` (then the job is queued again, or fails past its
max-attempts), and every job goes at its expiry (ttl after it was added or its scheduled
time), result and all.

A lease is journaled before its beanstalk job is deleted from the tube, so the job's
record names that beanstalk job (`leased_as`) until the delete is answered: if the process
ends in between, the entry may be back in its tube after the replay, and the janitor
deletes it first (`leftovers`) rather than let a lease take it for a new job.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from enum import IntEnum

from shardq.storage.workq_journal import Added, Changed, Dropped, Record

#: Leases a job may have at most, whatever its max-attempts (Workq's hard limit).
HARD_MAX_ATTEMPTS = 255
#: What a job costs in memory beyond its payload and result (its record, its indexes).
JOB_OVERHEAD_BYTES = 600


class State(IntEnum):
    NEW = 0
    COMPLETED = 1
    FAILED = 2
    PENDING = 3
    LEASED = 4


NEW, COMPLETED, FAILED, PENDING, LEASED = State
QUEUED = (NEW, PENDING)
DONE = (COMPLETED, FAILED)

#: (state, event) -> the states it may go to (the caller picks by the job's counts).
STEPS: dict[tuple[State, str], tuple[State, ...]] = {
    **{(s, "lease"): (LEASED,) for s in QUEUED},
    **{(s, "exhausted"): (FAILED,) for s in QUEUED},  # leased once too often
    (LEASED, "timeout"): (PENDING, FAILED),
    **{(s, "complete"): (COMPLETED,) for s in (*QUEUED, LEASED)},
    **{(s, "fail"): (FAILED, PENDING) for s in (*QUEUED, LEASED)},
}


class BadStep(Exception):
    pass


@dataclass(slots=True)
class WorkqJob:
    fixed: Added
    state: State = NEW
    job: int = 0
    attempts: int = 0
    fails: int = 0
    deadline: int = 0
    result: bytes | None = None
    success: bool = False
    expires: int = field(default=0)
    leased_as: int = 0  # the beanstalk job its lease took, until its delete is answered

    @property
    def id(self) -> str:
        return self.fixed.id

    @property
    def done(self) -> bool:
        return self.state in DONE

    def move(self, event: str, to: State) -> None:
        if to not in STEPS.get((self.state, event), ()):
            raise BadStep(f"{self.id}: {event} in state {self.state.name}")
        self.state = to

    def changed(self) -> Changed:
        return Changed(
            self.id,
            int(self.state),
            self.job,
            self.attempts,
            self.fails,
            self.deadline,
            self.result,
            self.success,
            self.leased_as,
        )

    def may_lease(self) -> bool:
        most = self.fixed.max_attempts or HARD_MAX_ATTEMPTS
        return self.attempts < min(most, HARD_MAX_ATTEMPTS)


def cost(fixed: Added) -> int:
    return len(fixed.payload) + JOB_OVERHEAD_BYTES


def by_time(j: WorkqJob) -> tuple[int, int]:
    return j.fixed.at, j.fixed.created


def by_priority(j: WorkqJob) -> tuple[int, int]:
    return -j.fixed.priority, j.fixed.created


def expiry(fixed: Added) -> int:
    """When a job goes: ttl after its scheduled time or its creation (a run job has no
    ttl: its run ends it)."""
    return (fixed.at or fixed.created) + fixed.ttl if fixed.ttl else 0


class Registry:
    def __init__(self) -> None:
        self.jobs: dict[str, WorkqJob] = {}
        self.by_job: dict[int, str] = {}  # beanstalk id -> UUID, while queued
        self.timers: list[tuple[int, int, str]] = []  # (when, kind, UUID); stale ones skipped
        self.evicted = 0  # jobs that expired before they were done
        self.bytes = 0  # payloads and results held, with JOB_OVERHEAD_BYTES a job
        #: jobs the journal left waiting for their tube with none (the process ended while
        #: it put them back): the janitor puts them back first
        self.orphans: list[WorkqJob] = []
        #: jobs the journal left with a lease's beanstalk job perhaps not deleted (the
        #: process ended before its delete was answered): the janitor deletes them first
        self.leftovers: list[WorkqJob] = []

    def __len__(self) -> int:
        return len(self.jobs)

    def get(self, ident: str) -> WorkqJob | None:
        return self.jobs.get(ident)

    def add(self, fixed: Added) -> WorkqJob:
        j = WorkqJob(fixed, expires=expiry(fixed))
        self.bytes += cost(fixed)
        self.jobs[fixed.id] = j
        if j.expires:
            heapq.heappush(self.timers, (j.expires, 1, fixed.id))
        return j

    def queued(self, j: WorkqJob, job: int) -> None:
        """The job waits in its tube as beanstalk job `job`."""
        self.unqueue(j)
        j.job = job
        if job:
            self.by_job[job] = j.id

    def unqueue(self, j: WorkqJob) -> int:
        """The job no longer waits in its tube: its beanstalk id (0: none)."""
        job, j.job = j.job, 0
        self.by_job.pop(job, None)
        return job

    def deleted(self, j: WorkqJob, job: int) -> None:
        """Beanstalk job `job`, which the job's lease took, is out of its tube."""
        if j.leased_as == job:
            j.leased_as = 0

    def drop(self, j: WorkqJob) -> None:
        self.unqueue(j)
        if self.jobs.pop(j.id, None) is not None:
            self.bytes -= cost(j.fixed) + len(j.result or b"")

    def expire_now(self, j: WorkqJob, now: int) -> None:
        """The job goes at the janitor's next turn (a run whose client left)."""
        j.expires = now
        heapq.heappush(self.timers, (now, 1, j.id))

    def lease(self, j: WorkqJob, now: int) -> bool:
        """A worker took the job: an attempt starts (False: it has had all its attempts,
        and fails instead). Its beanstalk job is `leased_as` until `deleted`."""
        j.leased_as = self.unqueue(j)
        if not j.may_lease():
            j.move("exhausted", FAILED)
            self.ended(j, b"", False)
            return False
        j.move("lease", LEASED)
        j.attempts += 1
        j.deadline = now + j.fixed.ttr
        heapq.heappush(self.timers, (j.deadline, 0, j.id))
        return True

    def finish(self, j: WorkqJob, success: bool, result: bytes) -> bool:
        """complete or fail; True: a failure that is retried (queue the job again)."""
        self.unqueue(j)
        j.deadline = 0
        if success:
            j.move("complete", COMPLETED)
        else:
            j.fails += 1
            retry = j.fails < j.fixed.max_fails and j.may_lease()
            j.move("fail", PENDING if retry else FAILED)
            if retry:
                return True
        self.ended(j, result, success)
        return False

    def give_up(self, j: WorkqJob) -> None:
        """The job cannot wait in its tube any more (the server refused to queue it again):
        it fails, with an empty result."""
        self.unqueue(j)
        j.move("exhausted", FAILED)
        self.ended(j, b"", False)

    def ended(self, j: WorkqJob, result: bytes, success: bool) -> None:
        """The job is done (COMPLETED or FAILED): its result is kept until its expiry."""
        self.bytes += len(result) - len(j.result or b"")
        j.result, j.success = result, success

    def lease_ended(self, j: WorkqJob) -> bool:
        """Its TTR passed: True: queue it again; False: it had its last attempt, failed."""
        j.deadline = 0
        if j.may_lease():
            j.move("timeout", PENDING)
            return True
        j.move("timeout", FAILED)
        self.ended(j, b"", False)
        return False

    def due(self, now: int) -> tuple[list[WorkqJob], list[WorkqJob]]:
        """(leases past their TTR, jobs past their expiry) at `now`."""
        ended: list[WorkqJob] = []
        expired: list[WorkqJob] = []
        while self.timers and self.timers[0][0] <= now:
            when, kind, ident = heapq.heappop(self.timers)
            j = self.jobs.get(ident)
            if j is None:
                continue
            if kind == 0 and j.state is LEASED and j.deadline == when:
                ended.append(j)
            elif kind == 1 and j.expires == when:
                expired.append(j)
        return ended, expired

    def next_due(self) -> int | None:
        if self.orphans or self.leftovers:
            return 0
        return self.timers[0][0] if self.timers else None

    def take_orphans(self) -> list[WorkqJob]:
        orphans, self.orphans = self.orphans, []
        return [j for j in orphans if self.jobs.get(j.id) is j and j.state in QUEUED and not j.job]

    def take_leftovers(self) -> list[WorkqJob]:
        leftovers, self.leftovers = self.leftovers, []
        return [j for j in leftovers if self.jobs.get(j.id) is j and j.leased_as]

    def listed(self, name: str, scheduled: bool, now: int) -> list[WorkqJob]:
        """The jobs of `name` waiting in their tube: ready ones by priority (highest first)
        then age, or the scheduled ones by time."""
        if scheduled:
            jobs = [
                j for j in self.jobs.values() if j.fixed.name == name and j.job and j.fixed.at > now
            ]
            return sorted(jobs, key=by_time)
        jobs = [
            j for j in self.jobs.values() if j.fixed.name == name and j.job and j.fixed.at <= now
        ]
        return sorted(jobs, key=by_priority)

    # ------------------------------------------------------------------ the journal

    def snapshot(self) -> list[Record]:
        out: list[Record] = []
        for j in self.jobs.values():
            out += (j.fixed, j.changed())
        return out

    def replay(self, records: list[Record]) -> None:
        for rec in records:
            if isinstance(rec, Added):
                self.add(rec)
            elif isinstance(rec, Dropped):
                j = self.jobs.get(rec.id)
                if j is not None:
                    self.drop(j)
            elif (j := self.jobs.get(rec.id)) is not None:
                j.state, j.attempts, j.fails = State(rec.state), rec.attempts, rec.fails
                j.deadline = rec.deadline
                self.ended(j, rec.result or b"", rec.success)
                j.result = rec.result
                self.queued(j, rec.job)
                j.leased_as = rec.leased_as
                if j.state is LEASED:
                    heapq.heappush(self.timers, (j.deadline, 0, j.id))
        self.orphans = [j for j in self.jobs.values() if j.state in QUEUED and not j.job]
        self.leftovers = [j for j in self.jobs.values() if j.leased_as]
