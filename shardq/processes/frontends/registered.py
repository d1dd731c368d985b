"""What the front-ends with a registry of their own jobs share (Workq, bunqueue): the
registry's journal under ``-b`` (its answers held for its fsync with ``-f 0``, rewritten
with only what is live when mostly garbage), the janitor session that does the registry's
timed work, and the puts whose answers are under way (`putting`, `known_job`: a job taken
from its tube before its put's INSERTED was read is still known as the front-end's own).

A subclass says what its registry is (`registry`: `bytes` and `by_job`, `next_due` in
unix ms), how it is written whole (`snapshot`), and what its janitor does (`janitor_task`).
"""

from __future__ import annotations

import itertools
import signal
import time
from collections.abc import Callable
from typing import Any, Protocol

from shardq.processes.common import wakeup
from shardq.processes.common.door import Gate
from shardq.processes.frontends.beanstalk import Result
from shardq.processes.frontends.loop import FrontendLoop
from shardq.processes.frontends.session import Send, Session, Sleep, Task
from shardq.storage.journal import Journal


class JobRegistry(Protocol):
    bytes: int  # what it holds, about what a rewrite of its journal would write
    by_job: Any  # beanstalk id -> the registry's id, while queued (a dict)

    def next_due(self) -> float | None: ...


class RegisteredLoop(FrontendLoop):
    NAME = ""  #: in its log lines
    registry: JobRegistry

    def __init__(self, listen_fd: int, backend_path: str, max_input: int, max_output: int) -> None:
        super().__init__(listen_fd, backend_path, max_input, max_output)
        self.book: Journal | None = None
        self.janitor: Session | None = None
        self.put_tokens = itertools.count(1)
        self.puts_in_flight: set[int] = set()  # puts whose INSERTED is not read yet
        self.waiters: dict[str, set[Session]] = {}  # job id -> sessions waiting for it

    def notify(self, ident: str) -> None:
        """Wake the sessions waiting for job `ident` (it moved)."""
        for s in list(self.waiters.get(ident, ())):
            self.wake(s)

    def unwait(self, ident: str, s: Session) -> None:
        waiting = self.waiters.get(ident)
        if waiting is not None:
            waiting.discard(s)
            if not waiting:
                del self.waiters[ident]

    def open_book(self, book: Journal, replay: Callable[[list[Any]], None]) -> None:
        """Take the registry from the journal, and rewrite it with only what is live."""
        self.book = book
        replay(book.load())
        book.rewrite(self.snapshot())

    def snapshot(self) -> list[Any]:
        """The registry as journal records."""
        raise NotImplementedError

    def janitor_task(self, s: Session) -> Task:
        """The janitor's turn (its timers are due)."""
        raise NotImplementedError

    def now_ms(self) -> float:
        return time.time_ns() / 1_000_000

    def unsynced(self) -> bool:
        return self.book is not None and self.book.dirty

    def sync(self) -> None:
        if self.book is not None:
            self.book.sync_now()

    def housekeeping(self) -> None:
        if self.book is not None:
            self.book.tend(self.registry.bytes, self.snapshot)  # rewritten in a child
        due = self.registry.next_due()
        if due is None or due > self.now_ms():
            return
        if self.janitor is None:
            self.janitor = self.internal_session()
            if self.janitor is None:
                return
        if self.janitor.task is None:
            self.start(self.janitor, self.janitor_task(self.janitor))

    def next_due(self) -> float | None:
        due = self.registry.next_due()
        return None if due is None else (due - self.now_ms()) / 1000


def putting(front: RegisteredLoop, lines: tuple[bytes, ...]) -> Result:
    """Send puts (and the lines before them); while their answers are under way a worker's
    reserve may already have a job: `known_job` waits for every such put."""
    token = next(front.put_tokens)
    front.puts_in_flight.add(token)
    try:
        return (yield Send(lines))
    finally:
        front.puts_in_flight.discard(token)


def known_job(front: RegisteredLoop, job: int) -> Result:
    """The registry's id of reserved beanstalk job `job` (None: a job put through
    beanstalk). Its put may be one of ours whose answer has not been read yet: wait for
    those first."""
    waiting = set(front.puts_in_flight)
    while front.registry.by_job.get(job) is None and waiting & front.puts_in_flight:
        yield Sleep(0.0005)
    return front.registry.by_job.get(job)


def serve(make: Callable[[], RegisteredLoop], gate: Gate | None) -> None:
    """A front-end process's main: SIGINT ignored (the supervisor stops it), SIGTERM ends
    it; `gate`: who may connect (allow, max_connections, TLS; None: anyone, plain text)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, wakeup.exit_on_sigterm)
    front = make()
    front.gate = gate or front.gate
    front.serve_forever()
