"""One front-end client and its private beanstalk connection to the server.

A command runs as a *task*: a generator (the front-end's ``commands.py``) that yields what
it needs from the server — `Send` (beanstalk command lines, answered in order: it is
resumed with their replies) or `Sleep` (a pause: sub-second waits, or waiting to be woken
by another session's command) — and returns the bytes to answer its client (None:
nothing). A session runs one task at a time, in the order the client sent its commands,
so replies are in order.

The session's `Phase` is an explicit state machine (`STEPS`); the loop (`loop.py`) moves
it on socket and timer events.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Generator
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Protocol

from shardq.processes.common import outofmemory
from shardq.protocol.inbuf import Invalid
from shardq.protocol.reader import Reply, ReplyReader


@dataclass(frozen=True, slots=True)
class Send:
    """Send these beanstalk command lines (each complete, CRLF and body included) and
    resume with their replies, one per line, in order."""

    lines: tuple[bytes, ...]


@dataclass(frozen=True, slots=True)
class Sleep:
    """Resume (with no replies) after `seconds`, or sooner if the loop wakes the session."""

    seconds: float


#: pipelined puts (Kestrel sets, Workq adds) sent to the server in one round trip
MAX_BATCH = 64

Step = Send | Sleep
#: A running command: yields steps, is resumed with replies (none after a Sleep), returns
#: what to answer.
Task = Generator[Step, list[Reply], bytes | None]


class Parser(Protocol):
    """A front-end protocol's sans-IO command parser."""

    dead: bool

    @property
    def buffered(self) -> int: ...

    def feed(self, data: bytes | memoryview) -> None: ...

    def next_command(self) -> Any: ...


class Phase(IntEnum):
    IDLE = 1  # no command running: the next one may start
    WAITING = 2  # the task waits for beanstalk replies
    SLEEPING = 3  # the task waits for a timer (or to be woken)
    CLOSING = 4  # closed once its output is written (quit, end of input, a fatal error)
    CLOSED = 5


IDLE, WAITING, SLEEPING, CLOSING, CLOSED = Phase

#: (phase, event) -> next phase: the one statement of how a session moves.
STEPS: dict[tuple[Phase, str], Phase] = {
    (IDLE, "send"): WAITING,
    (IDLE, "sleep"): SLEEPING,
    (IDLE, "done"): IDLE,
    (WAITING, "replied"): IDLE,  # the task runs again (and sends, sleeps or is done)
    (SLEEPING, "woken"): IDLE,
    (IDLE, "finish"): CLOSING,
    (WAITING, "finish"): CLOSING,  # the server went away mid-command
    (SLEEPING, "finish"): CLOSING,
    (CLOSING, "finish"): CLOSING,
    (CLOSING, "done"): CLOSING,
    **{(phase, "close"): CLOSED for phase in Phase},
    # closed is final: a timer or a reply still under way moves nothing
    **{(CLOSED, event): CLOSED for event in ("replied", "woken", "finish", "done")},
}


class Session:
    """A client connection (`sock`; None for a front-end's own internal session) and its
    beanstalk connection (`backend`)."""

    def __init__(
        self, sid: int, sock: socket.socket | None, backend: socket.socket, parser: Parser
    ) -> None:
        self.id = sid
        self.sock = sock
        self.backend = backend
        self.parser = parser
        self.reader = ReplyReader()
        self.out = bytearray()  # to the client
        self.bout = bytearray()  # to the server
        self.phase = IDLE
        self.task: Task | None = None
        #: a command read ahead (while gathering a batch of the same kind), to run next
        self.held: Any = None
        self.expect = 0  # replies the current Send waits for
        self.got: list[Reply] = []
        self.use = "default"  # the beanstalk connection's used tube
        self.watching: tuple[str, ...] = ("default",)  # and the tubes it watches
        self.events = 0  # the client socket's selector mask
        self.bevents = 0  # the backend's
        self.eof = False  # the client sent its last byte
        #: its input could not be kept (out of memory): answered so, then closed
        self.input_lost = False
        self.wake_at = 0.0  # monotonic s of a Sleep

    def step(self, event: str) -> None:
        self.phase = STEPS[(self.phase, event)]

    def lose_input(self) -> None:
        """Memory ran out reading or parsing the client's input: the stream cannot be
        followed, so nothing more is read or run; the running command is answered, then
        the out-of-memory answer, then the connection is closed."""
        outofmemory.note(f"session {self.id}'s input; it is answered so and closed")
        self.eof = self.input_lost = True

    def __repr__(self) -> str:
        return f"<Session {self.id} {self.phase.name}>"


def gather(
    s: Session, first: Any, same: Callable[[Any], bool], read: Callable[[Session], Any]
) -> list[Any]:
    """`first` and the commands that follow it while `same` holds for them, up to MAX_BATCH
    (pipelined puts go to the server in one round trip); the first one that does not
    belong is held in `s.held`, to run next."""
    batch = [first]
    while len(batch) < MAX_BATCH:
        s.held = read(s)
        if s.held is None or not same(s.held):
            break
        batch.append(s.held)
        s.held = None
    return batch


def answer_invalid(front: object, s: Session, cmd: Invalid) -> Task:
    """The task of input that is no command (either protocol): its error, and the end of
    the connection after it when the stream cannot be followed."""
    if cmd.close:
        s.eof = True
    if cmd.shed:
        outofmemory.note(f"session {s.id}'s command; it is answered so")
    return cmd.reply
    yield
