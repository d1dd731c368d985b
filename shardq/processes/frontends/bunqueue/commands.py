"""Each bunqueue job command as a task (see frontends/session.py) over the registry and
the tubes: PUSH, PUSHB, PULL, PULLB, ACK, ACKB, FAIL, JobHeartbeat(B); `task_of` picks a
request's task (queries and admin in query.py and admin.py), checks Auth, and turns a
refused request (`BadRequest`) into bunqueue's error reply."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from shardq.processes.frontends.beanstalk import Result
from shardq.processes.frontends.bunqueue import admin, pulls, query, waiting
from shardq.processes.frontends.bunqueue.registry import ACTIVE, WAITING, BqJob
from shardq.processes.frontends.bunqueue.tubes import now_ms, put_jobs, requeue, retire
from shardq.processes.frontends.session import Session, Task, answer_invalid, gather
from shardq.protocol import bunqueue as b
from shardq.protocol import bunqueue_args as a
from shardq.protocol.inbuf import Invalid

if TYPE_CHECKING:
    from .loop import Frontend


def refused(reply: Any) -> str:
    if reply.name == b"OUT_OF_MEMORY":
        return "Queue is full"
    return " ".join(w.decode(errors="replace") for w in reply.words).lower()


NO_KEYS = (None, None)  #: a job with neither a custom id nor a uniqueKey: no repeat
#: what a push gives: the job's id, or why it is refused
Pushed = str | a.BadRequest


def missing_parent(front: Frontend, spec: a.JobSpec, batch_ids: set[str]) -> str | None:
    for dep in spec.depends_on:
        if front.registry.get(dep) is None and dep not in batch_ids:
            return f"Dependency job not found: {dep}"
    return None


def push_jobs(front: Frontend, s: Session, items: list[tuple[str, a.JobSpec]]) -> Result:
    """Jobs pushed (queue, spec): what each gives (a repeat: the existing job's id), in
    order, and the job each made (None: refused, or a repeat); their puts in one round
    trip and their records in one journal write."""
    reg = front.registry
    now = now_ms()
    batch_ids = {spec.custom_id for _, spec in items if spec.custom_id}
    out: list[Pushed] = []
    made: list[BqJob | None] = []
    room = front.max_memory - reg.bytes if front.max_memory else None
    for queue, spec in items:
        made.append(None)
        problem = missing_parent(front, spec, batch_ids) if spec.depends_on else None
        if room is not None:
            room -= len(repr(spec.data))
            problem = problem or ("Queue is full" if room < 0 else None)
        if problem:
            out.append(a.BadRequest(problem))
        elif (spec.custom_id, spec.unique_key) != NO_KEYS and (old := reg.duplicate(queue, spec)):
            out.append(old.id)
        else:
            made[-1] = j = reg.add(queue, spec, now)
            out.append(j.id)
    ready = [(at, j) for at, j in enumerate(made) if j is not None and j.state == WAITING]
    answers = yield from put_jobs(front, s, [j for _, j in ready])
    for (at, j), reply in zip(ready, answers, strict=True):
        if reply.name != b"INSERTED":
            reg.drop(j)
            out[at], made[at] = a.BadRequest(refused(reply)), None
    front.save(*(j for j in made if j is not None))
    return out, made


#: what a request of a gathered push is: a PUSH's job, a PUSHB's jobs, or why it is refused
Wanted = a.JobSpec | list[a.JobSpec] | a.BadRequest


def wanted(req: b.Request) -> tuple[str, Wanted]:
    """A PUSH's or PUSHB's queue and job(s), checked (a refusal in place of them)."""
    try:
        queue = a.queue(req.args)
        if req.cmd == "PUSH":
            return queue, a.job_spec(req.args, "jobId")
        return queue, a.batch_specs(req.args.get("jobs"))
    except a.BadRequest as e:
        return "", e


def pushed_reply(
    front: Frontend, s: Session, req: b.Request, got: list[Pushed], made: list[Any]
) -> Result:
    """A PUSH's answer: its id; a PUSHB's: all its ids, or (any refused) its first
    refusal, its jobs taken back (a batch is all its jobs or none)."""
    if req.cmd == "PUSH":
        if isinstance(got[0], a.BadRequest):
            return b.error(str(got[0]), req.req_id)
        return b.ok(req.req_id, id=got[0])
    problem = next((p for p in got if isinstance(p, a.BadRequest)), None)
    if problem is None:
        return b.ok(req.req_id, ids=got)
    jobs = [j for j in made if j is not None]
    yield from retire(front, s, jobs)
    for j in jobs:
        front.forget(j)
    return b.error(str(problem), req.req_id)


def do_pushes(front: Frontend, s: Session, reqs: list[b.Request]) -> Task:
    """Pipelined PUSHes and PUSHBs, pushed together (one round trip of puts: `Pushes` says
    which); each answered in order."""
    parts = [wanted(req) for req in reqs]
    items: list[tuple[str, a.JobSpec]] = []
    spans: list[tuple[int, int]] = []
    for queue, want in parts:
        first = len(items)
        if isinstance(want, a.JobSpec):
            items.append((queue, want))
        elif isinstance(want, list):
            items += [(queue, spec) for spec in want]
        spans.append((first, len(items)))
    pushed, made = (yield from push_jobs(front, s, items)) if items else ([], [])
    out = []
    for req, (_, want), (first, end) in zip(reqs, parts, spans, strict=True):
        if isinstance(want, a.BadRequest):
            out.append(b.error(str(want), req.req_id))
            continue
        got, jobs = pushed[first:end], made[first:end]
        out.append((yield from pushed_reply(front, s, req, got, jobs)))
    return b"".join(out)


def do_push(front: Frontend, s: Session, req: b.Request) -> Task:
    return (yield from do_pushes(front, s, [req]))


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
    "PUSHB": do_push,
    "PULL": waiting.do_pull,
    "PULLB": waiting.do_pull,
    "ACK": do_ack,
    "ACKB": do_ackb,
    "FAIL": do_fail,
    "JobHeartbeat": do_heartbeat,
    "JobHeartbeatB": do_heartbeatb,
    **query.HANDLERS,
    **admin.HANDLERS,
}


#: commands gathered with the ones of their kind pipelined after them
QUICK = frozenset({"PUSH", "PUSHB", "PULL", "PULLB"})


def read_command(s: Session) -> b.Request | Invalid | None:
    cmd, s.held = s.held or s.parser.next_command(), None
    return cmd


#: jobs of pipelined pushes gathered into one round trip at most: more gains no round trip
#: worth having (a PUSHB of 50 goes alone) and keeps the client's next pushes waiting
GATHER_JOBS = 64


def is_push(cmd: object) -> bool:
    return isinstance(cmd, b.Request) and cmd.cmd in ("PUSH", "PUSHB")


def jobs_of(cmd: b.Request) -> int:
    jobs = cmd.args.get("jobs") if cmd.cmd == "PUSHB" else None
    return len(jobs) if isinstance(jobs, list) else 1


class Pushes:
    """Whether a pipelined command goes with the pushes gathered so far (a push, and
    GATHER_JOBS jobs at most with it)."""

    def __init__(self, first: b.Request) -> None:
        self.jobs = jobs_of(first)

    def __call__(self, cmd: object) -> bool:
        if not (isinstance(cmd, b.Request) and is_push(cmd)):
            return False
        more = jobs_of(cmd)
        if self.jobs + more > GATHER_JOBS:
            return False
        self.jobs += more
        return True


def task_of(front: Frontend, s: Session, cmd: b.Request | Invalid) -> Task:
    """The task of a command, and of those pipelined after it that go with it (PUSHes and
    PUSHBs; pulls that do not wait, of one queue)."""
    if isinstance(cmd, Invalid):
        return answer_invalid(front, s, cmd)
    if front.tokens and s.id not in front.authed or cmd.cmd not in QUICK:
        return run(front, s, cmd)
    if is_push(cmd):
        return do_pushes(front, s, gather(s, cmd, Pushes(cmd), read_command))
    if cmd.args.get("timeout") or not isinstance(cmd.args.get("queue"), str):
        return run(front, s, cmd)
    queue = cmd.args["queue"]

    def same_queue(other: object) -> bool:
        return pulls.is_quick_pull(other, queue)

    return pulls.quick_pulls(front, s, gather(s, cmd, same_queue, read_command))


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
