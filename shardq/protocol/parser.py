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

from shardq.protocol.commands import (
    Command,
    ErrorReply,
    Put,
)
from shardq.protocol.lines import (  # noqa: F401  (re-exported: the parser's face)
    _BAD,
    _CRLF,
    COMMAND_TABLE,
    DEFAULT_MAX_JOB_SIZE,
    INT_MAX,
    MAX_LINE,
    MAX_TUBE_NAME,
    U32_MAX,
    U64_MAX,
    _PutHeader,
    parse_line,
)
from shardq.protocol.replies import (
    BAD_FORMAT,
    EXPECTED_CRLF,
    JOB_TOO_BIG,
    OUT_OF_MEMORY,
)


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
