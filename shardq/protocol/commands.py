"""Parsed beanstalk commands, shared by the parser, the engine and the wire codec.

Every class is slotted and hashable (`shardq.protocol.record.Record`), cheap to make and
to pass between layers; treat commands as immutable. They are not frozen: a frozen
dataclass's ``__init__`` sets each field through ``object.__setattr__`` and costs about
four times as much (1.1 µs vs 0.28 µs for `Put`, measured), on the path of every command.

A command object means its arguments were valid: beanstalkd only counts ``cmd-*``
stats for commands whose arguments parsed, so an argument error is an
:class:`ErrorReply`, never a command (the two errors beanstalkd counts anyway are
flagged by ``ErrorReply.stat``).

Units: ``delay``, ``ttr`` and ``timeout`` are whole seconds, exactly as sent.

Each command class also declares how it is read and counted: ``NAME`` (the line prefix
beanstalkd's ``which_cmd`` matches), ``ARGS`` (the parse rule: ``"none"``, ``"id"``,
``"tube"``, or a rule of its own in parser.py) and ``STAT`` (its ``cmd-*`` counter, or
None). `COMMANDS` lists them in ``which_cmd``'s order (the first matching prefix wins), and
the parser and the stats are built from it: a command with standard arguments is added
here alone, on the protocol side.
"""

from __future__ import annotations

from typing import ClassVar

from shardq.protocol.command_args import ErrorReply, IdArg, NoArgs
from shardq.protocol.record import Record
from shardq.protocol.tube_commands import (
    Ignore,
    ListTubes,
    ListTubesWatched,
    ListTubeUsed,
    PauseTube,
    Quit,
    Stats,
    StatsTube,
    Use,
    Watch,
)


class Put(Record):
    """``put <pri> <delay> <ttr> <bytes>`` plus its body (without the trailing CRLF).

    ``error`` is None for a good put, ``b"JOB_TOO_BIG\\r\\n"`` (body is b"", the
    bytes+2 following bytes were already discarded) or ``b"EXPECTED_CRLF\\r\\n"``
    (exactly bytes+2 bytes were consumed; body is b"").  ``ttr`` is the raw value; 0 is
    allowed here and the engine clamps it to 1 s.
    """

    NAME: ClassVar[bytes] = b"put "
    ARGS: ClassVar[str] = "put"
    STAT: ClassVar[str | None] = "cmd-put"

    pri: int
    delay: int
    ttr: int
    body: bytes
    error: bytes | None
    __slots__ = ("pri", "delay", "ttr", "body", "error")
    __match_args__ = ("pri", "delay", "ttr", "body", "error")

    def __init__(
        self, pri: int, delay: int, ttr: int, body: bytes, error: bytes | None = None
    ) -> None:
        self.pri = pri
        self.delay = delay
        self.ttr = ttr
        self.body = body
        self.error = error


class Reserve(NoArgs):
    """``reserve``: block until a job is ready in a watched tube."""

    NAME: ClassVar[bytes] = b"reserve"
    ARGS: ClassVar[str] = "none"
    STAT: ClassVar[str | None] = "cmd-reserve"
    __slots__ = ()


class ReserveWithTimeout(Record):
    """``reserve-with-timeout <seconds>``; 0..2147483647 as in beanstalkd 1.13."""

    NAME: ClassVar[bytes] = b"reserve-with-timeout "
    ARGS: ClassVar[str] = "reserve-with-timeout"
    STAT: ClassVar[str | None] = "cmd-reserve-with-timeout"

    timeout: int
    __slots__ = ("timeout",)
    __match_args__ = ("timeout",)

    def __init__(self, timeout: int) -> None:
        self.timeout = timeout


class ReserveJob(IdArg):
    """``reserve-job <id>``: reserve a specific ready, delayed or buried job."""

    NAME: ClassVar[bytes] = b"reserve-job "
    ARGS: ClassVar[str] = "id"
    STAT: ClassVar[str | None] = None
    __slots__ = ()


class Delete(IdArg):
    """``delete <id>``."""

    NAME: ClassVar[bytes] = b"delete "
    ARGS: ClassVar[str] = "id"
    STAT: ClassVar[str | None] = "cmd-delete"
    __slots__ = ()


class Release(Record):
    """``release <id> <pri> <delay>``."""

    NAME: ClassVar[bytes] = b"release "
    ARGS: ClassVar[str] = "release"
    STAT: ClassVar[str | None] = "cmd-release"

    id: int
    pri: int
    delay: int
    __slots__ = ("id", "pri", "delay")
    __match_args__ = ("id", "pri", "delay")

    def __init__(self, id: int, pri: int, delay: int) -> None:
        self.id = id
        self.pri = pri
        self.delay = delay


class Bury(Record):
    """``bury <id> <pri>``."""

    NAME: ClassVar[bytes] = b"bury "
    ARGS: ClassVar[str] = "bury"
    STAT: ClassVar[str | None] = "cmd-bury"

    id: int
    pri: int
    __slots__ = ("id", "pri")
    __match_args__ = ("id", "pri")

    def __init__(self, id: int, pri: int) -> None:
        self.id = id
        self.pri = pri


class Touch(IdArg):
    """``touch <id>``."""

    NAME: ClassVar[bytes] = b"touch "
    ARGS: ClassVar[str] = "id"
    STAT: ClassVar[str | None] = "cmd-touch"
    __slots__ = ()


class Peek(IdArg):
    """``peek <id>``."""

    NAME: ClassVar[bytes] = b"peek "
    ARGS: ClassVar[str] = "id"
    STAT: ClassVar[str | None] = "cmd-peek"
    __slots__ = ()


class PeekReady(NoArgs):
    """``peek-ready`` (looks at the used tube)."""

    NAME: ClassVar[bytes] = b"peek-ready"
    ARGS: ClassVar[str] = "none"
    STAT: ClassVar[str | None] = "cmd-peek-ready"
    __slots__ = ()


class PeekDelayed(NoArgs):
    """``peek-delayed`` (looks at the used tube)."""

    NAME: ClassVar[bytes] = b"peek-delayed"
    ARGS: ClassVar[str] = "none"
    STAT: ClassVar[str | None] = "cmd-peek-delayed"
    __slots__ = ()


class PeekBuried(NoArgs):
    """``peek-buried`` (looks at the used tube)."""

    NAME: ClassVar[bytes] = b"peek-buried"
    ARGS: ClassVar[str] = "none"
    STAT: ClassVar[str | None] = "cmd-peek-buried"
    __slots__ = ()


class Kick(Record):
    """``kick <bound>``; bound has strtoul semantics truncated to u32 (``-1`` = all)."""

    NAME: ClassVar[bytes] = b"kick "
    ARGS: ClassVar[str] = "kick"
    STAT: ClassVar[str | None] = "cmd-kick"

    bound: int
    __slots__ = ("bound",)
    __match_args__ = ("bound",)

    def __init__(self, bound: int) -> None:
        self.bound = bound


class KickJob(IdArg):
    """``kick-job <id>``."""

    NAME: ClassVar[bytes] = b"kick-job "
    ARGS: ClassVar[str] = "id"
    STAT: ClassVar[str | None] = None
    __slots__ = ()


class StatsJob(IdArg):
    """``stats-job <id>``."""

    NAME: ClassVar[bytes] = b"stats-job "
    ARGS: ClassVar[str] = "id"
    STAT: ClassVar[str | None] = "cmd-stats-job"
    __slots__ = ()


Parsed = (
    Put
    | Reserve
    | ReserveWithTimeout
    | ReserveJob
    | Delete
    | Release
    | Bury
    | Touch
    | Peek
    | PeekReady
    | PeekDelayed
    | PeekBuried
    | Kick
    | KickJob
    | StatsJob
    | StatsTube
    | Stats
    | Use
    | Watch
    | Ignore
    | ListTubes
    | ListTubeUsed
    | ListTubesWatched
    | PauseTube
    | Quit
)  #: a command whose line parsed
Command = Parsed | ErrorReply


#: every command, in beanstalkd's which_cmd order: the first prefix that matches wins
COMMANDS: tuple[type[Parsed], ...] = (
    Put,
    Peek,
    PeekReady,
    PeekDelayed,
    PeekBuried,
    ReserveWithTimeout,
    ReserveJob,
    Reserve,
    Delete,
    Release,
    Bury,
    Kick,
    KickJob,
    Touch,
    StatsJob,
    StatsTube,
    Stats,
    Use,
    Watch,
    Ignore,
    ListTubesWatched,
    ListTubeUsed,
    ListTubes,
    Quit,
    PauseTube,
)

__all__ = [
    "COMMANDS",
    "Parsed",
    "Bury",
    "Command",
    "Delete",
    "ErrorReply",
    "Ignore",
    "Kick",
    "KickJob",
    "ListTubeUsed",
    "ListTubes",
    "ListTubesWatched",
    "PauseTube",
    "Peek",
    "PeekBuried",
    "PeekDelayed",
    "PeekReady",
    "Put",
    "Quit",
    "Release",
    "Reserve",
    "ReserveJob",
    "ReserveWithTimeout",
    "Stats",
    "StatsJob",
    "StatsTube",
    "Touch",
    "Use",
    "Watch",
]
