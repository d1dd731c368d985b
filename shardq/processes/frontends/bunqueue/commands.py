"""Each bunqueue job command as a task (see frontends/session.py) over the registry and
the tubes: PUSH, PUSHB, PULL, PULLB, ACK, ACKB, FAIL, JobHeartbeat(B); `task_of` picks a
request's task (queries and admin in query.py and admin.py), checks Auth, and turns a
refused request (`BadRequest`) into bunqueue's error reply."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from shardq.processes.frontends.beanstalk import Result, line, reserve_within, watch_lines
from shardq.processes.frontends.bunqueue import admin, query
from shardq.processes.frontends.bunqueue.registry import ACTIVE, WAITING, BqJob
from shardq.processes.frontends.bunqueue.render import job_record
from shardq.processes.frontends.bunqueue.tubes import now_ms, put_jobs, requeue, retire, take
from shardq.processes.frontends.session import Send, Session, Sleep, Task, answer_invalid
from shardq.protocol import bunqueue as b
from shardq.protocol import bunqueue_args as a
from shardq.protocol.inbuf import Invalid

if TYPE_CHECKING:
    from .loop import Frontend

#: reserves sent at once for the rest of a PULLB (after its first job)
MORE_AT_ONCE = 64


def refused(reply: Any) -> str:
    if reply.name == b"OUT_OF_MEMORY":
        return "Queue is full"
    return " ".join(w.decode(errors="replace") for w in reply.words).lower()


def push_jobs(front: Frontend, s: Session, queue: str, specs: list[a.JobSpec]) -> Result:
    """Jobs pushed: the id of each (a repeat's: the existing one), in order; their puts in
    one round trip and their records in one journal write. An error refuses them all."""
    reg = front.registry
    for spec in specs:
        for dep in spec.depends_on:
            if reg.get(dep) is None and dep not in {x.custom_id for x in specs}:
                raise a.BadRequest(f"Dependency job not found: {dep}")
    if front.max_memory and reg.bytes + sum(len(repr(x.data)) for x in specs) > front.max_memory:
        raise a.BadRequest("Queue is full")
    now = now_ms()
    ids: list[str] = []
    new: list[BqJob] = []
    for spec in specs:
        old = reg.duplicate(queue, spec)
        if old is not None:
            ids.append(old.id)
            continue
        j = reg.add(queue, spec, now)
        ids.append(j.id)
        new.append(j)
    ready = [j for j in new if j.state == WAITING]
    answers = yield from put_jobs(front, s, ready)
    for reply in answers:
        if reply.name != b"INSERTED":
            for gone in new:
                reg.drop(gone)
            yield from retire(front, s, new)
            raise a.BadRequest(refused(reply))
    front.save(*new)
    return ids


def do_push(front: Frontend, s: Session, req: b.Request) -> Task:
    queue = a.queue(req.args)
    ids = yield from push_jobs(front, s, queue, [a.job_spec(req.args, "jobId")])
    return b.ok(req.req_id, id=ids[0])


def do_pushb(front: Frontend, s: Session, req: b.Request) -> Task:
    queue = a.queue(req.args)
    ids = yield from push_jobs(front, s, queue, a.batch_specs(req.args.get("jobs")))
    return b.ok(req.req_id, ids=ids)


def pull(front: Frontend, s: Session, req: b.Request, count: int) -> Result:
    """Up to `count` jobs of the queue, waiting up to `timeout` ms for the first."""
    queue = a.queue(req.args)
    wait = a.wait_ms(req.args)
    owner = req.get("owner")
    lock_ttl = int(a.number(req.get("lockTtl"), "lockTtl") or a.DEFAULT_LOCK_TTL)
    deadline = time.monotonic() + wait / 1000
    jobs: list[BqJob] = []
    front.pullers.add(s)
    try:
        while not jobs:
            left = deadline - time.monotonic()
            if queue in front.registry.paused:
                if left <= 0:
                    break
                yield Sleep(left)
                continue
            before = watch_lines(s, (a.tube_of(queue),))  # (sent with the reserve)
            first = yield from reserve_within(s, deadline, before)
            if first is None:
                break
            if first.name != b"RESERVED":
                raise a.BadRequest(refused(first))
            reserved = [first]
            while len(reserved) < count:
                n = min(MORE_AT_ONCE, count - len(reserved))
                more = yield Send((line("reserve-with-timeout", 0),) * n)
                got = [r for r in more if r.name == b"RESERVED"]
                reserved += got
                if len(got) < n:
                    break
            jobs = yield from take(front, s, reserved, owner, lock_ttl, now_ms())
            if time.monotonic() >= deadline:
                break
    finally:
        front.pullers.discard(s)
    return jobs


def do_pull(front: Frontend, s: Session, req: b.Request) -> Task:
    jobs = yield from pull(front, s, req, 1)
    job = job_record(jobs[0]) if jobs else None
    if req.get("owner"):
        return b.ok(req.req_id, job=job, token=jobs[0].token if jobs else None)
    return b.ok(req.req_id, job=job)


def do_pullb(front: Frontend, s: Session, req: b.Request) -> Task:
    jobs = yield from pull(front, s, req, a.pull_count(req.args))
    records = [job_record(j) for j in jobs]
    if req.get("owner"):
        return b.ok(req.req_id, jobs=records, tokens=[j.token for j in jobs])
    return b.ok(req.req_id, jobs=records)


def acked(front: Frontend, j: BqJob, result: Any, remove: bool) -> list[BqJob]:
    """The job completed: its record kept with its result (or dropped), its waiters and
    subscribers told; the jobs that waited for it, ready."""
    ready = front.registry.ack(j, b.safe(result), now_ms())
    front.emit("completed", j, returnvalue=j.result)
    if remove or j.opts.remove_on_complete:
        front.forget(j)
        return ready
    front.save(j)
    front.notify(j.id)
    for old in front.registry.kept(j):
        front.forget(old)
    return ready


def do_ack(front: Frontend, s: Session, req: b.Request) -> Task:
    ident = req.get("id")
    j = front.registry.get(ident)
    problem = front.registry.lock_error(j, ident, req.get("token"))
    if problem or j is None:
        raise a.BadRequest(problem or "Job not found")
    ready = acked(front, j, req.args.get("result"), bool(req.get("removeOnComplete")))
    if ready:
        yield from requeue(front, s, ready)
    return b.ok(req.req_id)


def listed(req: b.Request, key: str, n: int) -> list[Any]:
    values = req.args.get(key)
    if values is None:
        return [None] * n
    if not isinstance(values, list) or len(values) != n:
        raise a.BadRequest(f"ACKB {key} length must match ids length")
    return values


def do_ackb(front: Frontend, s: Session, req: b.Request) -> Task:
    ids = a.ids_of(req.args.get("ids"))
    tokens = listed(req, "tokens", len(ids))
    results = listed(req, "results", len(ids))
    reg = front.registry
    for ident, tok in zip(ids, tokens, strict=True):
        problem = reg.lock_error(reg.get(ident), ident, tok)
        if problem:
            raise a.BadRequest(problem)
    ready: list[BqJob] = []
    for ident, result in zip(ids, results, strict=True):
        j = reg.get(ident)
        if j is not None and j.state == ACTIVE:  # (a repeated id: done once)
            ready += acked(front, j, result, False)
    if ready:
        yield from requeue(front, s, ready)
    return b.ok(req.req_id)


def do_fail(front: Frontend, s: Session, req: b.Request) -> Task:
    ident = req.get("id")
    j = front.registry.get(ident)
    problem = front.registry.lock_error(j, ident, req.get("token"))
    if problem or j is None:
        raise a.BadRequest(problem or "Job not found")
    error = str(req.get("error", ""))
    retried = front.registry.fail(j, error, req.args.get("stack"), now_ms())
    front.emit("failed", j, error=error)
    if retried:
        front.emit("retried", j)
    if not retried and (req.get("removeOnFail") or j.opts.remove_on_fail):
        front.forget(j)
    else:
        front.save(j)
        front.notify(j.id)
    return b.ok(req.req_id)
    yield


def heartbeat(front: Frontend, ident: Any, tok: Any, ttl: Any) -> bool:
    j = front.registry.get(ident)
    if j is None or j.state != ACTIVE or (j.token is not None and tok != j.token):
        return False
    now = now_ms()
    j.heartbeat = now
    if j.token is not None:
        lock = a.number(ttl, "duration") or j.lock_ttl or a.DEFAULT_LOCK_TTL
        front.registry.lock(j, int(lock), now)
    return True


def do_heartbeat(front: Frontend, s: Session, req: b.Request) -> Task:
    if not heartbeat(front, req.get("id"), req.get("token"), req.get("duration")):
        raise a.BadRequest(f"Job not found or not in processing state: {req.get('id')}")
    return b.ok(req.req_id, data={"ok": True})
    yield


def do_heartbeatb(front: Frontend, s: Session, req: b.Request) -> Task:
    ids = a.ids_of(req.args.get("ids"))
    tokens = req.args.get("tokens") or [None] * len(ids)
    n = sum(heartbeat(front, i, t, None) for i, t in zip(ids, tokens, strict=False))
    return b.ok(req.req_id, data={"ok": True, "count": n})
    yield


def housekeeping(front: Frontend, s: Session) -> Task:
    """The janitor's task: delayed jobs whose time came, and released ones, go to their
    tube; locks past their time end (the job is queued again with one more attempt)."""
    ready, stalled = front.registry.due(now_ms())
    for j in stalled:
        front.registry.stalled(j, now_ms())
        front.emit("stalled", j)
        if j.state != WAITING:
            front.save(j)
    todo = ready + front.registry.take_ready()
    front.janitor_work = todo  # given back if the janitor's connection goes midway
    if todo:
        yield from requeue(front, s, todo)
    front.janitor_work = []
    return None


Handler = Callable[["Frontend", Session, b.Request], Task]

HANDLERS: dict[str, Handler] = {
    "PUSH": do_push,
    "PUSHB": do_pushb,
    "PULL": do_pull,
    "PULLB": do_pullb,
    "ACK": do_ack,
    "ACKB": do_ackb,
    "FAIL": do_fail,
    "JobHeartbeat": do_heartbeat,
    "JobHeartbeatB": do_heartbeatb,
    **query.HANDLERS,
    **admin.HANDLERS,
}


def task_of(front: Frontend, s: Session, cmd: b.Request | Invalid) -> Task:
    if isinstance(cmd, Invalid):
        return answer_invalid(front, s, cmd)
    return run(front, s, cmd)


def run(front: Frontend, s: Session, req: b.Request) -> Task:
    if front.tokens and s.id not in front.authed and req.cmd != "Auth":
        return b.error("Not authenticated", req.req_id)
    handler = HANDLERS.get(req.cmd)
    if handler is None:
        return b.error(f"Unknown command: {req.cmd}", req.req_id)
    try:
        return (yield from handler(front, s, req))
    except a.BadRequest as e:
        return b.error(str(e), req.req_id)
