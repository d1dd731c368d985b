"""Workq's `inspect` commands: the server, queues (from beanstalk's `list-tubes` and
`stats-tube`: every job of the tube, whatever its door) and jobs (from the registry: the
Workq jobs only)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from shardq.processes.frontends.beanstalk import Result, line, now_ms, yaml_list, yaml_map
from shardq.processes.frontends.session import Send, Session, Task
from shardq.processes.frontends.workq.registry import WorkqJob
from shardq.protocol import workq_args as a
from shardq.protocol import workq_replies as r

if TYPE_CHECKING:
    from .loop import Frontend


def do_inspect(front: Frontend, s: Session, cmd: a.Inspect) -> Task:
    if cmd.what == "server":
        pairs: list[tuple[str, object]] = [
            ("active-clients", front.clients()),
            ("evicted-jobs", front.registry.evicted),
            ("started", time.strftime(a.TIME_FORMAT, time.gmtime(front.started))),
        ]
        return r.inspected([r.block("server", pairs)])
    if cmd.what == "job":
        j = front.registry.get(cmd.name)
        return r.NOT_FOUND if j is None else r.inspected([job_block(j)])
    if cmd.what == "queues":
        replies = yield Send((line("list-tubes"),))
        names = sorted(yaml_list(replies[0].body))[cmd.offset : cmd.offset + cmd.limit]
        found = yield from queue_blocks(s, names)
        return r.inspected(found)
    found = yield from queue_blocks(s, [cmd.name])
    if not found:
        return r.NOT_FOUND
    if cmd.what == "queue":
        return r.inspected(found)
    jobs = front.registry.listed(cmd.name, cmd.what == "scheduled-jobs", now_ms())
    return r.inspected(job_block(j) for j in jobs[cmd.offset : cmd.offset + cmd.limit])


def queue_blocks(s: Session, names: list[str]) -> Result:
    """``<name> 2`` / ready-len / scheduled-len for each tube that exists."""
    if not names:
        return []
    replies = yield Send(tuple(line("stats-tube", name) for name in names))
    out = []
    for name, reply in zip(names, replies, strict=True):
        if reply.name == b"OK":
            t = yaml_map(reply.body)
            pairs: list[tuple[str, object]] = [
                ("ready-len", t.get("current-jobs-ready", 0)),
                ("scheduled-len", t.get("current-jobs-delayed", 0)),
            ]
            out.append(r.block(name, pairs))
    return out


def job_block(j: WorkqJob) -> bytes:
    f = j.fixed
    pairs: list[tuple[str, object]] = [
        ("name", f.name),
        ("ttr", f.ttr),
        ("ttl", f.ttl),
        ("payload-size", len(f.payload)),
        ("payload", f.payload),
        ("max-attempts", f.max_attempts),
        ("attempts", j.attempts),
        ("max-fails", f.max_fails),
        ("fails", j.fails),
        ("priority", f.priority),
        ("state", int(j.state)),
        ("created", time.strftime(a.TIME_FORMAT, time.gmtime(f.created / 1000))),
    ]
    if f.at:
        pairs.append(("time", time.strftime(a.TIME_FORMAT, time.gmtime(f.at / 1000))))
    return r.block(j.id, pairs)
