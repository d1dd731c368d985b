"""The argument shapes the beanstalk commands share (a job id, a tube name, none), and the
parser's already-answered error line (`ErrorReply`): the bases of protocol/commands.py and
protocol/tube_commands.py."""

from __future__ import annotations

from shardq.protocol.record import Record


class NoArgs(Record):
    """A command without arguments."""

    __slots__ = ()


class IdArg(Record):
    """A command whose one argument is a job id."""

    __slots__ = ("id",)
    __match_args__ = ("id",)
    id: int

    def __init__(self, id: int) -> None:
        self.id = id


class TubeArg(Record):
    """A command whose one argument is a tube name."""

    __slots__ = ("tube",)
    __match_args__ = ("tube",)
    tube: str

    def __init__(self, tube: str) -> None:
        self.tube = tube


class ErrorReply(Record):
    """A line the parser already answered, e.g. ``b"BAD_FORMAT\\r\\n"``; send ``reply`` as is.

    ``stat`` names a stats counter the server must still increment, because
    beanstalkd counts the command before it finds the error: ``"cmd-put"``
    for a put line with trailing garbage (``put 0 0 1 1x``) and
    ``"cmd-pause-tube"`` for a pause-tube whose name is invalid
    (``pause-tube -x 1``).  It is None for every other error.
    """

    reply: bytes
    stat: str | None
    __slots__ = ("reply", "stat")
    __match_args__ = ("reply", "stat")

    def __init__(self, reply: bytes, stat: str | None = None) -> None:
        self.reply = reply
        self.stat = stat
