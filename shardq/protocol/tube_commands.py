"""The beanstalk commands about tubes and the server (`stats-tube`, `stats`, `use`,
`watch`, `ignore`, the `list-*` commands, `pause-tube`, `quit`); the job commands are in
protocol/commands.py, which lists every command (`COMMANDS`)."""

from __future__ import annotations

from typing import ClassVar

from shardq.protocol.command_args import NoArgs, TubeArg
from shardq.protocol.record import Record


class StatsTube(TubeArg):
    """``stats-tube <tube>``."""

    NAME: ClassVar[bytes] = b"stats-tube "
    ARGS: ClassVar[str] = "tube"
    STAT: ClassVar[str | None] = "cmd-stats-tube"
    __slots__ = ()


class Stats(NoArgs):
    """``stats``."""

    NAME: ClassVar[bytes] = b"stats"
    ARGS: ClassVar[str] = "none"
    STAT: ClassVar[str | None] = "cmd-stats"
    __slots__ = ()


class Use(TubeArg):
    """``use <tube>``."""

    NAME: ClassVar[bytes] = b"use "
    ARGS: ClassVar[str] = "tube"
    STAT: ClassVar[str | None] = "cmd-use"
    __slots__ = ()


class Watch(TubeArg):
    """``watch <tube>``."""

    NAME: ClassVar[bytes] = b"watch "
    ARGS: ClassVar[str] = "tube"
    STAT: ClassVar[str | None] = "cmd-watch"
    __slots__ = ()


class Ignore(TubeArg):
    """``ignore <tube>``."""

    NAME: ClassVar[bytes] = b"ignore "
    ARGS: ClassVar[str] = "tube"
    STAT: ClassVar[str | None] = "cmd-ignore"
    __slots__ = ()


class ListTubes(NoArgs):
    """``list-tubes``."""

    NAME: ClassVar[bytes] = b"list-tubes"
    ARGS: ClassVar[str] = "none"
    STAT: ClassVar[str | None] = "cmd-list-tubes"
    __slots__ = ()


class ListTubeUsed(NoArgs):
    """``list-tube-used``."""

    NAME: ClassVar[bytes] = b"list-tube-used"
    ARGS: ClassVar[str] = "none"
    STAT: ClassVar[str | None] = "cmd-list-tube-used"
    __slots__ = ()


class ListTubesWatched(NoArgs):
    """``list-tubes-watched``."""

    NAME: ClassVar[bytes] = b"list-tubes-watched"
    ARGS: ClassVar[str] = "none"
    STAT: ClassVar[str | None] = "cmd-list-tubes-watched"
    __slots__ = ()


class PauseTube(Record):
    """``pause-tube <tube> <seconds>``."""

    NAME: ClassVar[bytes] = b"pause-tube"
    ARGS: ClassVar[str] = "pause-tube"
    STAT: ClassVar[str | None] = "cmd-pause-tube"

    tube: str
    delay: int
    __slots__ = ("tube", "delay")
    __match_args__ = ("tube", "delay")

    def __init__(self, tube: str, delay: int) -> None:
        self.tube = tube
        self.delay = delay


class Quit(NoArgs):
    """``quit`` (any line starting with ``quit``): close with no reply."""

    NAME: ClassVar[bytes] = b"quit"
    ARGS: ClassVar[str] = "quit"
    STAT: ClassVar[str | None] = None
    __slots__ = ()
