"""A bunqueue job as a journal record and back (storage/bunqueue_journal.py), and the
registry rebuilt from the journal: jobs that were active when the process ended go back
to their queue (their connections are gone, as after a disconnect)."""

from __future__ import annotations

import dataclasses
import heapq
from typing import Any

from shardq.processes.frontends.bunqueue.registry import (
    ACTIVE,
    COMPLETED,
    DELAY,
    DELAYED,
    WAITING,
    BqJob,
    Registry,
)
from shardq.protocol.bunqueue_args import JobSpec
from shardq.storage.bunqueue_journal import Paused, Record, Saved

#: BqJob fields kept (the rest is the session that holds it, and its lock)
KEPT = [
    "queue",
    "name",
    "data",
    "created",
    "run_at",
    "state",
    "job",
    "pulled_as",
    "attempts",
    "started",
    "completed",
    "stall_count",
    "progress",
    "progress_message",
    "stacktrace",
    "result",
    "failed_reason",
    "children",
    "waiting_for",
    "history",
    "entered_dlq",
]


#: JobSpec's fields (a job's options, copied shallowly: `asdict` deep-copies its data), but
#: its body (its data as JSON: made again when needed)
OPTS = [f.name for f in dataclasses.fields(JobSpec) if f.name != "body"]


def saved(j: BqJob) -> Saved:
    fields = {name: getattr(j, name) for name in KEPT}
    fields["opts"] = {name: getattr(j.opts, name) for name in OPTS}
    return Saved(j.id, fields)


def restored(ident: str, fields: dict[str, Any]) -> BqJob:
    opts = JobSpec(**fields.pop("opts"))
    j = BqJob(ident, fields["queue"], fields["name"], fields["data"], 0.0, 0.0, opts)
    for name in KEPT:
        if name in fields:
            setattr(j, name, fields[name])
    return j


def completed_at(j: BqJob) -> float:
    return j.completed or 0.0


def snapshot(reg: Registry) -> list[Record]:
    out: list[Record] = [saved(j) for j in reg.jobs.values()]
    out += [Paused(name, True) for name in sorted(reg.paused)]
    return out


def replay(reg: Registry, records: list[Record]) -> None:
    for rec in records:
        if isinstance(rec, Paused):
            (reg.paused.add if rec.paused else reg.paused.discard)(rec.queue)
            continue
        old = reg.jobs.get(rec.id)
        if old is not None:
            reg.drop(old)
        if isinstance(rec, Saved):
            reg.index(restored(rec.id, dict(rec.fields)))
    done = sorted((j for j in reg.jobs.values() if j.state == COMPLETED), key=completed_at)
    reg.completed.extend(j.id for j in done)
    for j in reg.jobs.values():
        if j.pulled_as:  # its delete may not have been done: if it comes back, it is known
            reg.by_job[j.pulled_as] = j.id
        if j.job:
            reg.by_job[j.job] = j.id
        if j.state == ACTIVE:  # its connection is gone
            j.state = WAITING
            j.job = 0
        if j.state == DELAYED:
            heapq.heappush(reg.timers, (j.run_at, DELAY, j.id))
        elif j.state == WAITING and not j.job:
            reg.ready.append(j)
