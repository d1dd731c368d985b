"""Each Kestrel command as beanstalk operations on the session's private connection.

One named task per command (`HANDLERS`, `SIMPLE`), a generator (see session.py): it
yields `Send` with beanstalk lines and gets their replies back, and returns the Kestrel
answer. A Kestrel queue is the tube of the same name; an open item is a job this
session's connection has reserved (beanstalk gives it back to the ready queue, at its
place by priority and age, when the connection closes: Kestrel's abort on disconnect).
The table of what maps to what is docs/PROTOCOLS.md.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from shardq import __version__
from shardq.processes.frontends.beanstalk import (
    POLL_FIRST_S,
    POLL_MAX_S,
    Result,
    line,
    now_ms,
    put_line,
    reserve_within,
    use_lines,
    watch_lines,
    yaml_list,
    yaml_map,
)
from shardq.processes.frontends.session import answer_invalid
from shardq.protocol import kestrel as k
from shardq.protocol import kestrel_replies as r
from shardq.protocol.reader import Reply

from .policy_config import queue_config
from .session import KestrelSession as Session
from .session import Send, Sleep, Task

if TYPE_CHECKING:
    from .loop import Frontend

#: Priority of the jobs a Kestrel set puts: every Kestrel item has the same, so a queue is
#: FIFO (ready jobs are served by priority, then age). 1024 is pheanstalk's default.
PRIORITY = 1024
#: TTR of the jobs a Kestrel set puts: Kestrel's open items never time out (they end with
#: close, abort or the client's disconnect), so the largest beanstalk allows.
TTR = 0xFFFFFFFF
#: At most this many ids are deleted by one janitor round.
EXPIRE_BATCH = 256
VERSION = f"shardq-{__version__}"


def failed(reply: Reply) -> bytes:
    """A beanstalk answer a command did not expect, as a memcache SERVER_ERROR."""
    return r.server_error(b" ".join(reply.words).decode(errors="replace").lower())


def do_set(front: Frontend, s: Session, cmd: k.Set) -> Task:
    return (yield from do_sets(front, s, [cmd]))


def list_fanout(front: Frontend, s: Session) -> Result:
    """Learn the server's fanout queues (a list-tubes, at most every fanout.REFRESH_S)."""
    now = time.monotonic()
    if front.fanout.stale(now):
        replies = yield Send((line("list-tubes"),))
        front.fanout.listed(yaml_list(replies[0].body), now)


def do_sets(front: Frontend, s: Session, cmds: list[k.Set]) -> Task:
    """Consecutive `set`s the client pipelined, as one batch of beanstalk puts (one round
    trip for all of them: a fanout queue's copies too); their answers in order."""
    yield from list_fanout(front, s)
    at = now_ms()
    lines: list[bytes] = []
    parts: list[tuple[k.Set, int | None, list[tuple[str, int]]]] = []  # (set, expiry, puts)
    for cmd in cmds:
        front.counters["cmd_set"] += 1
        front.fanout.learn(cmd.queue)
        expires = k.expiry_ms(cmd.expiry, at)
        if expires is not None and expires <= at:  # dead on arrival: never seen by anyone
            parts.append((cmd, expires, []))
            continue
        puts = []  # (queue, where its put's reply is)
        for queue in (cmd.queue, *front.fanout.of(cmd.queue)):
            lines += (*use_lines(s, queue), put_line(PRIORITY, 0, TTR, cmd.data))
            puts.append((queue, len(lines) - 1))
        parts.append((cmd, expires, puts))
    replies = (yield Send(tuple(lines))) if lines else []
    answers: list[bytes] = []
    for cmd, expires, puts in parts:
        reply = r.STORED
        if puts:
            (queue, at_reply), *copies = puts
            reply = set_reply(front, queue, replies[at_reply], expires)
            for child, at_copy in copies:  # a child's own limits may refuse its copy
                set_reply(front, child, replies[at_copy], expires)
        if not (cmd.noreply and reply == r.STORED):
            answers.append(reply)
    return b"".join(answers) if answers else None


def set_reply(front: Frontend, queue: str, answer: Reply, expires: int | None) -> bytes:
    """What a `set` answers for its put's beanstalk reply."""
    if answer.name == b"INSERTED":
        if expires is not None:
            front.expiry.add(answer.number(), expires, queue)
        return r.STORED
    if answer.name in (b"OUT_OF_MEMORY", b"BURIED"):
        return r.NOT_STORED
    if answer.name == b"JOB_TOO_BIG":
        return k.TOO_LARGE
    return failed(answer)


def end_open(front: Frontend, s: Session, queue: str, abort: bool) -> Result:
    """Close (delete) or abort (release, back to its place: the head, for a FIFO queue of
    one priority) this session's open item on `queue`; nothing if there is none. An
    aborted item past its expiry is deleted instead."""
    job = s.open.pop(queue, None)
    if job is None:
        return
    front.open_ids.discard(job)
    if abort and not front.expiry.expired(job, now_ms()):
        replies = yield Send((line("stats-job", job),))
        pri = yaml_map(replies[0].body).get("pri", str(PRIORITY))
        yield Send((line("release", job, pri, 0),))
        return
    if abort:
        front.count_expired(queue)
    yield Send((line("delete", job),))
    front.expiry.forget(job)


def do_get(front: Frontend, s: Session, cmd: k.Get) -> Task:
    front.fanout.learn(cmd.queue)
    if cmd.close or cmd.abort:
        yield from end_open(front, s, cmd.queue, cmd.abort)
    if not cmd.fetches:
        return r.END
    if cmd.peek:
        return (yield from peek(front, s, cmd))
    if cmd.open and cmd.queue in s.open:
        return r.ALREADY_OPEN
    front.counters["cmd_get"] += 1
    deadline = time.monotonic() + cmd.timeout_ms / 1000
    before = watch_lines(s, (cmd.queue,))
    while True:
        answer = yield from reserve_within(s, deadline, before)
        before = ()
        if answer is None:
            front.counters["get_misses"] += 1
            return r.END
        if answer.name == b"RESERVED":
            job, body = answer.number(), answer.body or b""
            if front.expiry.expired(job, now_ms()):
                yield Send((line("delete", job),))
                front.expiry.forget(job)
                front.count_expired(cmd.queue)
                continue
            front.counters["get_hits"] += 1
            if cmd.open:
                s.open[cmd.queue] = job
                front.open_ids.add(job)
                return r.value(cmd.key, body)
            deleted = yield Send((line("delete", job),))
            front.expiry.forget(job)
            if deleted[0].name != b"DELETED":
                return failed(deleted[0])
            return r.value(cmd.key, body)
        if answer.name != b"DEADLINE_SOON":
            return failed(answer)
        # an open item put by beanstalk, near its TTR
        yield Send(tuple(line("touch", job) for job in s.open.values()))


def peek(front: Frontend, s: Session, cmd: k.Get) -> Result:
    front.counters["cmd_peek"] += 1
    deadline = time.monotonic() + cmd.timeout_ms / 1000
    before, poll = use_lines(s, cmd.queue), POLL_FIRST_S
    while True:
        replies = yield Send((*before, line("peek-ready")))
        before = ()
        answer = replies[-1]
        if answer.name == b"FOUND":
            job = answer.number()
            if front.expiry.expired(job, now_ms()):
                yield Send((line("delete", job),))
                front.expiry.forget(job)
                front.count_expired(cmd.queue)
                continue
            return r.value(cmd.key, answer.body or b"")
        left = deadline - time.monotonic()
        if answer.name != b"NOT_FOUND" or left <= 0:
            return r.END if answer.name == b"NOT_FOUND" else failed(answer)
        yield Sleep(min(poll, left))
        poll = min(2 * poll, POLL_MAX_S)


def drain(s: Session, queue: str, kinds: Iterable[str]) -> Result:
    """Delete every job of `queue` in the states `kinds` (ready, delayed, buried): peek the
    first, delete it, again — linear in the queue's length, as Kestrel's flush is."""
    before = use_lines(s, queue)
    for kind in kinds:
        while True:
            replies = yield Send((*before, line(f"peek-{kind}")))
            before = ()
            if replies[-1].name != b"FOUND":
                break
            yield Send((line("delete", replies[-1].number()),))


def do_delete(front: Frontend, s: Session, cmd: k.Delete) -> Task:
    front.fanout.forget(cmd.queue)
    yield from end_open(front, s, cmd.queue, abort=False)
    yield from drain(s, cmd.queue, ("ready", "delayed", "buried"))
    return None if cmd.noreply else r.DELETED


def do_flush(front: Frontend, s: Session, cmd: k.Flush) -> Task:
    yield from drain(s, cmd.queue, ("ready",))
    return None if cmd.noreply else r.END


def tubes(s: Session) -> Result:
    replies = yield Send((line("list-tubes"),))
    return yaml_list(replies[0].body)


def do_flush_all(front: Frontend, s: Session, cmd: k.FlushAll) -> Task:
    for tube in (yield from tubes(s)):
        yield from drain(s, tube, ("ready",))
    return None if cmd.noreply else r.FLUSHED_ALL


def queue_stats(front: Frontend, s: Session) -> Result:
    """(server stats, [(queue, its stats)]) in Kestrel's names, from beanstalk's."""
    replies = yield Send((line("stats"), line("list-tubes")))
    server, names = yaml_map(replies[0].body), yaml_list(replies[1].body)
    per_tube: list[Reply] = []
    if names:
        per_tube = yield Send(tuple(line("stats-tube", name) for name in names))
    queues = []
    for name, reply in zip(names, per_tube, strict=True):
        t = yaml_map(reply.body)
        items = int(t.get("current-jobs-ready", 0))
        queues.append(
            (
                name,
                [
                    ("items", items),
                    ("bytes", t.get("current-bytes", 0)),  # a tube with a policy has it
                    ("total_items", t.get("total-jobs", 0)),
                    ("logsize", 0),
                    ("expired_items", front.expired.get(name, 0)),
                    ("mem_items", items),
                    ("mem_bytes", 0),
                    ("age", 0),
                    ("discarded", t.get("total-discarded", 0)),
                    ("waiters", t.get("current-waiting", 0)),
                    ("open_transactions", t.get("current-jobs-reserved", 0)),
                ],
            )
        )
    c = front.counters
    top = [
        ("uptime", server.get("uptime", 0)),
        ("time", int(time.time())),
        ("version", VERSION),
        ("curr_items", server.get("current-jobs-ready", 0)),
        ("total_items", server.get("total-jobs", 0)),
        ("bytes", 0),
        ("curr_connections", front.clients()),
        *((name, c[name]) for name in COUNTERS[1:]),
    ]
    return top, queues


#: The front-end's own counters, as Kestrel's stats name them.
COUNTERS = (
    "curr_connections",
    "total_connections",
    "cmd_get",
    "cmd_set",
    "cmd_peek",
    "get_hits",
    "get_misses",
    "bytes_read",
    "bytes_written",
)


def do_stats(front: Frontend, s: Session, cmd: k.Simple) -> Task:
    top, queues = yield from queue_stats(front, s)
    return r.stats(top, queues)


def do_dump_stats(front: Frontend, s: Session, cmd: k.Simple) -> Task:
    _top, queues = yield from queue_stats(front, s)
    return r.blocks(queues)


def do_dump_config(front: Frontend, s: Session, cmd: k.Simple) -> Task:
    names = yield from tubes(s)
    per_tube: list[Reply] = []
    if names:  # a tube's policy, if it has one (policy_config.py)
        per_tube = yield Send(tuple(line("stats-tube", name) for name in names))
    configs = [queue_config(front.queue_config, yaml_map(reply.body)) for reply in per_tube]
    return r.blocks(zip(names, configs, strict=True))


def do_version(front: Frontend, s: Session, cmd: k.Simple) -> Task:
    return r.version(VERSION)
    yield  # a task, like the others


def do_reload(front: Frontend, s: Session, cmd: k.Simple) -> Task:
    """Kestrel's reload: the supervisor's SIGHUP (read the config file again, apply what
    can change live)."""
    os.kill(front.supervisor, signal.SIGHUP)
    return r.RELOADED
    yield


def do_shutdown(front: Frontend, s: Session, cmd: k.Simple) -> Task:
    """Refused: one memcache client must not stop a server its beanstalk clients share."""
    return r.SHUTDOWN_REFUSED
    yield


#: The administrative commands, served only with kestrel.admin: true (a client of the door
#: must not empty every queue, nor make the server read its config again, unless allowed).
ADMIN = ("flush_all", "reload", "shutdown")


def is_admin(cmd: k.Command) -> bool:
    return isinstance(cmd, k.FlushAll) or (isinstance(cmd, k.Simple) and cmd.name in ADMIN)


def not_enabled(front: Frontend, s: Session, cmd: k.Command) -> Task:
    """An administrative command with kestrel.admin off: answered as an unknown command is
    (``ERROR``, the connection goes on), so the door does not even say it exists."""
    return k.ERROR
    yield


def do_quit(front: Frontend, s: Session, cmd: k.Simple) -> Task:
    s.eof = True  # the loop closes the session once its output is written
    s.parser.dead = True  # and runs nothing sent after it
    return None
    yield


Handler = Callable[["Frontend", Session, Any], Task]

HANDLERS: dict[type, Handler] = {
    k.Set: do_set,
    k.Get: do_get,
    k.Delete: do_delete,
    k.Flush: do_flush,
    k.FlushAll: do_flush_all,
    k.Invalid: answer_invalid,
}
SIMPLE: dict[str, Handler] = {
    "stats": do_stats,
    "dump_stats": do_dump_stats,
    "dump_config": do_dump_config,
    "version": do_version,
    "reload": do_reload,
    "shutdown": do_shutdown,
    "quit": do_quit,
}


def expire(front: Frontend, s: Session, jobs: list[int]) -> Task:
    """The janitor's task: delete jobs past their expiry (Kestrel's expiration timer), so a
    beanstalk reserve does not get them either. NOT_FOUND: reserved (an open item: its
    abort or close decides) or already gone."""
    replies = yield Send(tuple(line("delete", job) for job in jobs))
    for job, answer in zip(jobs, replies, strict=True):
        queue = front.expiry.queue_of(job)
        if answer.name == b"DELETED":
            front.count_expired(queue)
        if job not in front.open_ids:
            front.expiry.forget(job)
    return None
