"""The Workq front-end process: Workq's text protocol in, beanstalk out.

The loop is the front-ends' own (`frontends/loop.py`); this module adds what is Workq's:
the registry of Workq jobs (registry.py) and its journal under ``-b DIR``, the sessions
waiting for a job's result (`run`, `result`), and the janitor that ends leases past their
TTR and jobs past their ttl.
"""

from __future__ import annotations

import logging
import socket
import time

from shardq.processes.common.door import Gate
from shardq.processes.common.settings import WorkqSettings
from shardq.processes.frontends.beanstalk import now_ms
from shardq.processes.frontends.registered import RegisteredLoop, serve
from shardq.processes.frontends.session import Session, Task, gather
from shardq.processes.frontends.workq import commands
from shardq.processes.frontends.workq.registry import Registry, WorkqJob
from shardq.protocol import workq as w
from shardq.protocol import workq_args, workq_replies
from shardq.storage.workq_journal import Dropped, Record, open_journal

log = logging.getLogger(__name__)


def read_command(s: Session) -> workq_args.Typed | w.Invalid | None:
    frame = s.parser.next_command()
    if frame is None or isinstance(frame, w.Invalid):
        return frame
    return workq_args.parse(frame, now_ms())


def is_plain_add(cmd: object) -> bool:
    """An add or a schedule (not a run, which waits)."""
    return isinstance(cmd, workq_args.Add) and not cmd.is_run


class Frontend(RegisteredLoop):
    UNAVAILABLE = workq_replies.UNAVAILABLE
    NAME = "workq"
    registry: Registry
    OUT_OF_MEMORY = workq_replies.OUT_OF_MEMORY

    def __init__(self, settings: WorkqSettings) -> None:
        s = settings
        max_output = s.door.max_output_bytes
        super().__init__(s.listen_fd, s.backend, w.MAX_LINE + w.MAX_BLOCK + 2, max_output)
        self.started = time.time()
        self.max_memory = s.max_memory  # the registry's bound (limits.max_memory; 0: none)
        self.registry = Registry()
        self.runs: dict[int, WorkqJob] = {}  # session id -> the job its `run` waits for
        self.retired: set[int] = set()  # beanstalk ids being deleted (not to be leased)
        #: the janitor's turn: (jobs to queue again, jobs to retire) not done yet
        self.janitor_work: tuple[list[WorkqJob], list[WorkqJob]] = ([], [])
        if s.journal_dir is not None:
            self.open_book(open_journal(s.journal_dir, s.sync_journal), self.registry.replay)
            log.info("workq: %d jobs from the journal", len(self.registry))

    def new_session(self, sid: int, sock: socket.socket | None, backend: socket.socket) -> Session:
        return Session(sid, sock, backend, w.WorkqParser())

    def internal_error(self) -> bytes:
        return workq_replies.server_error("internal error")

    def next_task(self, s: Session) -> Task | None:
        cmd, s.held = s.held or read_command(s), None
        if cmd is None:
            return None
        if is_plain_add(cmd):  # the adds that follow go with it, in one round trip
            return commands.do_adds(self, s, gather(s, cmd, is_plain_add, read_command))
        return commands.HANDLERS[type(cmd)](self, s, cmd)

    # ------------------------------------------------------------------ the registry's ends

    def journal(self, record: Record) -> None:
        if self.book is not None:
            self.book.append(record)

    def journal_many(self, records: list[Record]) -> None:
        if self.book is not None:
            self.book.append_many(records)

    def changed(self, j: WorkqJob) -> None:
        """Write a job's moving fields (a disk error, or memory short, is logged: the job goes on
        in memory)."""
        try:
            self.journal(j.changed())
        except (OSError, MemoryError) as e:
            log.error("workq journal: %s", e or "out of memory")

    def forget(self, j: WorkqJob) -> None:
        self.registry.drop(j)
        try:
            self.journal(Dropped(j.id))
        except (OSError, MemoryError) as e:
            log.error("workq journal: %s", e or "out of memory")
        self.notify(j.id)

    def fail_for_good(self, j: WorkqJob) -> None:
        self.registry.give_up(j)
        self.notify(j.id)

    def closed(self, s: Session) -> None:
        if s is self.janitor:
            self.janitor = None
            todo, expired = self.janitor_work  # its connection went midway: give them back
            self.registry.orphans += todo
            for gone in expired:
                self.registry.expire_now(gone, now_ms())
            self.janitor_work = ([], [])
        j = self.runs.pop(s.id, None)
        if j is not None:  # its run ended with its client: the job goes (by the janitor)
            self.unwait(j.id, s)
            self.registry.expire_now(j, now_ms())

    def snapshot(self) -> list[Record]:
        return self.registry.snapshot()

    def janitor_task(self, s: Session) -> Task:
        return commands.housekeeping(self, s)


def main(settings: WorkqSettings, gate: Gate) -> None:
    """`gate`: who may connect (allow, max_connections, TLS)."""

    def make() -> Frontend:
        return Frontend(settings)

    serve(make, gate)
