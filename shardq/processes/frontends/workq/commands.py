"""Each Workq command as beanstalk operations on the session's private connection, and
the registry of what beanstalk cannot hold (registry.py).

One named task per command (`HANDLERS`), a generator (see frontends/session.py). A Workq
job name is the tube of the same name; a job waiting to be leased is a beanstalk job in it
(priority: Workq's reversed, so higher goes first; TTR: Workq's, rounded up to seconds).
A lease reserves and deletes it at once — Workq's leases outlive connections and end by
the front-end's own timer, to the millisecond — and a lease that ends puts it back. The
table of what maps to what is docs/PROTOCOLS.md.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from shardq.processes.common import outofmemory
from shardq.processes.frontends.beanstalk import (
    Result,
    line,
    now_ms,
    put_line,
    reserve_within,
    use_lines,
    watch_lines,
    yaml_map,
)
from shardq.processes.frontends.registered import known_job, putting
from shardq.processes.frontends.session import Send, Session, Sleep, Task, answer_invalid
from shardq.processes.frontends.workq.registry import LEASED, WorkqJob
from shardq.protocol import workq_args as a
from shardq.protocol import workq_replies as r
from shardq.protocol.reader import Reply
from shardq.protocol.workq import Invalid
from shardq.storage.workq_journal import Added

from .inspect import do_inspect

if TYPE_CHECKING:
    from .loop import Frontend

#: Beanstalk priority of a Workq priority: reversed (Workq's highest goes first).
TOP_PRIORITY = (1 << 31) - 1
#: A job put through beanstalk and leased through Workq gets this ttl (Workq's largest).
ADOPTED_TTL_MS = a.MAX_TTL_MS


def beanstalk_pri(priority: int) -> int:
    return TOP_PRIORITY - priority


def seconds_up(ms: int) -> int:
    return max(1, -(-ms // 1000))


def failed(reply: Reply) -> bytes:
    """A beanstalk answer a command did not expect, as a Workq SERVER-ERROR."""
    return r.server_error(b" ".join(reply.words).decode(errors="replace").lower())


def requeue(front: Frontend, s: Session, j: WorkqJob) -> Result:
    """Put the job in its tube again (after a lease, or a failure that is retried)."""
    f = j.fixed
    put = put_line(beanstalk_pri(f.priority), 0, seconds_up(f.ttr), f.payload)
    replies = yield from putting(front, (*use_lines(s, f.name), put))
    if replies[-1].name == b"INSERTED":
        front.registry.queued(j, replies[-1].number())
    else:  # the server is full: the job cannot wait any more, it fails
        front.fail_for_good(j)
    front.changed(j)


def retire(front: Frontend, s: Session, j: WorkqJob) -> Result:
    """Take the job out of its tube, if it waits there."""
    job = front.registry.unqueue(j)
    if job:
        front.retired.add(job)
        replies = yield Send((line("delete", job),))
        if replies[0].name == b"DELETED":
            front.retired.discard(job)


def do_add(front: Frontend, s: Session, cmd: a.Add) -> Task:
    """add, schedule, or run (an add that then waits for its result)."""
    answer = yield from do_adds(front, s, [cmd])
    j = front.registry.get(cmd.id)
    if cmd.wait_ms is None or answer != r.OK or j is None:
        return answer
    return (yield from run_wait(front, s, j, cmd.wait_ms))


def do_adds(front: Frontend, s: Session, cmds: list[a.Add]) -> Task:
    """Consecutive adds (and schedules) the client pipelined, as one batch of beanstalk puts
    (one round trip) and one journal write; their answers in order."""
    now = now_ms()
    lines: list[bytes] = []
    parts: list[tuple[WorkqJob | None, int]] = []  # (the new job, its beanstalk lines)
    for cmd in cmds:
        if front.registry.get(cmd.id) is not None:  # a batch's own repeats too
            parts.append((None, 0))
            continue
        if front.max_memory and front.registry.bytes + len(cmd.payload) > front.max_memory:
            parts.append((None, -1))  # the registry is full (limits.max_memory)
            continue
        fixed = Added(
            cmd.id,
            cmd.name,
            cmd.ttr,
            cmd.ttl,
            cmd.payload,
            cmd.priority,
            cmd.max_attempts,
            cmd.max_fails,
            now,
            cmd.at,
            cmd.is_run,
        )
        delay = -(-(cmd.at - now) // 1000) if cmd.at > now else 0
        use = use_lines(s, cmd.name)
        lines += (
            *use,
            put_line(beanstalk_pri(cmd.priority), delay, seconds_up(cmd.ttr), cmd.payload),
        )
        parts.append((front.registry.add(fixed), len(use) + 1))
    replies = (yield from putting(front, tuple(lines))) if lines else []
    answers: list[bytes] = []
    kept: list[WorkqJob] = []
    at = 0
    for j, n in parts:
        if j is None:
            answers.append(r.DUPLICATE_JOB if n == 0 else r.FULL)
            continue
        at += n
        reply = replies[at - 1]
        if reply.name != b"INSERTED":
            front.registry.drop(j)
            answers.append(put_refused(reply))
            continue
        front.registry.queued(j, reply.number())
        kept.append(j)
        answers.append(r.OK)
    try:
        front.journal_many([rec for j in kept for rec in (j.fixed, j.changed())])
    except (OSError, MemoryError) as e:  # not kept: not accepted
        for j in kept:
            yield from retire(front, s, j)
            front.registry.drop(j)
        if isinstance(e, OSError):
            error = r.server_error(f"journal: {e.strerror}")
        else:
            outofmemory.note(f"session {s.id}'s adds, written to the journal; answered so")
            error = r.OUT_OF_MEMORY
        answers = [error if answer == r.OK else answer for answer in answers]
    return b"".join(answers)


def put_refused(reply: Reply) -> bytes:
    """What an add answers when its put is refused."""
    if reply.name == b"OUT_OF_MEMORY":
        return r.FULL
    if reply.name == b"JOB_TOO_BIG":  # past the server's max_job_size (-z)
        return r.INVALID_PAYLOAD_SIZE
    if reply.name == b"DRAINING":
        return r.server_error("draining")
    return failed(reply)


def run_wait(front: Frontend, s: Session, j: WorkqJob, wait_ms: int) -> Task:
    """`run`: wait for the job's result until wait-timeout, or until its TTR if a worker
    holds it then; the job goes when the run ends, whatever its end."""
    deadline = time.monotonic() + wait_ms / 1000
    extended = False
    front.waiters.setdefault(j.id, set()).add(s)
    front.runs[s.id] = j
    try:
        while not j.done and front.registry.get(j.id) is j:
            left = deadline - time.monotonic()
            if left <= 0:
                if j.state is not LEASED or extended:
                    break
                extended = True  # a worker has it: wait for it until its TTR
                deadline = time.monotonic() + max(0, j.deadline - now_ms()) / 1000
                continue
            yield Sleep(left)
    finally:
        front.unwait(j.id, s)
        front.runs.pop(s.id, None)
    answer = r.result(j.id, j.success, j.result or b"") if j.done else r.TIMEOUT
    if front.registry.get(j.id) is j:
        yield from retire(front, s, j)
        front.forget(j)
    return answer


def do_result(front: Frontend, s: Session, cmd: a.Result) -> Task:
    j = front.registry.get(cmd.id)
    if j is None:
        return r.NOT_FOUND
    deadline = time.monotonic() + cmd.wait_ms / 1000
    front.waiters.setdefault(j.id, set()).add(s)
    try:
        while not j.done and (left := deadline - time.monotonic()) > 0:
            if front.registry.get(j.id) is not j:
                return r.NOT_FOUND
            yield Sleep(left)
    finally:
        front.unwait(j.id, s)
    return r.result(j.id, j.success, j.result or b"") if j.done else r.TIMEOUT


def do_lease(front: Frontend, s: Session, cmd: a.Lease) -> Task:
    deadline = time.monotonic() + cmd.wait_ms / 1000
    before = watch_lines(s, cmd.names)
    while True:
        answer = yield from reserve_within(s, deadline, before)
        before = ()
        if answer is None:
            return r.TIMEOUT
        if answer.name != b"RESERVED":
            return failed(answer)
        job, body = answer.number(), answer.body or b""
        ident = yield from known_job(front, job)
        if job in front.retired:  # completed or deleted while this reserve was under way
            front.retired.discard(job)
            yield Send((line("delete", job),))
            continue
        if ident is None:  # put through beanstalk: it becomes a Workq job here
            replies = yield Send((line("stats-job", job),))
            j = adopt(front, job, body, yaml_map(replies[0].body))
        elif (found := front.registry.get(ident)) is not None:
            j = found
        else:  # deleted meanwhile
            yield Send((line("delete", job),))
            continue
        # the lease is journaled before its job leaves the tube, naming that beanstalk job
        # until the delete is answered: after a crash in between, the replay deletes it
        # (`delete_leftovers`), and the job comes back by its lease's end, as itself
        leased = front.registry.lease(j, now_ms())
        front.changed(j)
        replies = yield Send((line("delete", job),))
        if replies[0].name == b"DELETED":
            front.registry.deleted(j, job)
        if not leased:  # no attempts left: it failed
            front.notify(j.id)
            continue
        return r.leased(j.id, j.fixed.name, j.fixed.ttr, j.fixed.payload)


def adopt(front: Frontend, job: int, body: bytes, stats: dict[str, str]) -> WorkqJob:
    """A job put through the beanstalk door, leased through Workq's: a Workq job with an id
    of its own, its tube's name and its TTR."""
    ttr = min(int(stats.get("ttr", "1")) * 1000, a.MAX_TTR_MS)
    fixed = Added(
        str(uuid.uuid4()),
        stats.get("tube", "default"),
        ttr,
        ADOPTED_TTL_MS,
        body,
        0,
        0,
        0,
        now_ms(),
        0,
        False,
    )
    j = front.registry.add(fixed)
    front.registry.queued(j, job)  # the lease takes it from there (`leased_as`)
    front.journal(fixed)
    return j


def do_finish(front: Frontend, s: Session, cmd: a.Finish) -> Task:
    j = front.registry.get(cmd.id)
    if j is None:
        return r.NOT_FOUND
    if j.done:
        return r.DUPLICATE_RESULT
    yield from retire(front, s, j)
    if front.registry.finish(j, cmd.success, cmd.result):
        yield from requeue(front, s, j)
        return r.OK
    front.changed(j)
    front.notify(j.id)
    return r.OK


def do_delete(front: Frontend, s: Session, cmd: a.Delete) -> Task:
    j = front.registry.get(cmd.id)
    if j is None:
        return r.NOT_FOUND
    yield from retire(front, s, j)
    front.forget(j)
    return r.OK


def delete_leftovers(front: Frontend, s: Session, jobs: list[WorkqJob]) -> Result:
    """Delete the beanstalk jobs the journal's leases took and may not have deleted (the
    process ended first): one back in its tube is not leased meanwhile (`retired`)."""
    ids = [j.leased_as for j in jobs]
    front.retired.update(ids)
    replies = yield Send(tuple(line("delete", job) for job in ids))
    for j, job, reply in zip(jobs, ids, replies, strict=True):
        if reply.name == b"DELETED":
            front.retired.discard(job)
        front.registry.deleted(j, job)  # NOT_FOUND: deleted before, or a reserve has it


def housekeeping(front: Frontend, s: Session) -> Task:
    """The janitor's task: the tube entries of the journal's leases are deleted; jobs the
    journal left with no tube entry, and leases past their TTR, go back to their tube (or
    fail, past max-attempts); jobs past their ttl go, result and all (counted as evicted if
    they were not done)."""
    leftovers = front.registry.take_leftovers()
    if leftovers:
        yield from delete_leftovers(front, s, leftovers)
    todo = front.registry.take_orphans()
    ended, expired = front.registry.due(now_ms())
    for j in ended:
        if front.registry.lease_ended(j):
            todo.append(j)
        else:
            front.changed(j)
            front.notify(j.id)
    # what is left of these if the janitor's server connection goes midway is given back
    # (Frontend.closed): requeued or retired by the next janitor, never stranded
    front.janitor_work = (todo, expired)
    while todo:
        yield from requeue(front, s, todo[0])
        todo.pop(0)
    while expired:
        j = expired[0]
        yield from retire(front, s, j)
        if not j.done:
            front.registry.evicted += 1
        front.forget(j)
        expired.pop(0)
    return None


Handler = Callable[["Frontend", Session, Any], Task]

HANDLERS: dict[type, Handler] = {
    a.Add: do_add,
    a.Result: do_result,
    a.Lease: do_lease,
    a.Finish: do_finish,
    a.Delete: do_delete,
    a.Inspect: do_inspect,
    Invalid: answer_invalid,
}
