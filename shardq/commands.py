"""Parsed beanstalk commands, shared by the parser, the engine and the wire codec.

Every class is a frozen, slotted dataclass so that commands are cheap, hashable
and safe to pass between layers.  A command object means its arguments were
valid: beanstalkd only counts ``cmd-*`` stats for commands whose arguments
parsed, so an argument error is an :class:`ErrorReply`, never a command (the
two errors beanstalkd counts anyway are flagged by ``ErrorReply.stat``).

Units: ``delay``, ``ttr`` and ``timeout`` are whole seconds, exactly as sent.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
class Reserve:
    """``reserve``: block until a job is ready in a watched tube."""


@dataclass(frozen=True, slots=True)
class ReserveWithTimeout:
    """``reserve-with-timeout <seconds>``; 0..2147483647 as in beanstalkd 1.13."""

    timeout: int


@dataclass(frozen=True, slots=True)
class ReserveJob:
    """``reserve-job <id>``: reserve a specific ready, delayed or buried job."""

    id: int


@dataclass(frozen=True, slots=True)
class Delete:
    """``delete <id>``."""

    id: int


@dataclass(frozen=True, slots=True)
class Release:
    """``release <id> <pri> <delay>``."""

    id: int
    pri: int
    delay: int


@dataclass(frozen=True, slots=True)
class Bury:
    """``bury <id> <pri>``."""

    id: int
    pri: int


@dataclass(frozen=True, slots=True)
class Touch:
    """``touch <id>``."""

    id: int


@dataclass(frozen=True, slots=True)
class Peek:
    """``peek <id>``."""

    id: int


@dataclass(frozen=True, slots=True)
class PeekReady:
    """``peek-ready`` (looks at the used tube)."""


@dataclass(frozen=True, slots=True)
class PeekDelayed:
    """``peek-delayed`` (looks at the used tube)."""


@dataclass(frozen=True, slots=True)
class PeekBuried:
    """``peek-buried`` (looks at the used tube)."""


@dataclass(frozen=True, slots=True)
class Kick:
    """``kick <bound>``; bound has strtoul semantics truncated to u32 (``-1`` = all)."""

    bound: int


@dataclass(frozen=True, slots=True)
class KickJob:
    """``kick-job <id>``."""

    id: int


@dataclass(frozen=True, slots=True)
class StatsJob:
    """``stats-job <id>``."""

    id: int


@dataclass(frozen=True, slots=True)
class StatsTube:
    """``stats-tube <tube>``."""

    tube: str


@dataclass(frozen=True, slots=True)
class Stats:
    """``stats``."""


@dataclass(frozen=True, slots=True)
class Use:
    """``use <tube>``."""

    tube: str


@dataclass(frozen=True, slots=True)
class Watch:
    """``watch <tube>``."""

    tube: str


@dataclass(frozen=True, slots=True)
class Ignore:
    """``ignore <tube>``."""

    tube: str


@dataclass(frozen=True, slots=True)
class ListTubes:
    """``list-tubes``."""


@dataclass(frozen=True, slots=True)
class ListTubeUsed:
    """``list-tube-used``."""


@dataclass(frozen=True, slots=True)
class ListTubesWatched:
    """``list-tubes-watched``."""


@dataclass(frozen=True, slots=True)
class PauseTube:
    """``pause-tube <tube> <seconds>``."""

    tube: str
    delay: int


@dataclass(frozen=True, slots=True)
class Quit:
    """``quit`` (any line starting with ``quit``): close with no reply."""


@dataclass(frozen=True, slots=True)
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
