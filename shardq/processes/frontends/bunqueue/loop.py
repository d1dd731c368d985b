"""The bunqueue front-end process: bunqueue's MessagePack protocol in, beanstalk out.

The loop is the front-ends' own (`frontends/loop.py`); this module adds what is bunqueue's:
the registry of its jobs (registry.py) and its journal under ``-b DIR``, the sessions
waiting for a job (WaitJob), the pulls parked on connections of their own (waiting.py),
the subscribers of job events, what each connection has pulled (given back when it goes),
and the janitor that puts delayed jobs in their tube at their time and ends expired locks.
"""

from __future__ import annotations

import logging
import socket
import time
from typing import Any

from shardq.processes.common.door import Gate
from shardq.processes.common.settings import BunqueueSettings
from shardq.processes.frontends.bunqueue import commands, saving, waiting
from shardq.processes.frontends.bunqueue.pulls import Pull
from shardq.processes.frontends.bunqueue.registry import BqJob, Registry
from shardq.processes.frontends.bunqueue.tubes import flush_deletes, now_ms
from shardq.processes.frontends.registered import RegisteredLoop, serve
from shardq.processes.frontends.session import IDLE, Session, Task
from shardq.protocol import bunqueue as b
from shardq.storage.bunqueue_journal import Dropped, Paused, Record, open_journal

log = logging.getLogger(__name__)


class Frontend(RegisteredLoop):
    UNAVAILABLE = b.error("Server unavailable")
    NAME = "bunqueue"
    registry: Registry

    def __init__(self, settings: BunqueueSettings) -> None:
        st = settings
        max_output = st.door.max_output_bytes
        super().__init__(st.listen_fd, st.backend, b.MAX_FRAME + b.HEADER.size, max_output)
        self.started = time.time()
        self.max_memory = st.max_memory  # the registry's bound (limits.max_memory; 0: none)
        self.tokens = frozenset(st.bunqueue_tokens)  # Auth's (none: no Auth needed)
        self.authed: set[int] = set()
        self.registry = Registry()
        self.subscribers: dict[int, Session] = {}  # SubscribeEvents
        self.workers: dict[str, dict[str, Any]] = {}  # RegisterWorker
        self.retired: set[int] = set()  # beanstalk ids being deleted (not to be pulled)
        self.pullers: set[Session] = set()  # sessions in a long PULL (woken by a Resume)
        #: client session id -> the waiters of its parked pulls (waiting.py)
        self.parked: dict[int, set[Session]] = {}
        #: a waiter's session id -> its client and the pull it answers
        self.waiting_for: dict[int, tuple[Session, Pull]] = {}
        #: (monotonic s, waiter id, client, answer): pulls whose waiter was lost
        self.late: list[tuple[float, int, Session, bytes]] = []
        #: session id -> the beanstalk jobs it pulled, still reserved on its connection:
        #: deleted with its next lines, or by `housekeeping` once it is idle
        self.undeleted: dict[int, list[int]] = {}
        self.janitor_work: list[BqJob] = []
        if st.journal_dir is not None:
            self.open_book(open_journal(st.journal_dir, st.sync_journal), self.replay)
            log.info("bunqueue: %d jobs from the journal", len(self.registry))

    def new_session(self, sid: int, sock: socket.socket | None, backend: socket.socket) -> Session:
        return Session(sid, sock, backend, b.BunqueueParser())

    def internal_error(self) -> bytes:
        return b.error("Internal server error")

    def next_task(self, s: Session) -> Task | None:
        if waiting.full(self, s):
            return None  # until one of its parked pulls is answered
        cmd = commands.read_command(s)
        if cmd is None:
            return None
        return commands.task_of(self, s, cmd)

    # ------------------------------------------------------------------ the registry's ends

    def save(self, *jobs: BqJob) -> None:
        """Journal the jobs' state (a disk error is logged: they go on in memory)."""
        if self.book is not None:
            self.write([saving.saved(j) for j in jobs])

    def write(self, records: list[Record]) -> None:
        if self.book is None:
            return
        try:
            self.book.append_many(records)
        except OSError as e:
            log.error("bunqueue journal: %s", e)

    def forget(self, j: BqJob) -> None:
        self.registry.drop(j)
        self.write([Dropped(j.id)])
        self.notify(j.id)

    def set_paused(self, queue: str, paused: bool) -> None:
        (self.registry.paused.add if paused else self.registry.paused.discard)(queue)
        self.write([Paused(queue, paused)])
        if not paused:
            for s in list(self.pullers):
                self.wake(s)

    def emit(self, event: str, j: BqJob, **extra: Any) -> None:
        """A job event to every subscriber (a frame with no reqId)."""
        if not self.subscribers:
            return
        body = {"eventType": event, "queue": j.queue, "jobId": j.id, "timestamp": now_ms()}
        data = b.frame({"type": "event", "event": {**body, **b.safe(extra)}})
        for s in list(self.subscribers.values()):
            self.answer(s, data)
            self.flush(s)

    def closed(self, s: Session) -> None:
        waiting.lost(self, s)
        self.authed.discard(s.id)
        self.subscribers.pop(s.id, None)
        self.pullers.discard(s)
        if s is self.janitor:
            self.janitor = None
            self.registry.ready += self.janitor_work  # its connection went midway
            self.janitor_work = []
        reserved = self.undeleted.pop(s.id, []) + waiting.cancel(self, s)
        given = self.registry.given_back(s.id, reserved)
        if given:  # the janitor puts them back (and a waiting PULL gets them)
            self.save(*given)

    def housekeeping(self) -> None:
        super().housekeeping()
        waiting.deliver_late(self)
        for s in self.idle_undeleted():
            self.start(s, flush_deletes(self, s))

    def idle_undeleted(self) -> list[Session]:
        """Sessions with pulled jobs to delete and no command running."""
        out = []
        for sid in self.undeleted:
            s = self.sessions.get(sid)
            if s is not None and s.task is None and s.phase is IDLE:
                out.append(s)
        return out

    def next_due(self) -> float | None:
        if self.idle_undeleted():
            return 0.0
        due = [d for d in (super().next_due(), waiting.late_due(self)) if d is not None]
        return min(due) if due else None

    def replay(self, records: list[Record]) -> None:
        saving.replay(self.registry, records)

    def snapshot(self) -> list[Record]:
        return saving.snapshot(self.registry)

    def janitor_task(self, s: Session) -> Task:
        return commands.housekeeping(self, s)


def main(settings: BunqueueSettings, gate: Gate) -> None:
    """`gate`: who may connect (allow, max_connections, TLS)."""

    def make() -> Frontend:
        return Frontend(settings)

    serve(make, gate)
