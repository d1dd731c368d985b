"""PULL and PULLB: a long poll (up to 60 s, woken by a push, a Resume, a job given back),
and pipelined pulls that do not wait (``timeout`` 0, one queue) served together: one
round trip of reserves for all of them, one of deletes."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from shardq.processes.frontends.beanstalk import Result, line, reserve_within, watch_lines
from shardq.processes.frontends.bunqueue.registry import BqJob
from shardq.processes.frontends.bunqueue.render import job_record
from shardq.processes.frontends.bunqueue.tubes import Lease, deletes_ahead, take
from shardq.processes.frontends.session import Send, Session, Sleep, Task
from shardq.protocol import bunqueue as b
from shardq.protocol import bunqueue_args as a
from shardq.protocol.reader import Reply

if TYPE_CHECKING:
    from .loop import Frontend

#: reserves sent at once for the rest of a PULLB (after its first job)
MORE_AT_ONCE = 64


@dataclass(frozen=True, slots=True)
class Pull:
    """A PULL or PULLB, its fields checked."""

    req: b.Request
    queue: str
    count: int
    wait_ms: int
    owner: Any
    lock_ttl: int
    batch: bool

    @property
    def lease(self) -> Lease:
        return self.owner, self.lock_ttl


def pull_of(req: b.Request) -> Pull:
    batch = req.cmd == "PULLB"
    return Pull(
        req,
        a.queue(req.args),
        a.pull_count(req.args) if batch else 1,
        a.wait_ms(req.args),
        req.get("owner"),
        int(a.number(req.get("lockTtl"), "lockTtl") or a.DEFAULT_LOCK_TTL),
        batch,
    )


def answer(p: Pull, jobs: list[BqJob]) -> bytes:
    if p.batch:
        records = [job_record(j) for j in jobs]
        if p.owner:
            return b.ok(p.req.req_id, jobs=records, tokens=[j.token for j in jobs])
        return b.ok(p.req.req_id, jobs=records)
    job = job_record(jobs[0]) if jobs else None
    if p.owner:
        return b.ok(p.req.req_id, job=job, token=jobs[0].token if jobs else None)
    return b.ok(p.req.req_id, job=job)


def refused(reply: Reply) -> a.BadRequest:
    return a.BadRequest(" ".join(w.decode(errors="replace") for w in reply.words).lower())


def reserve_more(s: Session, n: int) -> Result:
    """Up to `n` more ready jobs of the watched tube, without waiting."""
    got: list[Reply] = []
    while len(got) < n:
        ask = min(MORE_AT_ONCE, n - len(got))
        replies = yield Send((line("reserve-with-timeout", 0),) * ask)
        ready = [r for r in replies if r.name == b"RESERVED"]
        got += ready
        if len(ready) < ask:
            break
    return got


def pull(front: Frontend, s: Session, p: Pull) -> Result:
    """Up to `p.count` jobs of the queue, waiting up to its timeout for the first."""
    deadline = time.monotonic() + p.wait_ms / 1000
    jobs: list[BqJob] = []
    front.pullers.add(s)
    try:
        while not jobs:
            left = deadline - time.monotonic()
            if p.queue in front.registry.paused:
                if left <= 0:
                    break
                yield Sleep(left)
                continue
            done, deletes = deletes_ahead(front, s)  # (sent with the reserve)
            before = (*deletes, *watch_lines(s, (a.tube_of(p.queue),)))
            first = yield from reserve_within(s, deadline, before)
            front.registry.deleted(done)
            if first is None:
                break
            if first.name != b"RESERVED":
                raise refused(first)
            reserved = [first, *(yield from reserve_more(s, p.count - 1))]
            taken = yield from take(front, s, reserved, [p.lease] * len(reserved))
            jobs = [j for j in taken if j is not None]
            if time.monotonic() >= deadline:
                break
    finally:
        front.pullers.discard(s)
    return jobs


def do_pull(front: Frontend, s: Session, req: b.Request) -> Task:
    p = pull_of(req)
    return answer(p, (yield from pull(front, s, p)))


def quick_pulls(front: Frontend, s: Session, reqs: list[b.Request]) -> Task:
    """Pipelined pulls that do not wait, each answered in order: the valid ones of the
    first one's queue served from one round trip of reserves."""
    parsed: list[Pull | a.BadRequest] = []
    for req in reqs:
        try:
            parsed.append(pull_of(req))
        except a.BadRequest as e:
            parsed.append(e)
    pulls = [p for p in parsed if isinstance(p, Pull)]
    got: dict[int, list[BqJob]] = {id(p): [] for p in pulls}
    if pulls and pulls[0].queue not in front.registry.paused:
        done, deletes = deletes_ahead(front, s)
        yield Send((*deletes, *watch_lines(s, (a.tube_of(pulls[0].queue),))))
        front.registry.deleted(done)
        reserved = yield from reserve_more(s, sum(p.count for p in pulls))
        leases = [p.lease for p in pulls for _ in range(p.count)][: len(reserved)]
        owners = [p for p in pulls for _ in range(p.count)][: len(reserved)]
        taken = yield from take(front, s, reserved, leases)
        for p, j in zip(owners, taken, strict=True):
            if j is not None:
                got[id(p)].append(j)
    out: list[bytes] = []
    for item in parsed:
        if isinstance(item, a.BadRequest):
            out.append(b.error(str(item), reqs[len(out)].req_id))
        else:
            out.append(answer(item, got[id(item)]))
    return b"".join(out)


def is_quick_pull(cmd: object, queue: str) -> bool:
    """A PULL or PULLB of `queue` that does not wait (gathered with the ones before it)."""
    return (
        isinstance(cmd, b.Request)
        and cmd.cmd in ("PULL", "PULLB")
        and not cmd.args.get("timeout")
        and cmd.args.get("queue") == queue
    )
