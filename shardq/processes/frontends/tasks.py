"""Running a front-end session's commands: each is a task (session.py: a generator that
yields `Send` — beanstalk lines, resumed with their replies — or `Sleep`, and returns the
client's answer), one at a time per client, in the order they came. A task that raises is
answered with the front-end's internal error, one that runs out of memory with its
out-of-memory reply; the client goes on either way.

These are `FrontendLoop`'s methods (loop.py binds them on the class, as the serving
process binds its rooms': no call through another object).
"""

from __future__ import annotations

import heapq
import logging
import time
from typing import TYPE_CHECKING

from shardq.processes.common import outofmemory
from shardq.processes.frontends.session import IDLE, SLEEPING, Send, Session, Sleep, Task
from shardq.protocol.reader import Reply

if TYPE_CHECKING:
    from shardq.processes.frontends.loop import FrontendLoop

log = logging.getLogger("shardq.processes.frontends.loop")


def pump(self: FrontendLoop, s: Session) -> None:
    """Start the client's next commands while none is running; once its input has
    ended (or `quit`) and the last one is answered, close it after its output."""
    while s.phase is IDLE and s.task is None and s.sock is not None and not s.input_lost:
        try:
            task = self.next_task(s)
        except MemoryError:
            s.lose_input()
            break
        if task is None:
            break
        s.task = task
        self.advance(s, None)
    if s.eof and s.phase is IDLE and s.task is None:
        if s.input_lost:
            self.answer(s, self.OUT_OF_MEMORY)
        s.step("finish")
    self.flush(s)


def start(self: FrontendLoop, s: Session, task: Task) -> None:
    """Run `task` on an idle session with no client (an internal one)."""
    s.task = task
    self.advance(s, None)


def advance(self: FrontendLoop, s: Session, value: list[Reply] | None) -> None:
    """Run the session's task (None: start it) until it waits (a Send, a Sleep) or is
    done."""
    task = s.task
    assert task is not None
    try:
        step = next(task) if value is None else task.send(value)
    except StopIteration as done:
        s.task = None
        s.step("done")
        if done.value is not None and s.sock is not None:
            self.answer(s, done.value)
        return
    except MemoryError:  # its effects so far stay (a task undoes what it must)
        self.out_of_memory(s)
        return
    except Exception:
        log.exception("session %d: a command failed", s.id)
        s.task = None
        s.step("done")
        if s.sock is not None:
            self.answer(s, self.internal_error())
        return
    if isinstance(step, Send):
        if not step.lines:  # nothing to ask: resume at once
            self.advance(s, [])
            return
        try:
            for part in step.lines:
                s.bout += part
        except MemoryError:  # not sent: the task ends where it waits (its finally runs)
            s.bout.clear()
            task.close()
            self.out_of_memory(s)
            return
        s.step("send")
        s.expect = len(step.lines)
        s.got = []
        self.write_backend(s)
    elif isinstance(step, Sleep):
        s.step("sleep")
        s.wake_at = time.monotonic() + step.seconds
        heapq.heappush(self.sleepers, (s.wake_at, s.id, s))


def out_of_memory(self: FrontendLoop, s: Session) -> None:
    """The running command ran out of memory: it ends, answered with the protocol's
    out-of-memory error."""
    outofmemory.note(f"session {s.id}'s command; it is answered so")
    s.task = None
    s.step("done")
    if s.sock is not None:
        self.answer(s, self.OUT_OF_MEMORY)


def answer(self: FrontendLoop, s: Session, data: bytes) -> None:
    s.out += data
    self.counters["bytes_written"] += len(data)
    if len(s.out) > self.max_output:
        log.debug("session %d closed: %d bytes of replies unread", s.id, len(s.out))
        self.close(s)


def wake(self: FrontendLoop, s: Session) -> None:
    """End a sleeping session's Sleep now (its task looks again at what it waits for)."""
    if s.phase is SLEEPING and s.wake_at > time.monotonic():
        s.wake_at = time.monotonic()
        heapq.heappush(self.sleepers, (s.wake_at, s.id, s))
