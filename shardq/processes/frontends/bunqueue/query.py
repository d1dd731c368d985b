"""bunqueue's read commands over the registry: GetJob, GetJobs, GetJobByCustomId,
GetState, GetResult, GetProgress, GetJobCounts, GetCountsPerPriority, Count, and WaitJob
(which waits for a job's completion). GetJob, GetState and the counts first forget the
jobs a beanstalk worker deleted from their tube (`tubes.settle`)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from shardq.processes.frontends.bunqueue.registry import (
    CHILDREN,
    COMPLETED,
    DELAYED,
    FAILED,
    BqJob,
)
from shardq.processes.frontends.bunqueue.render import job_record, job_with_state
from shardq.processes.frontends.bunqueue.tubes import settle, settle_queue
from shardq.processes.frontends.session import Session, Sleep, Task
from shardq.protocol import bunqueue as b
from shardq.protocol import bunqueue_args as a

if TYPE_CHECKING:
    from .loop import Frontend

COUNT_KEYS = ("waiting", "prioritized", "delayed", "active", "completed", "failed")
READY = ("waiting", "prioritized")


def found(front: Frontend, ident: Any) -> BqJob:
    j = front.registry.get(ident)
    if j is None:
        raise a.BadRequest("Job not found")
    return j


def do_get_job(front: Frontend, s: Session, req: b.Request) -> Task:
    yield from settle(front, s, [found(front, req.get("id"))])
    return b.ok(req.req_id, job=job_with_state(found(front, req.get("id"))))


def do_get_by_custom_id(front: Frontend, s: Session, req: b.Request) -> Task:
    ident = front.registry.by_custom.get(str(req.get("customId")))
    return b.ok(req.req_id, job=job_record(found(front, ident)))
    yield


def do_get_state(front: Frontend, s: Session, req: b.Request) -> Task:
    j = front.registry.get(req.get("id"))
    if j is not None:
        yield from settle(front, s, [j])
        j = front.registry.get(req.get("id"))
    return b.ok(req.req_id, id=req.get("id"), state=j.visible_state if j else "unknown")


def do_get_result(front: Frontend, s: Session, req: b.Request) -> Task:
    j = front.registry.get(req.get("id"))
    if j is None or j.state != COMPLETED:
        return b.ok(req.req_id, id=req.get("id"))
    return b.ok(req.req_id, id=req.get("id"), result=j.result)
    yield


def do_get_progress(front: Frontend, s: Session, req: b.Request) -> Task:
    j = found(front, req.get("id"))
    return b.ok(req.req_id, progress=j.progress, message=j.progress_message)
    yield


def counts(front: Frontend, queue: str) -> dict[str, int]:
    got = Counter(j.visible_state for j in front.registry.of_queue(queue))
    out = {key: got[key] for key in COUNT_KEYS}
    out["waiting-children"] = got[CHILDREN]
    out["paused"] = 0
    if queue in front.registry.paused:
        out["paused"] = out["waiting"] + out["prioritized"]
        out["waiting"] = out["prioritized"] = 0
    return out


def do_get_job_counts(front: Frontend, s: Session, req: b.Request) -> Task:
    queue = a.queue(req.args)
    yield from settle_queue(front, s, queue)
    return b.ok(req.req_id, counts=counts(front, queue))


def do_count(front: Frontend, s: Session, req: b.Request) -> Task:
    queue = a.queue(req.args)
    yield from settle_queue(front, s, queue)
    got = counts(front, queue)
    return b.ok(req.req_id, count=got["waiting"] + got["prioritized"] + got["delayed"])


def do_counts_per_priority(front: Frontend, s: Session, req: b.Request) -> Task:
    queue = a.queue(req.args)
    waiting = ("waiting", "prioritized", DELAYED)
    got = Counter(
        str(j.opts.priority) for j in front.registry.of_queue(queue) if j.visible_state in waiting
    )
    return b.ok(req.req_id, queue=queue, counts=dict(got))
    yield


def by_created(j: BqJob) -> tuple[float, str]:
    return j.created, j.id


def do_get_jobs(front: Frontend, s: Session, req: b.Request) -> Task:
    queue = a.queue(req.args)
    states = req.get("state")
    wanted = None if states is None else {states} if isinstance(states, str) else set(states)
    jobs = [
        j
        for j in front.registry.of_queue(queue)
        if wanted is None or j.visible_state in wanted or (j.state in wanted)
    ]
    jobs.sort(key=by_created, reverse=not req.get("asc", False))
    offset = int(a.number(req.get("offset"), "offset") or 0)
    limit = int(a.number(req.get("limit"), "limit") or 100)
    out = []
    for j in jobs[offset : offset + limit]:
        record = job_with_state(j)
        record["_state"] = record["state"]
        out.append(record)
    return b.ok(req.req_id, jobs=out)
    yield


def do_wait_job(front: Frontend, s: Session, req: b.Request) -> Task:
    """Wait until the job completes (its result), or its timeout (ms) passes."""
    j = found(front, req.get("id"))
    deadline = time.monotonic() + (a.number(req.get("timeout"), "timeout") or 30_000) / 1000
    front.waiters.setdefault(j.id, set()).add(s)
    try:
        while j.state not in (COMPLETED, FAILED) and (left := deadline - time.monotonic()) > 0:
            if front.registry.get(j.id) is not j:
                break
            yield Sleep(left)
    finally:
        front.unwait(j.id, s)
    if j.state == COMPLETED:
        return b.ok(req.req_id, completed=True, result=j.result)
    return b.ok(req.req_id, completed=False)


Handler = Callable[["Frontend", Session, b.Request], Task]

HANDLERS: dict[str, Handler] = {
    "GetJob": do_get_job,
    "GetJobByCustomId": do_get_by_custom_id,
    "GetState": do_get_state,
    "GetResult": do_get_result,
    "GetProgress": do_get_progress,
    "GetJobCounts": do_get_job_counts,
    "Count": do_count,
    "GetCountsPerPriority": do_counts_per_priority,
    "GetJobs": do_get_jobs,
    "WaitJob": do_wait_job,
}
