"""bunqueue's connection, worker, queue and DLQ commands: Hello, Auth, Ping,
Register/UnregisterWorker, Subscribe/UnsubscribeEvents, Progress, Cancel, Pause, Resume,
IsPaused, Drain, Dlq, RetryDlq, PurgeDlq, Stats, Metrics, ListQueues."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from shardq.processes.frontends.bunqueue.registry import (
    ACTIVE,
    CHILDREN,
    DELAYED,
    FAILED,
    WAITING,
    BqJob,
)
from shardq.processes.frontends.bunqueue.render import dlq_entry, job_record
from shardq.processes.frontends.bunqueue.tubes import now_ms, requeue, retire
from shardq.processes.frontends.session import Session, Task
from shardq.protocol import bunqueue as b
from shardq.protocol import bunqueue_args as a

if TYPE_CHECKING:
    from .loop import Frontend

PROTOCOL_VERSION = 3
CAPABILITIES = ["pipelining", "separate-job-name"]
VERSION = "2.9.5"  # the bunqueue whose wire behaviour this door follows


def do_hello(front: Frontend, s: Session, req: b.Request) -> Task:
    return b.ok(
        req.req_id,
        protocolVersion=PROTOCOL_VERSION,
        capabilities=CAPABILITIES,
        server="bunqueue",
        version=VERSION,
    )
    yield


def do_auth(front: Frontend, s: Session, req: b.Request) -> Task:
    if front.tokens and req.get("token") not in front.tokens:
        raise a.BadRequest("Invalid token")
    front.authed.add(s.id)
    return b.ok(req.req_id)
    yield


def do_ping(front: Frontend, s: Session, req: b.Request) -> Task:
    return b.ok(req.req_id, data={"pong": True, "time": now_ms()})
    yield


def do_register_worker(front: Frontend, s: Session, req: b.Request) -> Task:
    now = now_ms()
    worker = {
        "workerId": str(req.get("workerId") or uuid.uuid4()),
        "name": req.get("name"),
        "queues": req.get("queues", []),
        "concurrency": req.get("concurrency", 1),
        "hostname": req.get("hostname"),
        "pid": req.get("pid"),
        "status": "active",
        "registeredAt": now,
        "lastSeen": now,
        "activeJobs": 0,
        "processedJobs": 0,
        "failedJobs": 0,
        "currentJob": None,
    }
    front.workers[worker["workerId"]] = worker
    return b.ok(req.req_id, data=b.safe(worker))
    yield


def do_unregister_worker(front: Frontend, s: Session, req: b.Request) -> Task:
    removed = front.workers.pop(str(req.get("workerId")), None) is not None
    return b.ok(req.req_id, data={"removed": removed})
    yield


def do_subscribe(front: Frontend, s: Session, req: b.Request) -> Task:
    front.subscribers[s.id] = s
    return b.ok(req.req_id)
    yield


def do_unsubscribe(front: Frontend, s: Session, req: b.Request) -> Task:
    front.subscribers.pop(s.id, None)
    return b.ok(req.req_id)
    yield


def do_progress(front: Frontend, s: Session, req: b.Request) -> Task:
    j = front.registry.get(req.get("id"))
    if j is None:
        raise a.BadRequest("Job not found")
    if j.state != ACTIVE:
        raise a.BadRequest(f"Job is not active (current state: {j.visible_state})")
    given = a.number(req.get("progress"), "progress", -(2**53), 2**53) or 0
    j.progress = min(100, max(0, given))  # accepted, and kept within 0..100
    j.progress_message = req.get("message")
    front.save(j)
    front.emit("progress", j, data=j.progress)
    return b.ok(req.req_id)
    yield


def do_cancel(front: Frontend, s: Session, req: b.Request) -> Task:
    j = front.registry.get(req.get("id"))
    if j is None or j.state not in (WAITING, DELAYED, CHILDREN):
        raise a.BadRequest("Job not found or cannot be cancelled")
    yield from retire(front, s, [j])
    front.forget(j)
    return b.ok(req.req_id)


def do_pause(front: Frontend, s: Session, req: b.Request) -> Task:
    front.set_paused(a.queue(req.args), True)
    return b.ok(req.req_id)
    yield


def do_resume(front: Frontend, s: Session, req: b.Request) -> Task:
    front.set_paused(a.queue(req.args), False)
    return b.ok(req.req_id)
    yield


def do_is_paused(front: Frontend, s: Session, req: b.Request) -> Task:
    return b.ok(req.req_id, paused=a.queue(req.args) in front.registry.paused)
    yield


def do_drain(front: Frontend, s: Session, req: b.Request) -> Task:
    """Waiting and delayed jobs removed (active ones kept)."""
    gone = [j for j in front.registry.of_queue(a.queue(req.args)) if j.state in (WAITING, DELAYED)]
    yield from retire(front, s, gone)
    for j in gone:
        front.forget(j)
    return b.ok(req.req_id, count=len(gone))


def dead(front: Frontend, queue: str) -> list[BqJob]:
    jobs = [j for j in front.registry.of_queue(queue) if j.state == FAILED]
    jobs.sort(key=entered)
    return jobs


def entered(j: BqJob) -> float:
    return j.entered_dlq or 0


def do_dlq(front: Frontend, s: Session, req: b.Request) -> Task:
    jobs = dead(front, a.queue(req.args))
    count = a.number(req.get("count"), "count")
    if count is not None:
        jobs = jobs[: int(count)]
    return b.ok(
        req.req_id, jobs=[job_record(j) for j in jobs], entries=[dlq_entry(j) for j in jobs]
    )
    yield


def do_retry_dlq(front: Frontend, s: Session, req: b.Request) -> Task:
    jobs = dead(front, a.queue(req.args))
    if req.get("jobId") is not None:
        jobs = [j for j in jobs if j.id == str(req.get("jobId"))]
    for j in jobs:
        front.registry.revive(j)
    front.registry.ready = [j for j in front.registry.ready if j not in jobs]
    yield from requeue(front, s, jobs)
    return b.ok(req.req_id, count=len(jobs))


def do_purge_dlq(front: Frontend, s: Session, req: b.Request) -> Task:
    jobs = dead(front, a.queue(req.args))
    for j in jobs:
        front.forget(j)
    return b.ok(req.req_id, count=len(jobs))
    yield


def do_list_queues(front: Frontend, s: Session, req: b.Request) -> Task:
    return b.ok(req.req_id, queues=list(front.registry.queues))
    yield


def do_stats(front: Frontend, s: Session, req: b.Request) -> Task:
    states = [j.state for j in front.registry.jobs.values()]
    uptime = time.time() - front.started
    totals = front.registry.totals
    stats = {
        "waiting": states.count(WAITING),
        "active": states.count(ACTIVE),
        "delayed": states.count(DELAYED),
        "dlq": states.count(FAILED),
        "completed": totals["completed"],
        "failed": totals["failed"],
        "uptime": uptime * 1000,
        "pushPerSec": totals["pushed"] / max(uptime, 1),
        "pullPerSec": totals["pulled"] / max(uptime, 1),
    }
    return b.ok(req.req_id, stats=stats)
    yield


def do_metrics(front: Frontend, s: Session, req: b.Request) -> Task:
    totals = front.registry.totals
    metrics = {
        "totalPushed": totals["pushed"],
        "totalPulled": totals["pulled"],
        "totalCompleted": totals["completed"],
        "totalFailed": totals["failed"],
        "avgLatencyMs": 0,
        "avgProcessingMs": 0,
        "memoryUsageMb": front.registry.bytes / 1e6,
        "sqliteSizeMb": 0,
        "activeConnections": front.clients(),
    }
    return b.ok(req.req_id, metrics=b.safe(metrics))
    yield


Handler = Callable[["Frontend", Session, b.Request], Task]

HANDLERS: dict[str, Handler] = {
    "Hello": do_hello,
    "Auth": do_auth,
    "Ping": do_ping,
    "RegisterWorker": do_register_worker,
    "UnregisterWorker": do_unregister_worker,
    "SubscribeEvents": do_subscribe,
    "UnsubscribeEvents": do_unsubscribe,
    "Progress": do_progress,
    "Cancel": do_cancel,
    "Pause": do_pause,
    "Resume": do_resume,
    "IsPaused": do_is_paused,
    "Drain": do_drain,
    "Dlq": do_dlq,
    "RetryDlq": do_retry_dlq,
    "PurgeDlq": do_purge_dlq,
    "ListQueues": do_list_queues,
    "Stats": do_stats,
    "Metrics": do_metrics,
}
