"""Fuzzing a real server: mutated command streams never crash it, desynchronise the
connection that sent them, or disturb another connection.

For each generated stream (tests/fuzz_streams.py, at most 64 KB, commands that cannot
block or touch another connection's jobs), a fresh connection sends the stream, then
``\\r\\n`` (and, if that left a put body open, the rest of the body and ``\\r\\n``
again), then the sentinel ``use fuzzsentinel`` + ``list-tube-used``. The parser model
(``fuzz_streams.frame``) says which commands the server sees, so the test knows exactly how
many replies come back and what each error reply is; the last two must be
``USING fuzzsentinel``. beanstalkd closes a connection only on ``quit`` (never for
BAD_FORMAT, UNKNOWN_COMMAND, EXPECTED_CRLF or JOB_TOO_BIG; tests/differential/test_parsing.py),
so a stream with a line that parses as ``quit`` (any line starting with ``quit``) must get
the replies before it and then EOF, and any other stream must not be closed.

Meanwhile a well-behaved connection on tube ``goodtube`` runs put / reserve / delete
between the stream's 16 KB pieces and must get exactly the right answers; afterwards a new
connection is served. Layouts: one process with one shard, and two serving processes
over four shards.
"""

from __future__ import annotations

import re
import select
import time
from collections.abc import Callable

import pytest
from fuzz_streams import CRLF, SAFE_KINDS, frame, fuzz_settings, streams
from helpers import Layout, connect, read_replies, send
from hypothesis import assume, given
from hypothesis import strategies as st

from shardq.protocol.commands import (
    Command,
    ErrorReply,
    Ignore,
    Kick,
    ListTubes,
    ListTubesWatched,
    ListTubeUsed,
    Peek,
    PeekBuried,
    PeekDelayed,
    PeekReady,
    Put,
    Quit,
    Stats,
    StatsJob,
    StatsTube,
    Use,
    Watch,
)

SENTINEL = b"use fuzzsentinel\r\nlist-tube-used\r\n"
USING_SENTINEL = b"USING fuzzsentinel\r\n"
MAX_STREAM = 64 * 1024
PIECE = 16 * 1024
#: Seconds for one fuzzed connection's whole exchange.
EXCHANGE_DEADLINE = 5.0

_BODY_HEADER = re.compile(rb"^(?:(?:RESERVED|FOUND) \d+ (\d+)|OK (\d+))$")


def complete(garbage: bytes) -> bytes | None:
    """``garbage`` + CRLF, + (while that leaves a put body open) the rest of the body and
    CRLF, + the sentinel; None if an open body would take the stream past MAX_STREAM.

    The CRLF after the garbage may itself be body bytes (``put 0 0 0 1\\r\\n\\0\\0``
    takes ``\\0\\0\\r`` as its body): the model decides where the stream is between
    commands, as beanstalkd does.
    """
    data = garbage + CRLF
    for _ in range(3):
        model = frame(data)
        if model.state == "line" and model.rest == b"":
            return data + SENTINEL
        if model.state != "body" or model.pending > MAX_STREAM:
            return None
        data += b"x" * model.pending + CRLF
    return None


def expected_reply_ok(cmd: Command, reply: bytes) -> bool:
    """Whether ``reply`` is a right answer to ``cmd`` whatever the server's state."""
    if isinstance(cmd, ErrorReply):
        return reply == cmd.reply
    if isinstance(cmd, Put):
        if cmd.error is not None:
            return reply == cmd.error
        return re.fullmatch(rb"INSERTED \d+\r\n", reply) is not None
    if isinstance(cmd, Use):
        return reply == b"USING %s\r\n" % cmd.tube.encode()
    if isinstance(cmd, Watch):
        return re.fullmatch(rb"WATCHING \d+\r\n", reply) is not None
    if isinstance(cmd, Ignore):
        return re.fullmatch(rb"(WATCHING \d+|NOT_IGNORED)\r\n", reply) is not None
    if isinstance(cmd, Kick):
        return re.fullmatch(rb"KICKED \d+\r\n", reply) is not None
    if isinstance(cmd, Peek | PeekReady | PeekDelayed | PeekBuried):
        return reply == b"NOT_FOUND\r\n" or reply.startswith(b"FOUND ")
    if isinstance(cmd, StatsJob | StatsTube):
        return reply == b"NOT_FOUND\r\n" or reply.startswith(b"OK ")
    if isinstance(cmd, Stats | ListTubes | ListTubesWatched):
        return reply.startswith(b"OK ")
    if isinstance(cmd, ListTubeUsed):
        return reply.startswith(b"USING ")
    return False


def _split_units(buf: bytearray) -> list[bytes]:
    """Take the complete reply units off the front of ``buf``."""
    units = []
    while (end := buf.find(CRLF)) >= 0:
        m = _BODY_HEADER.match(bytes(buf[:end]))
        size = end + 2 if m is None else end + 2 + int(m.group(1) or m.group(2)) + 2
        if len(buf) < size:
            break
        units.append(bytes(buf[:size]))
        del buf[:size]
    return units


class Good:
    """The well-behaved connection: put, reserve, delete on its own tube, checked exactly."""

    def __init__(self, port: int) -> None:
        self.sock = connect(port)
        self.n = 0
        send(self.sock, b"use goodtube\r\nwatch goodtube\r\nignore default\r\n")
        assert read_replies(self.sock, 3) == [
            b"USING goodtube\r\n",
            b"WATCHING 2\r\n",
            b"WATCHING 1\r\n",
        ]

    def cycle(self) -> None:
        self.n += 1
        body = b"good job %d" % self.n
        send(self.sock, b"put 7 0 60 %d\r\n%s\r\n" % (len(body), body))
        (inserted,) = read_replies(self.sock, 1)
        m = re.fullmatch(rb"INSERTED (\d+)\r\n", inserted)
        assert m is not None, inserted
        job = int(m.group(1))
        send(self.sock, b"reserve-with-timeout 5\r\n")
        assert read_replies(self.sock, 1) == [b"RESERVED %d %d\r\n%s\r\n" % (job, len(body), body)]
        send(self.sock, b"delete %d\r\npeek-ready\r\n" % job)
        assert read_replies(self.sock, 2) == [b"DELETED\r\n", b"NOT_FOUND\r\n"]


def exchange(port: int, data: bytes, good: Good, n: int, eof: bool) -> tuple[list[bytes], bool]:
    """Send ``data`` on a new connection, PIECE bytes at a time with a good cycle after
    each, reading replies as they come, until EOF (if ``eof``: a quit was sent), or else
    ``n`` replies and a short silence; fail at the deadline. Returns the reply units and
    whether the server closed the connection."""
    sock = connect(port)
    try:
        sock.setblocking(False)
        deadline = time.monotonic() + EXCHANGE_DEADLINE
        buf = bytearray()
        units: list[bytes] = []
        sent = 0
        next_good = min(PIECE, len(data) // 2)  # at least one good cycle mid-stream
        while True:
            if sent >= next_good:
                good.cycle()
                next_good += PIECE
            if sent == len(data) and len(units) >= n and not eof:
                readable, _, _ = select.select([sock], [], [], 0.02)
                if not readable:  # all the replies, and nothing more for 20 ms
                    return units, False
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"{n} replies not in time: {units[-5:]!r} {buf[:300]!r}"
            want_write = [sock] if sent < len(data) else []
            readable, writable, _ = select.select([sock], want_write, [], remaining)
            if writable:
                try:
                    sent += sock.send(data[sent : min(len(data), next_good)])
                except (BrokenPipeError, ConnectionResetError):
                    sent = len(data)  # closed: the read side sees EOF
            if readable:
                try:
                    chunk = sock.recv(1 << 16)
                except ConnectionResetError:
                    chunk = b""
                if not chunk:
                    return units + ([bytes(buf)] if buf else []), True
                buf += chunk
                units += _split_units(buf)
    finally:
        sock.close()


@st.composite
def server_streams(draw: st.DrawFn) -> bytes:
    """A stream of SAFE_KINDS commands and garbage, often repeated up to ~63 KB, sometimes with
    ``quit\\r\\n`` inserted (whether it is read as a quit is the model's call)."""
    base = draw(streams(kinds=SAFE_KINDS, max_pieces=16))
    times = draw(st.sampled_from([1, 1, 2, 10, 100, 1000]))
    data = (base * times)[: MAX_STREAM - 1024]
    if draw(st.integers(0, 5)) == 0:
        at = draw(st.integers(0, len(data)))
        data = data[:at] + b"quit\r\n" + data[at:]
    return data


def run_fuzz(port: int) -> dict[str, int]:
    """Run the examples against ``port``; returns counts of what they covered."""
    good = Good(port)
    seen = {"streams": 0, "closed": 0, "bytes": 0, "replies": 0, "errors": 0, "cycles": 0}

    @fuzz_settings(30)
    @given(garbage=server_streams())
    def check(garbage: bytes) -> None:
        data = complete(garbage)
        assume(data is not None and len(data) <= MAX_STREAM + 1024)
        assert data is not None
        model = frame(data)
        commands = model.commands
        assume(all(isinstance(c, (ErrorReply, *SAFE_KINDS)) for c in commands))
        quits = [i for i, c in enumerate(commands) if isinstance(c, Quit)]
        expect = commands[: quits[0]] if quits else commands
        assert commands[-2:] == [Use("fuzzsentinel"), ListTubeUsed()]  # the model's word
        units, closed = exchange(port, data, good, len(expect), bool(quits))
        seen["streams"] += 1
        seen["closed"] += closed
        seen["bytes"] += len(data)
        seen["replies"] += len(units)
        seen["errors"] += sum(
            isinstance(c, ErrorReply) or getattr(c, "error", None) is not None for c in expect
        )
        assert closed == bool(quits), f"closed={closed}, quit at {quits}"
        assert len(units) == len(expect), (len(units), len(expect), units[-3:])
        for cmd, reply in zip(expect, units, strict=True):
            assert expected_reply_ok(cmd, reply), (cmd, reply)
        if not quits:
            assert units[-2:] == [USING_SENTINEL, USING_SENTINEL]

    check()
    good.cycle()
    fresh = connect(port)
    try:
        send(fresh, b"list-tube-used\r\n")
        assert read_replies(fresh, 1) == [b"USING default\r\n"]
    finally:
        fresh.close()
    good.sock.close()
    seen["cycles"] = good.n
    return seen


@pytest.mark.parametrize("layout", [Layout(1), Layout(4, 2)], ids=str)
def test_fuzzed_connection_never_desynchronises_or_disturbs_others(
    layout: Layout, start_shardq: Callable[[int | Layout], int]
) -> None:
    seen = run_fuzz(start_shardq(layout))
    print(seen)
    # the examples really ran, and covered both outcomes and the well-behaved client
    assert seen["streams"] >= 30 and seen["closed"] >= 1 and seen["closed"] < seen["streams"]
    assert seen["errors"] >= 30 and seen["cycles"] >= seen["streams"] // 4


def test_exchange_detects_a_closed_connection(start_shardq: Callable[[int | Layout], int]) -> None:
    """The harness itself: quit mid-stream is seen as EOF after the replies before it."""
    port = start_shardq(Layout(1))
    good = Good(port)
    units, closed = exchange(port, b"stats-tube nosuch\r\nquit\r\n" + SENTINEL, good, 1, True)
    assert closed and units == [b"NOT_FOUND\r\n"]
    good.sock.close()
