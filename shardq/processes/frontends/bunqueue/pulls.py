"""PULL and PULLB: a long poll (up to 60 s, woken by a push, a Resume, a job given back;
waiting.py lets it wait on a connection of its own), and pipelined pulls that do not wait
(``timeout`` 0, one queue) served together: one round trip of reserves for all of them,
one of deletes; jobs in bunqueue's order where a queue has lifo jobs (`lifo_first`)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from shardq.processes.frontends.beanstalk import (
    Result,
    line,
    reserve_within,
    watch_lines,
    yaml_map,
)
from shardq.processes.frontends.bunqueue.registry import WAITING, BqJob
from shardq.processes.frontends.bunqueue.render import job_record
from shardq.processes.frontends.bunqueue.tubes import (
    PRI_BASE,
    Lease,
    deletes_ahead,
    now_ms,
    take,
)
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
    deadline: float  # monotonic s: when a waiting pull ends

    @property
    def lease(self) -> Lease:
        return self.owner, self.lock_ttl


def pull_of(req: b.Request) -> Pull:
    batch = req.cmd == "PULLB"
    wait = a.wait_ms(req.args)
    return Pull(
        req,
        a.queue(req.args),
        a.pull_count(req.args) if batch else 1,
        wait,
        req.get("owner"),
        int(a.number(req.get("lockTtl"), "lockTtl") or a.DEFAULT_LOCK_TTL),
        batch,
        time.monotonic() + wait / 1000,
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


def reserve_more(s: Session, n: int, before: tuple[bytes, ...] = ()) -> Result:
    """Up to `n` more ready jobs of the watched tube, without waiting. `before`: lines sent
    ahead of the first reserves in the same round trip (their answers are not looked at)."""
    got: list[Reply] = []
    while len(got) < n:
        ask = min(MORE_AT_ONCE, n - len(got))
        replies = yield Send((*before, *(line("reserve-with-timeout", 0),) * ask))
        if before:
            replies, before = replies[len(before) :], ()
        ready = [r for r in replies if r.name == b"RESERVED"]
        got += ready
        if len(ready) < ask:
            break
    return got


def past_ttl(j: BqJob, now: float) -> bool:
    """A waiting job past its `ttl` (counted from its creation)."""
    return j.opts.ttl is not None and j.state == WAITING and now >= j.created + j.opts.ttl


def expired(front: Frontend, reply: Reply, now: float) -> BqJob | None:
    """The reserved job, if it is a bunqueue job past its `ttl`."""
    j = front.registry.get(front.registry.by_job.get(reply.number()))
    return j if j is not None and past_ttl(j, now) else None


def unexpired(front: Frontend, s: Session, reserved: list[Reply]) -> Result:
    """The reserved jobs but those past their `ttl`, which are dropped (as bunqueue drops
    them when a pull meets them), their places filled from the tube."""
    out: list[Reply] = []
    while reserved:
        now = now_ms()
        gone: list[int] = []
        for reply in reserved:
            j = expired(front, reply, now)
            if j is None:
                out.append(reply)
                continue
            front.forget(j)
            gone.append(reply.number())
        if not gone:
            break
        yield Send(tuple(line("delete", job) for job in gone))
        reserved = yield from reserve_more(s, len(gone))
    return out


def priorities(front: Frontend, reserved: list[Reply]) -> Result:
    """bunqueue's priority of each reserved job (a job put through beanstalk: asked)."""
    out: list[int | None] = []
    for reply in reserved:
        j = front.registry.get(front.registry.by_job.get(reply.number()))
        out.append(None if j is None else j.opts.priority)
    unknown = [at for at, prio in enumerate(out) if prio is None]
    if unknown:
        stats = yield Send(tuple(line("stats-job", reserved[at].number()) for at in unknown))
        for at, reply in zip(unknown, stats, strict=True):
            out[at] = PRI_BASE - int(yaml_map(reply.body).get("pri", PRI_BASE))
    return out


def is_lifo(front: Frontend, reply: Reply) -> bool:
    j = front.registry.get(front.registry.by_job.get(reply.number()))
    return j is not None and j.opts.lifo


def lifo_first(front: Frontend, s: Session, queue: str, reserved: list[Reply]) -> Result:
    """The reserved jobs (as the tube serves them: priority, then oldest) in bunqueue's
    order: at each priority its lifo jobs newest first (reserved by id: `reserve-job`),
    then the others; the jobs that leaves over are released (back in their place)."""
    prios = yield from priorities(front, reserved)
    now = now_ms()
    groups: dict[int, list[int]] = {}
    mine: dict[int, Reply] = {}
    pri_of: dict[int, int] = {}
    for reply, prio in zip(reserved, prios, strict=True):
        job = reply.number()
        groups.setdefault(prio, []).append(job)
        mine[job], pri_of[job] = reply, prio
    wanted: dict[int, list[int]] = {}  # priority -> its jobs to serve, best first
    for prio, group in groups.items():
        lifo = front.registry.newest_lifo(queue, prio, len(group))
        newest = [j.job for j in lifo if not past_ttl(j, now)]  # (dropped when reserved)
        rest = [job for job in group if not is_lifo(front, mine[job])]
        wanted[prio] = (newest + rest)[: len(group)]
        pri_of.update((job, prio) for job in newest)
    fetch = [job for jobs in wanted.values() for job in jobs if job not in mine]
    if fetch:
        got = yield Send(tuple(line("reserve-job", job) for job in fetch))
        mine.update((job, r) for job, r in zip(fetch, got, strict=True) if r.name == b"RESERVED")
    served: list[int] = []
    for prio, group in groups.items():  # a job another took meanwhile: the next one instead
        ranked = [*wanted[prio], *(job for job in group if job not in wanted[prio])]
        served += [job for job in ranked if job in mine][: len(group)]
    chosen = set(served)
    left = [job for job in mine if job not in chosen]
    if left:
        yield Send(tuple(line("release", job, PRI_BASE - pri_of[job], 0) for job in left))
    return [mine[job] for job in served]


def pull(front: Frontend, s: Session, p: Pull, holder: int = 0, wait: bool = True) -> Result:
    """Up to `p.count` jobs of the queue, waiting up to its timeout for the first (`wait`
    False: what is there now); `holder`: the client session they are given to (0: `s`)."""
    deadline = p.deadline if wait else time.monotonic()
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
            reserved = yield from unexpired(front, s, reserved)
            if p.queue in front.registry.lifo:
                reserved = yield from lifo_first(front, s, p.queue, reserved)
            taken = yield from take(front, s, reserved, [p.lease] * len(reserved), holder)
            jobs = [j for j in taken if j is not None]
            if time.monotonic() >= deadline:
                break
    finally:
        front.pullers.discard(s)
    return jobs


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
        ahead = (*deletes, *watch_lines(s, (a.tube_of(pulls[0].queue),)))
        reserved = yield from reserve_more(s, sum(p.count for p in pulls), ahead)  # one trip
        front.registry.deleted(done)
        reserved = yield from unexpired(front, s, reserved)
        if pulls[0].queue in front.registry.lifo:
            reserved = yield from lifo_first(front, s, pulls[0].queue, reserved)
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
