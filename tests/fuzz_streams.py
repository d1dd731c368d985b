"""Hypothesis strategies for beanstalk command streams, and a reference framing model.

Shared by the parser fuzz tests (tests/unit/test_proto_fuzz.py) and the server fuzz tests
(tests/integration/test_fuzz_server.py).

Streams are built from *pieces*: well-formed commands (every command of
``shardq.protocol.commands.COMMANDS``, puts with a body of the declared size), mutated
commands (byte flips, truncations, extra spaces, a missing CRLF, bare ``\\r`` / ``\\n``,
huge and negative numbers, wrong body sizes), over-long lines (> 224 bytes) and random
binary; then a few byte-level mutations may be applied to the whole stream.

:func:`frame` is an independent, whole-stream model of beanstalkd's framing as shardq
implements it (docs/COMPATIBILITY.md, "Deliberate differences", over-long lines): a line
is everything up to the first CRLF; a line longer than 222 bytes (224 with its CRLF) is
one ``BAD_FORMAT``; a put header then takes exactly ``size + 2`` bytes, answered
``JOB_TOO_BIG`` if ``size`` is over the limit, else ``EXPECTED_CRLF`` if those bytes do
not end in CRLF, else the job. Line contents are read by ``parse_line`` (tested line by
line elsewhere); the incremental ``Parser`` must agree with this model on every stream.

Run counts: every fuzz test uses :func:`fuzz_settings` (derandomized, so CI is reproducible);
``SHARDQ_FUZZ_EXAMPLES=N`` sets the example count of every one of them for a long run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from shardq.protocol.commands import (
    COMMANDS,
    Command,
    ErrorReply,
    Ignore,
    Kick,
    ListTubes,
    ListTubesWatched,
    ListTubeUsed,
    Parsed,
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
from shardq.protocol.parser import MAX_LINE, Parser, _PutHeader, parse_line
from shardq.protocol.replies import BAD_FORMAT, EXPECTED_CRLF, JOB_TOO_BIG

#: Commands a fuzzed connection may send to a live server: none blocks, none touches
#: another connection's jobs (kick acts on the fuzzed connection's own tube).
SAFE_KINDS: tuple[type[Parsed], ...] = (
    Put,
    Peek,
    PeekReady,
    PeekDelayed,
    PeekBuried,
    Kick,
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
)

CRLF = b"\r\n"


def examples(default: int) -> int:
    """The example count: ``SHARDQ_FUZZ_EXAMPLES`` if set, else ``default``."""
    return int(os.environ.get("SHARDQ_FUZZ_EXAMPLES", default))


def fuzz_settings(default_examples: int) -> settings:
    """Deterministic settings: derandomized, no example database, no deadline."""
    return settings(
        max_examples=examples(default_examples),
        derandomize=True,
        database=None,
        deadline=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


settings.register_profile("shardq-fuzz", fuzz_settings(200))

# ---------------------------------------------------------------- valid commands

U32 = 0xFFFFFFFF
U64 = 0xFFFFFFFFFFFFFFFF
NAME_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-+/;.$_()"

u32s = st.one_of(st.integers(0, 1000), st.sampled_from([0, 1, 2**31 - 1, 2**31, U32]))
tube_names = st.text(NAME_CHARS, min_size=1, max_size=20).filter(lambda s: s[0] != "-")


def _num(n: int) -> bytes:
    return str(n).encode()


@st.composite
def put_command(draw: st.DrawFn, max_body: int = 300) -> bytes:
    """``put`` with a body of exactly the declared size."""
    body = draw(st.binary(max_size=max_body))
    pri, delay, ttr = (draw(st.integers(0, U32)) for _ in range(3))
    return b"put %d %d %d %d\r\n%s\r\n" % (pri, delay, ttr, len(body), body)


@st.composite
def valid_command(draw: st.DrawFn, kinds: tuple[type[Parsed], ...] = COMMANDS) -> bytes:
    """One well-formed command of a kind drawn from ``kinds``, CRLF included."""
    cls = draw(st.sampled_from(kinds))
    if cls.ARGS == "put":
        return draw(put_command())
    name: bytes = cls.NAME
    if cls.ARGS == "none":
        line = name
    elif cls.ARGS == "id":
        line = name + _num(draw(st.integers(0, U64)))
    elif cls.ARGS == "tube":
        line = name + draw(tube_names).encode()
    elif cls.ARGS == "reserve-with-timeout":
        line = name + _num(draw(st.integers(0, 2**31 - 1)))
    elif cls.ARGS == "release":
        line = name + b"%d %d %d" % (draw(st.integers(0, U64)), draw(u32s), draw(u32s))
    elif cls.ARGS == "bury":
        line = name + b"%d %d" % (draw(st.integers(0, U64)), draw(u32s))
    elif cls.ARGS == "kick":
        line = name + _num(draw(st.integers(0, U32)))
    elif cls.ARGS == "pause-tube":
        line = name + b" " + draw(tube_names).encode() + b" " + _num(draw(st.integers(0, U32)))
    elif cls.ARGS == "quit":
        line = name
    else:  # a new parse rule: give it garbage; the tests still hold
        line = name + draw(st.binary(max_size=20))
    return line + CRLF


# ---------------------------------------------------------------- mutations


@st.composite
def mutated(draw: st.DrawFn, piece: bytes) -> bytes:
    """One mutation of ``piece``."""
    data = bytearray(piece)
    kind = draw(
        st.sampled_from(
            ["flip", "truncate", "spaces", "no-crlf", "bare-cr", "bare-lf", "number", "insert"]
        )
    )
    at = draw(st.integers(0, len(data)))
    if kind == "flip" and data:
        i = min(at, len(data) - 1)
        data[i] ^= 1 << draw(st.integers(0, 7))
    elif kind == "truncate":
        del data[at:]
    elif kind == "spaces":
        data[at:at] = b" " * draw(st.integers(1, 5))
    elif kind == "no-crlf":
        end = data.find(CRLF)
        if end >= 0:
            del data[end : end + draw(st.integers(1, 2))]
    elif kind == "bare-cr":
        data[at:at] = b"\r"
    elif kind == "bare-lf":
        data[at:at] = b"\n"
    elif kind == "number":
        number = draw(
            st.sampled_from([b"-1", b"-0", b"+5", b"99999999999999999999999", b"4294967296"])
        )
        data[at:at] = number
    else:
        data[at:at] = draw(st.binary(min_size=1, max_size=8))
    return bytes(data)


@st.composite
def wrong_size_put(draw: st.DrawFn) -> bytes:
    """A put whose body is not the declared size, or whose size is over a limit."""
    body = draw(st.binary(max_size=100))
    size = draw(
        st.one_of(
            st.integers(0, 120),
            st.sampled_from([65535, 65536, U32, U32 + 1, 10**20]),
        )
    )
    tail = draw(st.sampled_from([CRLF, b"", b"\r", b"\n", b"xx", b"\rx", b"\r\r", b"\n\r"]))
    return b"put 0 0 1 %d\r\n%s%s" % (size, body, tail)


@st.composite
def overlong_line(draw: st.DrawFn) -> bytes:
    """A line of up to 600 bytes, often at or over the 224-byte limit, maybe a command's."""
    prefix = draw(st.sampled_from([b"", b"use ", b"put 0 0 1 ", b"stats", b"list-tubes"]))
    fill = draw(st.sampled_from([b"a", b" ", b"7", b"\r", b"\n", b"\x00"]))
    # around the limit (222 bytes + CRLF fit, 223 do not) or well past it
    length = draw(st.one_of(st.integers(MAX_LINE - 4, MAX_LINE + 1), st.integers(0, 600)))
    line = (prefix + fill * length)[:length]
    return line + draw(st.sampled_from([CRLF, b"\r", b"", b"\n"]))


def pieces(kinds: tuple[type[Parsed], ...] = COMMANDS) -> st.SearchStrategy[bytes]:
    valid = valid_command(kinds)
    return st.one_of(
        valid,
        valid.flatmap(mutated),
        wrong_size_put(),
        overlong_line(),
        st.binary(max_size=64),
        st.sampled_from([CRLF, b"\r", b"\n", b" ", b"\x00", b"\r\r\n", b"\n\r"]),
    )


@st.composite
def streams(
    draw: st.DrawFn, kinds: tuple[type[Parsed], ...] = COMMANDS, max_pieces: int = 12
) -> bytes:
    """A command stream: pieces joined, then up to 3 byte-level mutations."""
    data = b"".join(draw(st.lists(pieces(kinds), max_size=max_pieces)))
    for _ in range(draw(st.integers(0, 3))):
        data = draw(mutated(data))
    return data


@st.composite
def chunked(draw: st.DrawFn, data: bytes) -> list[bytes]:
    """``data`` split at random points (empty chunks included)."""
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=20)))
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


# ---------------------------------------------------------------- parsing and the model


def parse_chunks(chunks: list[bytes], max_job_size: int = 65535) -> tuple[list[Command], Parser]:
    """Feed ``chunks`` one ``feed()`` each, draining commands after each."""
    parser = Parser(max_job_size)
    out: list[Command] = []
    for chunk in chunks:
        parser.feed(chunk)
        while (cmd := parser.next_command()) is not None:
            out.append(cmd)
    return out, parser


@dataclass
class Framed:
    """:func:`frame`'s result: the commands, and where the stream stopped.

    ``state`` is ``"line"`` (between commands or inside a line shorter than 224 bytes:
    ``rest`` holds its bytes), ``"overlong"`` (inside a line already too long) or
    ``"body"`` (inside a put's body: ``pending`` more bytes finish it).
    """

    commands: list[Command]
    state: str
    rest: bytes = b""
    pending: int = 0


def frame(data: bytes, max_job_size: int = 65535) -> Framed:
    """The reference model: split the whole ``data`` into commands at once."""
    out: list[Command] = []
    i = 0
    while True:
        end = data.find(CRLF, i)
        if end < 0:
            rest = data[i:]
            if len(rest) >= MAX_LINE:
                return Framed(out, "overlong")
            return Framed(out, "line", rest)
        line = data[i:end]
        i = end + 2
        if len(line) + 2 > MAX_LINE:
            out.append(ErrorReply(BAD_FORMAT))
            continue
        cmd = parse_line(line)
        if not isinstance(cmd, _PutHeader):
            out.append(cmd)
            continue
        if cmd.size <= max_job_size and cmd.garbage:
            out.append(ErrorReply(BAD_FORMAT, stat="cmd-put"))
            continue
        need = cmd.size + 2
        if len(data) - i < need:
            return Framed(out, "body", pending=need - (len(data) - i))
        chunk = data[i : i + need]
        i += need
        if cmd.size > max_job_size:
            out.append(Put(cmd.pri, cmd.delay, cmd.ttr, b"", JOB_TOO_BIG))
        elif not chunk.endswith(CRLF):
            out.append(Put(cmd.pri, cmd.delay, cmd.ttr, b"", EXPECTED_CRLF))
        else:
            out.append(Put(cmd.pri, cmd.delay, cmd.ttr, chunk[:-2]))
