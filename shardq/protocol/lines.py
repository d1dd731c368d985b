"""One beanstalk command line, as beanstalkd 1.12 reads it: which command its prefix names
(`COMMAND_TABLE`, in ``which_cmd``'s order), and its arguments by each command's rule (the
numbers' bounds and spellings, tube names, the put header whose body follows). The stream
around the lines (buffering, bodies, overlong lines) is protocol/parser.py's.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import cast

from shardq.protocol.commands import (
    COMMANDS,
    Bury,
    Command,
    ErrorReply,
    Kick,
    Parsed,
    PauseTube,
    Quit,
    Release,
    ReserveWithTimeout,
)
from shardq.protocol.replies import (
    BAD_FORMAT,
    UNKNOWN_COMMAND,
)

#: A command line may be at most this long, CRLF included (beanstalkd LINE_BUF_SIZE).
MAX_LINE = 224
#: Longest tube name, in bytes (beanstalkd MAX_TUBE_NAME_LEN - 1).
MAX_TUBE_NAME = 200
#: Default max-job-size (``-z``), in bytes.
DEFAULT_MAX_JOB_SIZE = 65535

U32_MAX = 0xFFFFFFFF
U64_MAX = 0xFFFFFFFFFFFFFFFF
INT_MAX = 0x7FFFFFFF

_BAD = ErrorReply(BAD_FORMAT)
_UNKNOWN = ErrorReply(UNKNOWN_COMMAND)
_CRLF = b"\r\n"

# read_u32/read_u64: skip spaces only, then at least one ASCII digit, base 10.
_UINTS = {n: re.compile(rb" *([0-9]+)" + rb" +([0-9]+)" * (n - 1)) for n in range(1, 5)}
# strtoul: skip C isspace, optional sign, digits; anything may follow.
_STRTOUL = re.compile(rb"[ \t\n\v\f\r]*([+-]?)([0-9]+)")
# read_tube_name (pause-tube): skip spaces, then a maximal run of NAME_CHARS.
_NAME_RUN = re.compile(rb" *([A-Za-z0-9\-+/;.$_()]*)")
_NAME = re.compile(rb"[A-Za-z0-9+/;.$_()][A-Za-z0-9\-+/;.$_()]{0,199}")


# ---------------------------------------------------------------- numbers & names


def _read_ints(line: bytes, pos: int, limits: tuple[int, ...]) -> tuple[list[int], int] | None:
    """Numbers in a row, each as beanstalkd read_u32/read_u64; (values, end) or None.

    read_* skips spaces and needs a digit; since a run of digits is maximal, the
    next number needs at least one space, which is what the pattern says.
    """
    m = _UINTS[len(limits)].match(line, pos)
    if m is None:
        return None
    values = list(map(int, m.groups()))
    if any(map(int.__gt__, values, limits)):  # strtoumax ERANGE or the u32 check
        return None
    return values, m.end()


def _whole_ints(line: bytes, pos: int, limits: tuple[int, ...]) -> list[int] | None:
    """Numbers that must run to the end of the line (read_* with end == NULL)."""
    got = _read_ints(line, pos, limits)
    if got is None or got[1] != len(line):
        return None
    return got[0]


def _tube(line: bytes, pos: int) -> str | None:
    """is_valid_tube on the rest of the line: 1..200 NAME_CHARS, no leading '-'."""
    m = _NAME.fullmatch(line, pos)
    return None if m is None else m.group().decode("ascii")


# ---------------------------------------------------------------- handlers
# Each handler gets the command line (without CRLF) and the index just after
# the matched prefix, and returns a Command or a _PutHeader.


class _PutHeader:
    """A put line that parsed; the parser still has to read (or skip) its body."""

    __slots__ = ("pri", "delay", "ttr", "size", "garbage", "shed")

    pri: int
    delay: int
    ttr: int
    size: int
    garbage: bool  # text followed the size; an error only if the size is allowed
    shed: bool  # its body could not be kept (out of memory): dropped, as too big

    def __init__(
        self, pri: int, delay: int, ttr: int, size: int, garbage: bool, shed: bool = False
    ) -> None:
        self.pri = pri
        self.delay = delay
        self.ttr = ttr
        self.size = size
        self.garbage = garbage
        self.shed = shed


Handler = Callable[[bytes, int], "Command | _PutHeader"]


def _put(line: bytes, pos: int) -> Command | _PutHeader:
    got = _read_ints(line, pos, (U32_MAX,) * 4)
    if got is None:
        return _BAD
    (pri, delay, ttr, size), end = got
    # The parser checks the size limit before the trailing-garbage test.
    return _PutHeader(pri, delay, ttr, size, end != len(line))


def _no_args(cmd: Command) -> Handler:
    def handle(line: bytes, pos: int) -> Command:
        return cmd if pos == len(line) else _BAD

    return handle


def _one_id(cls: Callable[[int], Command]) -> Handler:
    def handle(line: bytes, pos: int) -> Command:
        got = _whole_ints(line, pos, (U64_MAX,))
        return _BAD if got is None else cls(got[0])

    return handle


def _one_tube(cls: Callable[[str], Command]) -> Handler:
    def handle(line: bytes, pos: int) -> Command:
        name = _tube(line, pos)
        return _BAD if name is None else cls(name)

    return handle


def _reserve_with_timeout(line: bytes, pos: int) -> Command:
    # beanstalkd 1.13: read_u32 with an end pointer, so trailing text is ignored.
    got = _read_ints(line, pos, (INT_MAX,))
    return _BAD if got is None else ReserveWithTimeout(got[0][0])


def _release(line: bytes, pos: int) -> Command:
    got = _whole_ints(line, pos, (U64_MAX, U32_MAX, U32_MAX))
    return _BAD if got is None else Release(*got)


def _bury(line: bytes, pos: int) -> Command:
    got = _whole_ints(line, pos, (U64_MAX, U32_MAX))
    return _BAD if got is None else Bury(*got)


def _kick(line: bytes, pos: int) -> Command:
    # strtoul(…, 10) truncated to a C uint: "-1" kicks everything, junk after the digits is ignored.
    m = _STRTOUL.match(line, pos)
    if m is None:
        return _BAD
    value = int(m.group(2))
    if value > U64_MAX:
        return _BAD  # ERANGE
    if m.group(1) == b"-":
        value = -value
    return Kick(value & U32_MAX)


def _pause_tube(line: bytes, pos: int) -> Command:
    # read_tube_name skips spaces and takes a maximal run of NAME_CHARS, then
    # the delay must end the line; only then is the name validated (and the
    # command already counted).
    m = _NAME_RUN.match(line, pos)
    assert m is not None  # the pattern matches the empty string
    pos, end = m.span(1)
    if end == pos:
        return _BAD
    got = _whole_ints(line, end, (U32_MAX,))
    if got is None:
        return _BAD
    name = _tube(line[:end], pos)
    if name is None:
        return ErrorReply(BAD_FORMAT, stat="cmd-pause-tube")
    return PauseTube(name, got[0])


def _quit(line: bytes, pos: int) -> Command:
    return Quit()


#: the parse rules that commands name in their ARGS (commands.py)
_OWN_RULES: dict[str, Handler] = {
    "put": _put,
    "reserve-with-timeout": _reserve_with_timeout,
    "release": _release,
    "bury": _bury,
    "kick": _kick,
    "pause-tube": _pause_tube,
    "quit": _quit,
}


def _rule(cls: type[Parsed]) -> Handler:
    """The parse rule a command class declares (commands.py: ARGS)."""
    kind = cls.ARGS
    if kind == "none":
        return _no_args(cast(Callable[[], Command], cls)())
    if kind == "id":
        return _one_id(cast(Callable[[int], Command], cls))
    if kind == "tube":
        return _one_tube(cast(Callable[[str], Command], cls))
    return _OWN_RULES[kind]


#: beanstalkd which_cmd: first prefix (strncmp) wins, in this order.
COMMAND_TABLE: tuple[tuple[bytes, Handler], ...] = tuple((cls.NAME, _rule(cls)) for cls in COMMANDS)


def _index_by_first_byte(
    table: tuple[tuple[bytes, Handler], ...],
) -> dict[int, tuple[tuple[bytes, Handler], ...]]:
    """Prefixes with different first bytes never compete, so split the table."""
    index: dict[int, list[tuple[bytes, Handler]]] = {}
    for prefix, handler in table:
        index.setdefault(prefix[0], []).append((prefix, handler))
    return {first: tuple(entries) for first, entries in index.items()}


_BY_FIRST = _index_by_first_byte(COMMAND_TABLE)


def parse_line(line: bytes) -> Command | _PutHeader:
    """Turn one command line (CRLF removed, at most 222 bytes) into a command."""
    if b"\0" in line:
        return _BAD  # beanstalkd's strlen check
    if line:
        for prefix, handler in _BY_FIRST.get(line[0], ()):
            if line.startswith(prefix):
                return handler(line, len(prefix))
    return _UNKNOWN


# ---------------------------------------------------------------- parser
