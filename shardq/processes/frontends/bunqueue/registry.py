"""The bunqueue jobs a front-end knows, pure: times passed in (unix ms, floats), no IO.

A bunqueue job is a shardq job while it waits in its queue's tube (`job`: the beanstalk
id); the record here holds the rest — its id, name, data, options, attempts, lock, result
and DLQ entry. `STEPS` is the one statement of how a job moves between bunqueue's states.
Delayed jobs (a delay, a retry's backoff) and jobs waiting for their parents are held
here, not in a tube, and are put in one when they become ready (`due`, `ack`): the wait is
to the millisecond, and a beanstalk worker never sees a job before bunqueue would serve it.
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from shardq.processes.frontends.bunqueue.ids import Ids
from shardq.processes.frontends.bunqueue.lifo import Lifo
from shardq.protocol.bunqueue_args import JobSpec

WAITING, DELAYED, ACTIVE = "waiting", "delayed", "active"
COMPLETED, FAILED, CHILDREN = "completed", "failed", "waiting-children"
#: (state, event) -> the state it goes to
STEPS: dict[tuple[str, str], str] = {
    (WAITING, "pull"): ACTIVE,
    (ACTIVE, "release"): WAITING,  # a disconnect, an expired lock
    (ACTIVE, "ack"): COMPLETED,
    (ACTIVE, "retry"): DELAYED,
    (ACTIVE, "bury"): FAILED,
    (DELAYED, "ready"): WAITING,
    (CHILDREN, "ready"): WAITING,
    (FAILED, "revive"): WAITING,
    (WAITING, "bury"): FAILED,  # its attempts ran out while it waited (a stalled lease)
}
MAX_BACKOFF_MS = 3_600_000
#: what a job costs in memory beyond its data and result (its record, its indexes)
JOB_OVERHEAD_BYTES = 700
DELAY, LOCK = 0, 1  #: timer kinds
#: completed jobs kept (their results), oldest dropped first (bunqueue's maxCompletedJobs)
MAX_COMPLETED = 50_000


class BadStep(Exception):
    pass


@dataclass(slots=True)
class BqJob:
    id: str
    queue: str
    name: str
    data: Any
    created: float
    run_at: float
    opts: JobSpec
    state: str = WAITING
    job: int = 0  # its beanstalk job while it waits in its tube (0: none)
    pulled_as: int = 0  # the beanstalk job it was last pulled as (known after a crash too)
    attempts: int = 0
    started: float | None = None
    completed: float | None = None
    stall_count: int = 0
    progress: float = 0
    progress_message: str | None = None
    stacktrace: list[str] | None = None
    result: Any = None
    failed_reason: str | None = None
    owner: str | None = None
    token: str | None = None
    lock_until: float = 0
    lock_ttl: int = 0
    heartbeat: float = 0
    holder: int = 0  # the session that pulled it (not kept: a restart releases it)
    children: list[str] = field(default_factory=list)  # jobs waiting for this one
    waiting_for: int = 0  # parents not completed yet
    history: list[dict[str, Any]] = field(default_factory=list)  # failed attempts (Dlq)
    entered_dlq: float | None = None

    def move(self, event: str) -> None:
        to = STEPS.get((self.state, event))
        if to is None:
            raise BadStep(f"{self.id}: {event} in state {self.state}")
        self.state = to

    @property
    def visible_state(self) -> str:
        """bunqueue's name for it: a waiting job with a priority is `prioritized`."""
        if self.state == WAITING and self.opts.priority > 0:
            return "prioritized"
        return self.state


def cost(j: BqJob) -> int:
    return JOB_OVERHEAD_BYTES + len(repr(j.data))


def retry_delay(j: BqJob, rand: float) -> float:
    """bunqueue's backoff: fixed, or exponential with jitter (`rand` in [0, 1)), ≤ 1 h."""
    if j.opts.backoff_config is not None and j.opts.backoff_config.get("type") == "fixed":
        return float(j.opts.backoff)
    return min(j.opts.backoff * 2**j.attempts * (0.5 + rand), MAX_BACKOFF_MS)


class Registry:
    def __init__(self) -> None:
        self.jobs: dict[str, BqJob] = {}
        self.ids = Ids()
        self.by_job: dict[int, str] = {}  # beanstalk id -> job id, while queued
        self.by_custom: dict[str, str] = {}
        self.unique: dict[tuple[str, str], str] = {}  # (queue, uniqueKey) -> job id
        self.queues: dict[str, set[str]] = {}  # queue -> its jobs' ids
        self.held: dict[int, set[str]] = {}  # session id -> the jobs it pulled
        self.timers: list[tuple[float, int, str]] = []  # (when, kind, id); stale skipped
        self.paused: set[str] = set()
        self.lifo = Lifo()  # the lifo jobs in their tubes, newest last
        self.bytes = 0
        #: jobs ready with no tube entry (released, retried, revived): the janitor puts them
        self.ready: list[BqJob] = []
        self.totals = {"pushed": 0, "pulled": 0, "completed": 0, "failed": 0}
        self.completed: deque[str] = deque()  # completed jobs' ids, oldest first
        self.max_completed = MAX_COMPLETED

    def __len__(self) -> int:
        return len(self.jobs)

    def get(self, ident: Any) -> BqJob | None:
        return self.jobs.get(str(ident))

    def of_queue(self, name: str) -> Iterator[BqJob]:
        for ident in self.queues.get(name, ()):
            yield self.jobs[ident]

    def duplicate(self, queue: str, spec: JobSpec) -> BqJob | None:
        """The job a push is a repeat of (its custom id, or its uniqueKey while held)."""
        if spec.custom_id is not None and (j := self.get(spec.custom_id)) is not None:
            return j
        if spec.unique_key is not None:
            return self.get(self.unique.get((queue, spec.unique_key)))
        return None

    def add(self, queue: str, spec: JobSpec, now: float) -> BqJob:
        created = spec.timestamp if spec.timestamp is not None else now
        ident = spec.custom_id or self.ids.uuid7(int(now))
        j = BqJob(ident, queue, spec.name, spec.data, created, created + spec.delay, spec)
        j.heartbeat = created
        self.index(j)
        self.totals["pushed"] += 1
        if spec.depends_on:
            self.wait_for_parents(j, spec.depends_on)
        if j.waiting_for:
            j.state = CHILDREN
        elif j.run_at > now:
            self.delay(j)
        return j

    def wait_for_parents(self, j: BqJob, parents: list[str]) -> None:
        for ident in parents:
            parent = self.jobs.get(ident)
            if parent is not None and parent.state != COMPLETED:
                parent.children.append(j.id)
                j.waiting_for += 1

    def index(self, j: BqJob) -> None:
        self.jobs[j.id] = j
        ids = self.queues.get(j.queue)
        if ids is None:
            ids = self.queues[j.queue] = set()
        ids.add(j.id)
        if j.opts.custom_id is not None:
            self.by_custom[j.opts.custom_id] = j.id
        if j.opts.unique_key is not None and j.state not in (COMPLETED, FAILED):
            self.unique[(j.queue, j.opts.unique_key)] = j.id
        self.bytes += cost(j)

    def delay(self, j: BqJob) -> None:
        j.state = DELAYED
        heapq.heappush(self.timers, (j.run_at, DELAY, j.id))

    def queued(self, j: BqJob, job: int) -> None:
        """The job waits in its tube as beanstalk job `job`."""
        self.unqueue(j)
        j.job = job
        if job:
            self.by_job[job] = j.id
            if j.opts.lifo:
                self.lifo.put(j.queue, j.opts.priority, j.id)

    def newest_lifo(self, queue: str, priority: int, most: int) -> list[BqJob]:
        """Up to `most` lifo jobs of `queue` at `priority` waiting in its tube, newest first
        (bunqueue serves them before the other jobs of that priority)."""
        idents = self.lifo.newest(queue, priority, most, self.in_tube)
        return [self.jobs[ident] for ident in idents]

    def in_tube(self, ident: str) -> bool:
        j = self.jobs.get(ident)
        return j is not None and j.state == WAITING and j.job != 0

    def unqueue(self, j: BqJob) -> int:
        job, j.job = j.job, 0
        self.by_job.pop(job, None)
        return job

    def drop(self, j: BqJob) -> None:
        self.unqueue(j)
        if self.by_job.get(j.pulled_as) == j.id:
            del self.by_job[j.pulled_as]
        self.unhold(j)
        self.free_key(j)
        if self.jobs.pop(j.id, None) is not None:
            self.bytes -= cost(j)
            self.queues.get(j.queue, set()).discard(j.id)  # (the queue stays listed)
        if j.opts.custom_id is not None:
            self.by_custom.pop(j.opts.custom_id, None)

    def free_key(self, j: BqJob) -> None:
        key = (j.queue, j.opts.unique_key or "")
        if j.opts.unique_key is not None and self.unique.get(key) == j.id:
            del self.unique[key]

    def unhold(self, j: BqJob) -> None:
        held = self.held.get(j.holder)
        if held is not None:
            held.discard(j.id)
            if not held:
                del self.held[j.holder]
        j.holder = 0

    # ------------------------------------------------------------------ leases

    def pull(self, j: BqJob, sid: int, owner: str | None, lock_ttl: int, now: float) -> None:
        """Session `sid` took the job (reserved from its tube: `by_job` keeps naming it
        until the delete is answered — `deleted` — so that if that session goes first and
        the reservation comes back to the tube, the job is known, not taken for a new one)."""
        j.pulled_as, j.job = j.job, 0
        j.move("pull")
        j.started = j.heartbeat = now
        j.holder = sid
        self.held.setdefault(sid, set()).add(j.id)
        self.totals["pulled"] += 1
        j.owner, j.token = owner, None
        if owner:
            j.token, j.lock_ttl = self.ids.token(), lock_ttl
            self.lock(j, lock_ttl, now)

    def deleted(self, jobs: list[int]) -> None:
        """These beanstalk jobs, pulled, are out of their tubes."""
        for job in jobs:
            ident = self.by_job.get(job)
            if ident is None:
                continue
            j = self.jobs.get(ident)
            if j is None or j.job != job:
                del self.by_job[job]

    def lock(self, j: BqJob, lock_ttl: int, now: float) -> None:
        j.lock_until = now + lock_ttl
        heapq.heappush(self.timers, (j.lock_until, LOCK, j.id))

    def lock_error(self, j: BqJob | None, ident: Any, given: Any) -> str | None:
        """Why an ACK or FAIL of `j` with token `given` is refused (None: it is not)."""
        if j is None or j.state != ACTIVE:
            return f"Job not found or not in processing state: {ident}"
        if j.token is None:
            return None
        if given is None:
            return f"Lock token required for job {ident}"
        if given != j.token:
            return f"Invalid or expired lock token for job {ident}"
        return None

    def ack(self, j: BqJob, result: Any, now: float) -> list[BqJob]:
        """Completed; the jobs that waited only for it, now ready (to be put)."""
        self.unhold(j)
        j.move("ack")
        j.completed, j.result, j.token, j.lock_until = now, result, None, 0
        self.free_key(j)
        self.totals["completed"] += 1
        return self.release_children(j)

    def kept(self, j: BqJob) -> list[BqJob]:
        """A completed job is kept: the oldest completed ones past `max_completed`, to drop."""
        self.completed.append(j.id)
        out = []
        while len(self.completed) > self.max_completed:
            old = self.jobs.get(self.completed.popleft())
            if old is not None and old.state == COMPLETED:
                out.append(old)
        return out

    def release_children(self, j: BqJob) -> list[BqJob]:
        ready = []
        for ident in j.children:
            child = self.jobs.get(ident)
            if child is None or child.state != CHILDREN:
                continue
            child.waiting_for -= 1
            if child.waiting_for <= 0:
                child.move("ready")
                ready.append(child)
        j.children = []
        return ready

    def fail(self, j: BqJob, error: str, stack: Any, now: float, explicit: bool = True) -> bool:
        """An attempt failed: True when it is retried (delayed by its backoff), False when
        it went to the DLQ."""
        self.unhold(j)
        j.attempts += 1
        j.failed_reason, j.token, j.lock_until = error, None, 0
        if isinstance(stack, list):
            j.stacktrace = [str(line) for line in stack[:100]]
        retry = j.attempts < j.opts.max_attempts
        reason = "explicit_fail" if explicit and retry else "max_attempts_exceeded"
        started = j.started or now
        j.history.append(
            {
                "attempt": j.attempts,
                "error": error,
                "reason": reason,
                "startedAt": started,
                "failedAt": now,
                "duration": now - started,
            }
        )
        if retry:
            j.move("retry")
            j.started = None
            j.run_at = now + retry_delay(j, random.random())
            heapq.heappush(self.timers, (j.run_at, DELAY, j.id))
            return True
        self.bury(j, now)
        return False

    def bury(self, j: BqJob, now: float) -> None:
        j.move("bury")
        j.entered_dlq = now
        self.free_key(j)
        self.totals["failed"] += 1

    def release(self, j: BqJob) -> None:
        """Back to waiting (its connection went): put again by the janitor."""
        self.unhold(j)
        j.move("release")
        j.token, j.owner, j.lock_until, j.started = None, None, 0, None
        self.ready.append(j)

    def stalled(self, j: BqJob, now: float) -> None:
        """Its lock expired: queued again with one more attempt (the DLQ past its last)."""
        j.attempts += 1
        j.stall_count += 1
        if j.attempts >= j.opts.max_attempts:
            self.unhold(j)
            j.failed_reason = "Job stalled"
            self.bury(j, now)
            return
        self.release(j)

    def revive(self, j: BqJob) -> None:
        """RetryDlq: waiting again, attempts from 0."""
        j.move("revive")
        j.attempts, j.failed_reason, j.entered_dlq, j.history = 0, None, None, []
        if j.opts.unique_key is not None:
            self.unique.setdefault((j.queue, j.opts.unique_key), j.id)
        self.ready.append(j)

    def due(self, now: float) -> tuple[list[BqJob], list[BqJob]]:
        """(delayed jobs now ready, locks past their time) at `now`."""
        ready: list[BqJob] = []
        stalled: list[BqJob] = []
        while self.timers and self.timers[0][0] <= now:
            when, kind, ident = heapq.heappop(self.timers)
            j = self.jobs.get(ident)
            if j is None:
                continue
            if kind == DELAY and j.state == DELAYED and j.run_at == when:
                j.move("ready")
                ready.append(j)
            elif kind == LOCK and j.state == ACTIVE and j.lock_until == when:
                stalled.append(j)
        return ready, stalled

    def next_due(self) -> float | None:
        if self.ready:
            return 0
        return self.timers[0][0] if self.timers else None

    def take_ready(self) -> list[BqJob]:
        ready, self.ready = self.ready, []
        return [j for j in ready if self.jobs.get(j.id) is j and j.state == WAITING and not j.job]

    def given_back(self, sid: int, reserved: list[int]) -> list[BqJob]:
        """What a session that went had pulled, released. `reserved`: its beanstalk jobs not
        deleted yet — their reservations go back to their tubes with the session's
        connection, so those jobs wait there again as they are (the others are put anew)."""
        back = {self.by_job.get(job): job for job in reserved}
        out = []
        for ident in list(self.held.get(sid, ())):
            j = self.jobs[ident]
            if j.state == ACTIVE:
                self.release(j)
                if ident in back:
                    self.ready.remove(j)
                    self.queued(j, back[ident])
                out.append(j)
        self.held.pop(sid, None)
        return out
