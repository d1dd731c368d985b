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
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True, unsafe_hash=True)
class Put:
    """``put <pri> <delay> <ttr> <bytes>`` plus its body (without the trailing CRLF).

    ``error`` is None for a good put, ``b"JOB_TOO_BIG\\r\\n"`` (body is b"", the
    bytes+2 following bytes were already discarded) or ``b"EXPECTED_CRLF\\r\\n"``
    (exactly bytes+2 bytes were consumed; body is b"").  ``ttr`` is the raw value; 0 is
    allowed here and the engine clamps it to 1 s.
    """

    pri: int
    delay: int
    ttr: int
    body: bytes
    error: bytes | None = None


@dataclass(slots=True, unsafe_hash=True)
class Reserve:
    """``reserve``: block until a job is ready in a watched tube."""


@dataclass(slots=True, unsafe_hash=True)
class ReserveWithTimeout:
    """``reserve-with-timeout <seconds>``; 0..2147483647 as in beanstalkd 1.13."""

    timeout: int


@dataclass(slots=True, unsafe_hash=True)
class ReserveJob:
    """``reserve-job <id>``: reserve a specific ready, delayed or buried job."""

    id: int


@dataclass(slots=True, unsafe_hash=True)
class Delete:
    """``delete <id>``."""

    id: int


@dataclass(slots=True, unsafe_hash=True)
class Release:
    """``release <id> <pri> <delay>``."""

    id: int
    pri: int
    delay: int


@dataclass(slots=True, unsafe_hash=True)
class Bury:
    """``bury <id> <pri>``."""

    id: int
    pri: int


@dataclass(slots=True, unsafe_hash=True)
class Touch:
    """``touch <id>``."""

    id: int


@dataclass(slots=True, unsafe_hash=True)
class Peek:
    """``peek <id>``."""

    id: int


@dataclass(slots=True, unsafe_hash=True)
class PeekReady:
    """``peek-ready`` (looks at the used tube)."""


@dataclass(slots=True, unsafe_hash=True)
class PeekDelayed:
    """``peek-delayed`` (looks at the used tube)."""


@dataclass(slots=True, unsafe_hash=True)
class PeekBuried:
    """``peek-buried`` (looks at the used tube)."""


@dataclass(slots=True, unsafe_hash=True)
class Kick:
    """``kick <bound>``; bound has strtoul semantics truncated to u32 (``-1`` = all)."""

    bound: int


@dataclass(slots=True, unsafe_hash=True)
class KickJob:
    """``kick-job <id>``."""

    id: int


@dataclass(slots=True, unsafe_hash=True)
class StatsJob:
    """``stats-job <id>``."""

    id: int


@dataclass(slots=True, unsafe_hash=True)
class StatsTube:
    """``stats-tube <tube>``."""

    tube: str


@dataclass(slots=True, unsafe_hash=True)
class Stats:
    """``stats``."""


@dataclass(slots=True, unsafe_hash=True)
class Use:
    """``use <tube>``."""

    tube: str


@dataclass(slots=True, unsafe_hash=True)
class Watch:
    """``watch <tube>``."""

    tube: str


@dataclass(slots=True, unsafe_hash=True)
class Ignore:
    """``ignore <tube>``."""

    tube: str


@dataclass(slots=True, unsafe_hash=True)
class ListTubes:
    """``list-tubes``."""


@dataclass(slots=True, unsafe_hash=True)
class ListTubeUsed:
    """``list-tube-used``."""


@dataclass(slots=True, unsafe_hash=True)
class ListTubesWatched:
    """``list-tubes-watched``."""


@dataclass(slots=True, unsafe_hash=True)
class PauseTube:
    """``pause-tube <tube> <seconds>``."""

    tube: str
    delay: int


@dataclass(slots=True, unsafe_hash=True)
class Quit:
    """``quit`` (any line starting with ``quit``): close with no reply."""


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


Command = (
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
    | ErrorReply
)

__all__ = [
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
