"""Parsed beanstalk commands, shared by the parser, the engine and the wire codec.

Every class is a slotted, hashable dataclass, cheap to make and to pass between layers;
treat commands as immutable. They are not ``frozen``: a frozen dataclass's ``__init__``
sets each field through ``object.__setattr__`` and costs about four times as much
(1.1 µs vs 0.28 µs for `Put`, measured), on the path of every command.

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

from dataclasses import dataclass
from typing import ClassVar


@dataclass(slots=True, unsafe_hash=True)
class Put:
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
    error: bytes | None = None


@dataclass(slots=True, unsafe_hash=True)
class Reserve:
    """``reserve``: block until a job is ready in a watched tube."""

    NAME: ClassVar[bytes] = b"reserve"
    ARGS: ClassVar[str] = "none"
    STAT: ClassVar[str | None] = "cmd-reserve"


@dataclass(slots=True, unsafe_hash=True)
class ReserveWithTimeout:
    """``reserve-with-timeout <seconds>``; 0..2147483647 as in beanstalkd 1.13."""

    NAME: ClassVar[bytes] = b"reserve-with-timeout "
    ARGS: ClassVar[str] = "reserve-with-timeout"
    STAT: ClassVar[str | None] = "cmd-reserve-with-timeout"

    timeout: int


@dataclass(slots=True, unsafe_hash=True)
class ReserveJob:
    """``reserve-job <id>``: reserve a specific ready, delayed or buried job."""

    NAME: ClassVar[bytes] = b"reserve-job "
    ARGS: ClassVar[str] = "id"
    STAT: ClassVar[str | None] = None

    id: int


@dataclass(slots=True, unsafe_hash=True)
class Delete:
    """``delete <id>``."""

    NAME: ClassVar[bytes] = b"delete "
    ARGS: ClassVar[str] = "id"
    STAT: ClassVar[str | None] = "cmd-delete"

    id: int


@dataclass(slots=True, unsafe_hash=True)
class Release:
    """``release <id> <pri> <delay>``."""

    NAME: ClassVar[bytes] = b"release "
    ARGS: ClassVar[str] = "release"
    STAT: ClassVar[str | None] = "cmd-release"

    id: int
    pri: int
    delay: int


@dataclass(slots=True, unsafe_hash=True)
class Bury:
    """``bury <id> <pri>``."""

    NAME: ClassVar[bytes] = b"bury "
    ARGS: ClassVar[str] = "bury"
    STAT: ClassVar[str | None] = "cmd-bury"

    id: int
    pri: int


@dataclass(slots=True, unsafe_hash=True)
class Touch:
    """``touch <id>``."""

    NAME: ClassVar[bytes] = b"touch "
    ARGS: ClassVar[str] = "id"
    STAT: ClassVar[str | None] = "cmd-touch"

    id: int


@dataclass(slots=True, unsafe_hash=True)
class Peek:
    """``peek <id>``."""

    NAME: ClassVar[bytes] = b"peek "
    ARGS: ClassVar[str] = "id"
    STAT: ClassVar[str | None] = "cmd-peek"

    id: int


@dataclass(slots=True, unsafe_hash=True)
class PeekReady:
    """``peek-ready`` (looks at the used tube)."""

    NAME: ClassVar[bytes] = b"peek-ready"
    ARGS: ClassVar[str] = "none"
    STAT: ClassVar[str | None] = "cmd-peek-ready"


@dataclass(slots=True, unsafe_hash=True)
class PeekDelayed:
    """``peek-delayed`` (looks at the used tube)."""

    NAME: ClassVar[bytes] = b"peek-delayed"
    ARGS: ClassVar[str] = "none"
    STAT: ClassVar[str | None] = "cmd-peek-delayed"


@dataclass(slots=True, unsafe_hash=True)
class PeekBuried:
    """``peek-buried`` (looks at the used tube)."""

    NAME: ClassVar[bytes] = b"peek-buried"
    ARGS: ClassVar[str] = "none"
    STAT: ClassVar[str | None] = "cmd-peek-buried"


@dataclass(slots=True, unsafe_hash=True)
class Kick:
    """``kick <bound>``; bound has strtoul semantics truncated to u32 (``-1`` = all)."""

    NAME: ClassVar[bytes] = b"kick "
    ARGS: ClassVar[str] = "kick"
    STAT: ClassVar[str | None] = "cmd-kick"

    bound: int


@dataclass(slots=True, unsafe_hash=True)
class KickJob:
    """``kick-job <id>``."""

    NAME: ClassVar[bytes] = b"kick-job "
    ARGS: ClassVar[str] = "id"
    STAT: ClassVar[str | None] = None

    id: int


@dataclass(slots=True, unsafe_hash=True)
class StatsJob:
    """``stats-job <id>``."""

    NAME: ClassVar[bytes] = b"stats-job "
    ARGS: ClassVar[str] = "id"
    STAT: ClassVar[str | None] = "cmd-stats-job"

    id: int


@dataclass(slots=True, unsafe_hash=True)
class StatsTube:
    """``stats-tube <tube>``."""

    NAME: ClassVar[bytes] = b"stats-tube "
    ARGS: ClassVar[str] = "tube"
    STAT: ClassVar[str | None] = "cmd-stats-tube"

    tube: str


@dataclass(slots=True, unsafe_hash=True)
class Stats:
    """``stats``."""

    NAME: ClassVar[bytes] = b"stats"
    ARGS: ClassVar[str] = "none"
    STAT: ClassVar[str | None] = "cmd-stats"


@dataclass(slots=True, unsafe_hash=True)
class Use:
    """``use <tube>``."""

    NAME: ClassVar[bytes] = b"use "
    ARGS: ClassVar[str] = "tube"
    STAT: ClassVar[str | None] = "cmd-use"

    tube: str


@dataclass(slots=True, unsafe_hash=True)
class Watch:
    """``watch <tube>``."""

    NAME: ClassVar[bytes] = b"watch "
    ARGS: ClassVar[str] = "tube"
    STAT: ClassVar[str | None] = "cmd-watch"

    tube: str


@dataclass(slots=True, unsafe_hash=True)
class Ignore:
    """``ignore <tube>``."""

    NAME: ClassVar[bytes] = b"ignore "
    ARGS: ClassVar[str] = "tube"
    STAT: ClassVar[str | None] = "cmd-ignore"

    tube: str


@dataclass(slots=True, unsafe_hash=True)
class ListTubes:
    """``list-tubes``."""

    NAME: ClassVar[bytes] = b"list-tubes"
    ARGS: ClassVar[str] = "none"
    STAT: ClassVar[str | None] = "cmd-list-tubes"


@dataclass(slots=True, unsafe_hash=True)
class ListTubeUsed:
    """``list-tube-used``."""

    NAME: ClassVar[bytes] = b"list-tube-used"
    ARGS: ClassVar[str] = "none"
    STAT: ClassVar[str | None] = "cmd-list-tube-used"


@dataclass(slots=True, unsafe_hash=True)
class ListTubesWatched:
    """``list-tubes-watched``."""

    NAME: ClassVar[bytes] = b"list-tubes-watched"
    ARGS: ClassVar[str] = "none"
    STAT: ClassVar[str | None] = "cmd-list-tubes-watched"


@dataclass(slots=True, unsafe_hash=True)
class PauseTube:
    """``pause-tube <tube> <seconds>``."""

    NAME: ClassVar[bytes] = b"pause-tube"
    ARGS: ClassVar[str] = "pause-tube"
    STAT: ClassVar[str | None] = "cmd-pause-tube"

    tube: str
    delay: int


@dataclass(slots=True, unsafe_hash=True)
class Quit:
    """``quit`` (any line starting with ``quit``): close with no reply."""

    NAME: ClassVar[bytes] = b"quit"
    ARGS: ClassVar[str] = "quit"
    STAT: ClassVar[str | None] = None


@dataclass(slots=True, unsafe_hash=True)
class ErrorReply:
    """A line the parser already answered, e.g. ``b"BAD_FORMAT\\r\\n"``; send ``reply`` as is.

    ``stat`` names a stats counter the server must still increment, because
    beanstalkd counts the command before it finds the error: ``"cmd-put"``
    for a put line with trailing garbage (``put 0 0 1 1x``) and
    ``"cmd-pause-tube"`` for a pause-tube whose name is invalid
    (``pause-tube -x 1``).  It is None for every other error.
    """

    reply: bytes
    stat: str | None = None


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
