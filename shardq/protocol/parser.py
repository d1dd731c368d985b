"""Sans-IO parser of the beanstalk protocol: bytes in, commands out.

Why a separate, pure module: every quirk of beanstalkd 1.12's parser (prefix
matching, per-command number rules, the put body, the JOB_TOO_BIG bit bucket)
lives here and nowhere else, so it can be tested byte for byte without sockets
and reused by every front end.  It never touches sockets, clocks or codecs.

shardq deliberately fixes beanstalkd's framing bugs (see docs/COMPATIBILITY.md):
any line longer than 224 bytes (CRLF included) gets exactly one BAD_FORMAT once
its CRLF arrives, and a bare ``\\r`` is an ordinary byte of the line instead of
stalling the connection.  ``reserve-with-timeout`` parses as in 1.13.

Usage::

    parser = Parser(max_job_size=65535)
    parser.feed(data)
    while (cmd := parser.next_command()) is not None:
        ...  # one Command per request, in order
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
    Put,
    Quit,
    Release,
    ReserveWithTimeout,
)
from shardq.protocol.replies import (
    BAD_FORMAT,
    EXPECTED_CRLF,
    JOB_TOO_BIG,
    OUT_OF_MEMORY,
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


class Parser:
    """Incremental parser for one connection.

    ``feed()`` only stores bytes; ``next_command()`` returns the next complete
    command, or None when more bytes are needed.  Replies are the caller's job.
    """

    __slots__ = ("_buf", "_pos", "_max_job_size", "_put", "_skip", "_overlong")

    def __init__(self, max_job_size: int = DEFAULT_MAX_JOB_SIZE) -> None:
        self._buf = bytearray()
        self._pos = 0  # start of unparsed data in _buf
        self._max_job_size = max_job_size
        self._put: _PutHeader | None = None  # waiting for this put's body (or skipping it)
        self._skip = 0  # bytes still to discard for a JOB_TOO_BIG put
        self._overlong = False  # discarding an over-long line up to its CRLF

    def feed(self, data: bytes | memoryview) -> None:
        """Buffer bytes received from the client."""
        if self._skip and self._pos == len(self._buf):
            # Bit bucket: drop body bytes straight away instead of storing them.
            n = min(self._skip, len(data))
            self._skip -= n
            self._buf += memoryview(data)[n:]
        else:
            self._buf += data

    def handover(self) -> bytes | None:
        """The bytes received and not yet parsed, when the parser is between commands (so
        another parser fed them goes on exactly here); None in the middle of a put body,
        a skipped body or an over-long line."""
        if self._put is not None or self._skip or self._overlong:
            return None
        return bytes(self._buf[self._pos :])

    def shed(self) -> bool:
        """Out of memory: give up the put whose body is being read (or whose line is next),
        its body dropped as a too big one's and answered OUT_OF_MEMORY, as beanstalkd does
        a put it cannot allocate. False if there is no such put."""
        if self._put is None and not self._skip and not self._overlong:
            end = self._buf.find(_CRLF, self._pos, self._pos + MAX_LINE)
            header = parse_line(bytes(self._buf[self._pos : end])) if end >= 0 else None
            if not isinstance(header, _PutHeader) or header.garbage:
                return False
            self._pos, self._put = end + 2, header
        header = self._put
        if header is None or header.shed or header.size > self._max_job_size:
            return False  # none, shed already, or dropped as it comes anyway (too big)
        header.shed, self._skip = True, header.size + 2
        if len(self._buf) - self._pos < self._skip:  # drop what of its body is held now
            self._skip_body(header)  # (all of it held: next_command drops it)
            self._compact()
        return True

    @property
    def at_rest(self) -> bool:
        """Between commands with nothing buffered: input may be parsed elsewhere (the serving
        process's fast path) and the rest fed here."""
        return (
            self._pos == len(self._buf)
            and self._put is None
            and not self._skip
            and not self._overlong
        )

    @property
    def max_job_size(self) -> int:
        return self._max_job_size

    @property
    def buffered(self) -> int:
        """Bytes received but not yet consumed (discarded bytes are never held)."""
        return len(self._buf) - self._pos

    def next_command(self) -> Command | None:
        """Return the next command, or None if a complete one is not buffered yet."""
        if self._put is not None:
            cmd = self._take_body()
        elif self._overlong:
            cmd = self._drop_overlong()
        else:
            cmd = self._take_line()
        if cmd is None:
            self._compact()
        return cmd

    def _compact(self) -> None:
        # Called only when waiting for data, so a big pipelined buffer is
        # consumed through _pos and shifted once, not once per command.
        if self._pos:
            del self._buf[: self._pos]
            self._pos = 0

    def _take_line(self) -> Command | None:
        buf, pos = self._buf, self._pos
        end = buf.find(_CRLF, pos, pos + MAX_LINE)
        if end < 0:
            if len(buf) - pos >= MAX_LINE:
                self._overlong = True
                return self._drop_overlong()
            return None
        cmd = parse_line(bytes(buf[pos:end]))  # before it is consumed: memory may run out
        self._pos = end + 2
        if isinstance(cmd, _PutHeader):
            return self._start_body(cmd)
        return cmd

    def _drop_overlong(self) -> Command | None:
        buf = self._buf
        end = buf.find(_CRLF, self._pos)
        if end >= 0:
            self._pos = end + 2
            self._overlong = False
            return _BAD
        # Keep a trailing '\r' in case its '\n' is in the next read.
        self._pos = len(buf) - 1 if buf.endswith(b"\r") else len(buf)
        return None

    def _start_body(self, header: _PutHeader) -> Command | None:
        if header.size > self._max_job_size:
            self._skip = header.size + 2  # JOB_TOO_BIG: bit bucket, even with garbage
        elif header.garbage:
            return ErrorReply(BAD_FORMAT, stat="cmd-put")
        self._put = header
        return self._take_body()

    def _take_body(self) -> Command | None:
        header = self._put
        assert header is not None
        if header.size > self._max_job_size or header.shed:
            return self._skip_body(header)
        need = header.size + 2
        buf, pos = self._buf, self._pos
        if len(buf) - pos < need:
            return None
        end = pos + header.size
        # the body copied before anything is consumed: out of memory, the put can be shed
        body = bytes(memoryview(buf)[pos:end]) if buf[end : end + 2] == _CRLF else None
        self._pos = end + 2
        self._put = None
        if body is None:
            return Put(header.pri, header.delay, header.ttr, b"", EXPECTED_CRLF)
        return Put(header.pri, header.delay, header.ttr, body)

    def _skip_body(self, header: _PutHeader) -> Command | None:
        n = min(self._skip, len(self._buf) - self._pos)
        self._pos += n
        self._skip -= n
        if self._skip:
            return None
        self._put = None
        return Put(
            header.pri, header.delay, header.ttr, b"", OUT_OF_MEMORY if header.shed else JOB_TOO_BIG
        )


__all__ = [
    "COMMAND_TABLE",
    "DEFAULT_MAX_JOB_SIZE",
    "MAX_LINE",
    "MAX_TUBE_NAME",
    "Parser",
    "parse_line",
]
