"""A bunqueue job in its queue's tube, as beanstalk operations on a session's private
connection: putting jobs (one round trip for many), taking reserved jobs (pulled:
journaled, then deleted from the tube: the lease is the front-end's own), taking a job out
of its tube (Cancel, Drain), and adopting a job put through the beanstalk door.

What a tube holds of a job: its data as JSON, at beanstalk priority `PRI_BASE - priority`
(bunqueue's highest first), with a TTR of its `timeout` (60 s without one) for a beanstalk
worker that reserves it.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import TYPE_CHECKING, Any

from shardq.processes.frontends.beanstalk import Result, line, put_line, use_lines, yaml_map
from shardq.processes.frontends.bunqueue.registry import WAITING, BqJob
from shardq.processes.frontends.registered import known_job, putting
from shardq.processes.frontends.session import Send, Session, Task
from shardq.protocol.bunqueue_args import JobSpec, json_body, queue_of, tube_of
from shardq.protocol.reader import Reply

if TYPE_CHECKING:
    from .loop import Frontend

PRI_BASE = 1 << 31
DEFAULT_TTR_S = 60


def body_of(j: BqJob) -> bytes:
    """The job's data as its tube's JSON body (made at its push: taken once)."""
    body, j.opts.body = j.opts.body, b""
    return body or json_body(j.data)


def put_of(j: BqJob) -> bytes:
    ttr = -(-j.opts.timeout // 1000) if j.opts.timeout else DEFAULT_TTR_S
    return put_line(PRI_BASE - j.opts.priority, 0, max(1, ttr), body_of(j))


def put_jobs(front: Frontend, s: Session, jobs: list[BqJob]) -> Result:
    """Put each job in its tube (one round trip): the beanstalk answers, one a job."""
    lines: list[bytes] = []
    ends: list[int] = []
    for j in jobs:
        lines += (*use_lines(s, tube_of(j.queue)), put_of(j))
        ends.append(len(lines) - 1)
    replies = (yield from putting(front, tuple(lines))) if lines else []
    answers: list[Reply] = [replies[at] for at in ends]
    for j, reply in zip(jobs, answers, strict=True):
        if reply.name == b"INSERTED":
            front.registry.queued(j, reply.number())
    return answers


def requeue(front: Frontend, s: Session, jobs: list[BqJob]) -> Result:
    """Jobs ready again (released, retried, revived, their parents done): in their tubes."""
    jobs = [j for j in jobs if front.registry.get(j.id) is j and j.state == WAITING and not j.job]
    answers = yield from put_jobs(front, s, jobs)
    for j, reply in zip(jobs, answers, strict=True):
        if reply.name != b"INSERTED":  # the server is full: it fails
            front.registry.bury(j, now_ms())
    front.save(*jobs)


def now_ms() -> float:
    return time.time_ns() / 1_000_000


def retire(front: Frontend, s: Session, jobs: list[BqJob]) -> Result:
    """Take the jobs out of their tubes (those that wait there); a pull under way that
    reserved one deletes it instead of serving it."""
    ids = [job for j in jobs if (job := front.registry.unqueue(j))]
    if not ids:
        return
    front.retired.update(ids)
    replies = yield Send(tuple(line("delete", job) for job in ids))
    for job, reply in zip(ids, replies, strict=True):
        if reply.name == b"DELETED":
            front.retired.discard(job)


def adopt(front: Frontend, job: int, body: bytes, stats: dict[str, str], now: float) -> BqJob:
    """A job put through the beanstalk door, pulled through bunqueue's: a bunqueue job
    whose data is its body as JSON (else the body as a string), named ``default``."""
    text = body.decode(errors="replace")
    try:
        data: Any = json.loads(text)
    except ValueError:
        data = text
    queue = queue_of(stats.get("tube", "default"))
    spec = JobSpec("default", data, custom_id=str(uuid.uuid4()))
    j = front.registry.add(queue, spec, now)
    j.opts.custom_id = None
    front.registry.by_custom.pop(j.id, None)
    return j


def deletes_ahead(front: Frontend, s: Session) -> tuple[list[int], tuple[bytes, ...]]:
    """The session's pulled jobs not deleted from their tubes yet, and the lines that do
    it (sent ahead of its next ones; `Registry.deleted` once answered)."""
    jobs = front.undeleted.pop(s.id, [])
    return jobs, tuple(line("delete", job) for job in jobs)


def flush_deletes(front: Frontend, s: Session) -> Task:
    """An idle session's pulled jobs, deleted from their tubes (nothing to answer)."""
    jobs, lines = deletes_ahead(front, s)
    if lines:
        yield Send(lines)
        front.registry.deleted(jobs)
    return None


#: who takes a reserved job: (owner, lockTtl ms); no owner: no lock
Lease = tuple[Any, int]


def take(
    front: Frontend, s: Session, replies: list[Reply], leases: list[Lease], holder: int = 0
) -> Result:
    """The reserved jobs pulled, each with its lease: the jobs, aligned with `replies`
    (None: one not to serve — cancelled meanwhile). Each is journaled active, then deleted
    from its tube (a crash in between gives it back to the tube too: pulled twice at worst,
    never lost). `holder`: the client session they are given to (0: `s`'s own)."""
    now = now_ms()
    pulled: list[BqJob | None] = []
    jobs: list[int] = []
    for reply, (owner, lock_ttl) in zip(replies, leases, strict=True):
        job, body = reply.number(), reply.body or b""
        ident = front.registry.by_job.get(job)  # (known: no generator for `known_job`)
        if ident is None:
            ident = yield from known_job(front, job)
        jobs.append(job)
        pulled.append(None)
        if job in front.retired:  # cancelled or drained while this pull was under way
            front.retired.discard(job)
            continue
        if ident is None:
            stats = yield Send((line("stats-job", job),))
            j = adopt(front, job, body, yaml_map(stats[0].body), now)
        elif (found := front.registry.get(ident)) is not None and found.state == WAITING:
            j = found
        else:
            continue
        front.registry.pull(j, holder or s.id, owner or None, lock_ttl, now)
        pulled[-1] = j
    got = [j for j in pulled if j is not None]
    front.save(*got)
    if jobs:  # deleted with the session's next beanstalk lines (or when it is idle)
        front.undeleted.setdefault(s.id, []).extend(jobs)
    for j in got:
        front.emit("pulled", j)
    return pulled


def in_tube(j: BqJob | None) -> bool:
    return j is not None and j.state == WAITING and j.job != 0


def settle(front: Frontend, s: Session, jobs: list[BqJob]) -> Result:
    """Of these jobs waiting in their tubes, forget those no longer there: a beanstalk
    worker took and deleted them (the front-end does not see it happen)."""
    jobs = [j for j in jobs if in_tube(j)]
    if not jobs:
        return
    replies = yield Send(tuple(line("stats-job", j.job) for j in jobs))
    for j, reply in zip(jobs, replies, strict=True):
        if reply.name == b"NOT_FOUND" and front.registry.get(j.id) is j and in_tube(j):
            front.forget(j)


def settle_queue(front: Frontend, s: Session, queue: str) -> Result:
    """`settle` the queue's waiting jobs if its tube holds fewer jobs than bunqueue's
    waiting ones and its pulled ones not deleted yet (beanstalk puts in the tube can hide
    such a difference: those deletes are then seen by GetJob and GetState only)."""
    reg = front.registry
    waiting = [j for j in reg.of_queue(queue) if in_tube(j)]
    if not waiting:
        return
    pulled = sum(
        1
        for jobs in front.undeleted.values()
        for job in jobs
        if (j := reg.get(reg.by_job.get(job))) is not None and j.queue == queue
    )
    replies = yield Send((line("stats-tube", tube_of(queue)),))
    stats = yaml_map(replies[0].body)
    kinds = ("ready", "reserved", "delayed", "buried")
    held = sum(int(stats.get(f"current-jobs-{kind}", 0)) for kind in kinds)
    if held < len(waiting) + pulled:
        yield from settle(front, s, waiting)
