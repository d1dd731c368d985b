"""Table tests for shardq.protocol.proto's parser: bytes in, commands out, no
sockets; each case whole, in random chunks, byte by byte and pipelined.

Every expectation was checked against a live beanstalkd 1.12 (Debian 1.12-2)
except the documented shardq fixes, marked FIX: over-long lines and bare CR
(framing), reserve-with-timeout parsed as in 1.13, and quoted YAML strings.
"""

from __future__ import annotations

import random

import pytest
from proto_helpers import BAD, CRLF, parse

from shardq.protocol.commands import (
    Bury,
    Command,
    Delete,
    ErrorReply,
    Ignore,
    Kick,
    KickJob,
    ListTubes,
    ListTubesWatched,
    ListTubeUsed,
    PauseTube,
    Peek,
    PeekBuried,
    PeekDelayed,
    PeekReady,
    Put,
    Quit,
    Release,
    Reserve,
    ReserveJob,
    ReserveWithTimeout,
    Stats,
    StatsJob,
    StatsTube,
    Touch,
    Use,
    Watch,
)
from shardq.protocol.proto import BAD_FORMAT, EXPECTED_CRLF, JOB_TOO_BIG, UNKNOWN_COMMAND

UNK = ErrorReply(UNKNOWN_COMMAND)


LTU = b"list-tube-used\r\n"  # a harmless follower that proves parsing resumed
U32 = 4294967295
U64 = 18446744073709551615


def split_randomly(data: bytes, seed: int) -> list[bytes]:
    rnd = random.Random(seed)
    chunks, i = [], 0
    while i < len(data):
        n = rnd.randint(1, 40)
        chunks.append(data[i : i + n])
        i += n
    return chunks


# ---------------------------------------------------------------- case tables


ARGLESS: list[tuple[bytes, Command]] = [
    (b"stats", Stats()),
    (b"list-tubes", ListTubes()),
    (b"list-tube-used", ListTubeUsed()),
    (b"list-tubes-watched", ListTubesWatched()),
    (b"peek-ready", PeekReady()),
    (b"peek-delayed", PeekDelayed()),
    (b"peek-buried", PeekBuried()),
    (b"reserve", Reserve()),
]

CASES: list[tuple[bytes, list[Command]]] = [
    # argument-less commands: exact, or BAD_FORMAT for any extra byte
    *[(word + CRLF, [cmd]) for word, cmd in ARGLESS],
    *[
        (word + suffix + CRLF, [BAD])
        for word, _ in ARGLESS
        for suffix in (b" ", b"x", b"\t", b" x")
    ],
    (b"list-tubes-watchedx\r\n", [BAD]),
    (b"list-tubes-\r\n", [BAD]),  # prefix list-tubes
    (b"list-tube\r\n", [UNK]),
    (b"peek-\r\n", [UNK]),
    (b"stats-\r\n", [BAD]),  # prefix stats
    # prefix quirks
    (b"quit\r\n", [Quit()]),
    (b"quitnow\r\n", [Quit()]),
    (b"quit x\r\n", [Quit()]),
    (b"qui\r\n", [UNK]),
    (b"stats-tube\r\n", [BAD]),  # falls to "stats"
    (b"stats-job\r\n", [BAD]),
    (b"reserve-job\r\n", [BAD]),  # falls to "reserve"
    (b"reserve-with-timeout\r\n", [BAD]),
    (b"reserve-with-timeoutx\r\n", [BAD]),
    (b"reserve-\r\n", [BAD]),
    *[
        (word + CRLF, [UNK])
        for word in (b"use", b"peek", b"delete", b"kick", b"kick-job", b"release", b"bury")
        + (b"touch", b"watch", b"ignore", b"put", b"pause", b"list", b"s", b"xyz")
    ],
    (b"pause-tube\r\n", [BAD]),
    (b"STATS\r\n", [UNK]),
    (b" stats\r\n", [UNK]),
    (b"\r\n", [UNK]),
    (b"stats\x00\r\n", [BAD]),  # NUL: strlen check, before matching
    (b"xyz\x00\r\n", [BAD]),
    (b"\x00\r\n", [BAD]),
    (b"list-tube-used\n\r\n", [BAD]),  # a bare LF is an ordinary byte
    # ids are u64, whole rest of line, spaces skipped, leading zeros fine
    *[
        (prefix + arg + CRLF, [cls(value)])
        for prefix, cls in [
            (b"peek ", Peek),
            (b"delete ", Delete),
            (b"kick-job ", KickJob),
            (b"touch ", Touch),
            (b"stats-job ", StatsJob),
            (b"reserve-job ", ReserveJob),
        ]
        for arg, value in [
            (b"0", 0),
            (b"1", 1),
            (b"  1", 1),
            (b"010", 10),
            (b"0" * 30 + b"7", 7),
            (b"18446744073709551615", U64),
        ]
    ],
    *[
        (prefix + arg + CRLF, [BAD])
        for prefix in (
            b"peek ",
            b"delete ",
            b"kick-job ",
            b"touch ",
            b"stats-job ",
            b"reserve-job ",
        )
        for arg in (b"", b" ", b"1 ", b"1x", b"-1", b"+1", b"0x10", b"\t1", b"1 2")
        + (b"18446744073709551616", b"9" * 25)
    ],
    # release <id> <pri> <delay>, bury <id> <pri>
    (b"release 1 2 3\r\n", [Release(1, 2, 3)]),
    (b"release 1  2  3\r\n", [Release(1, 2, 3)]),
    (b"release 1 4294967295 4294967295\r\n", [Release(1, U32, U32)]),
    (b"release 18446744073709551615 0 0\r\n", [Release(U64, 0, 0)]),
    *[
        (b"release " + arg + CRLF, [BAD])
        for arg in (b"1 2 3 ", b"1 2", b"1 2 3 4", b"1 4294967296 0", b"1 0 4294967296")
        + (b"1 -1 0", b"1 2 3x", b"1 2x 3")
    ],
    (b"bury 1 2\r\n", [Bury(1, 2)]),
    (b"bury 1  2\r\n", [Bury(1, 2)]),
    (b"bury 1 4294967295\r\n", [Bury(1, U32)]),
    *[
        (b"bury " + arg + CRLF, [BAD])
        for arg in (b"1 2 ", b"1", b"1 2 3", b"1 4294967296", b"1 2x", b"x 2")
    ],
    # kick: strtoul, truncated to u32
    *[
        (b"kick " + arg + CRLF, [Kick(bound)])
        for arg, bound in [
            (b"0", 0),
            (b"5", 5),
            (b"-1", U32),
            (b"4294967296", 0),
            (b"4294967298", 2),
            (b"1x", 1),
            (b"3 9", 3),
            (b"0x10", 0),
            (b"+2", 2),
            (b"-0", 0),
            (b"00002", 2),
            (b" 5", 5),
            (b"\t\x0b\x0c 3", 3),
            (b"\n5", 5),
            (b"-4294967295", 1),
            (b"-18446744073709551615", 1),
            (b"18446744073709551615", U32),
        ]
    ],
    *[
        (b"kick " + arg + CRLF, [BAD])
        for arg in (b"", b" ", b"-", b"+", b"x", b"9" * 23, b"18446744073709551616")
        + (b"-18446744073709551616",)
    ],
    # FIX: reserve-with-timeout parses as beanstalkd 1.13 (read_u32 <= INT_MAX,
    # trailing text ignored as 1.13 does; 1.12 used strtol)
    (b"reserve-with-timeout 0\r\n", [ReserveWithTimeout(0)]),
    (b"reserve-with-timeout  7\r\n", [ReserveWithTimeout(7)]),
    (b"reserve-with-timeout 1x\r\n", [ReserveWithTimeout(1)]),
    (b"reserve-with-timeout 1 \r\n", [ReserveWithTimeout(1)]),
    (b"reserve-with-timeout 2147483647\r\n", [ReserveWithTimeout(2147483647)]),
    *[
        (b"reserve-with-timeout " + arg + CRLF, [BAD])
        for arg in (b"", b"abc", b"-1", b"+1", b"2147483648", b"4294967295", b"9" * 20)
    ],
    # tube names: whole rest of the line, 1..200 NAME_CHARS, no leading '-'
    *[
        (prefix + name + CRLF, [cls(name.decode())])
        for prefix, cls in [
            (b"use ", Use),
            (b"watch ", Watch),
            (b"ignore ", Ignore),
            (b"stats-tube ", StatsTube),
        ]
        for name in (b"a" * 200, b"foo-", b"+;/.$_()", b"Z9", b"a.b", b"default", b"$", b"_")
    ],
    *[
        (prefix + name + CRLF, [BAD])
        for prefix in (b"use ", b"watch ", b"ignore ", b"stats-tube ")
        for name in (b"", b"a" * 201, b"-foo", b"a*b", b"foo ", b" foo", b"a\tb", b"a b")
        + ("café".encode(),)
    ],
    # pause-tube: leading spaces skipped, no space needed after the prefix
    (b"pause-tube default 0\r\n", [PauseTube("default", 0)]),
    (b"pause-tubedefault 0\r\n", [PauseTube("default", 0)]),
    (b"pause-tube   default  1\r\n", [PauseTube("default", 1)]),
    (b"pause-tube default 01\r\n", [PauseTube("default", 1)]),
    (b"pause-tube default 4294967295\r\n", [PauseTube("default", U32)]),
    (b"pause-tube " + b"d" * 200 + b" 4294967295\r\n", [PauseTube("d" * 200, U32)]),  # 224 bytes
    *[
        (b"pause-tube" + arg + CRLF, [BAD])
        for arg in (b" pz", b" pz 4294967296", b" default 1 ", b" default x", b" a*b 1")
        + (b" default1", b" 5", b"", b" ", b" default\t1", b" default -1")
    ],
    # the name is validated after the command was counted (stat is set)
    (b"pause-tube -pz 2\r\n", [ErrorReply(BAD_FORMAT, stat="cmd-pause-tube")]),
    (b"pause-tube " + b"a" * 201 + b" 1\r\n", [ErrorReply(BAD_FORMAT, stat="cmd-pause-tube")]),
    # put
    (b"put 0 0 1 1\r\nx\r\n", [Put(0, 0, 1, b"x")]),
    (b"put  1  0  1  1\r\nx\r\n", [Put(1, 0, 1, b"x")]),
    (b"put 010 0 1 1\r\nx\r\n", [Put(10, 0, 1, b"x")]),
    (b"put 00 000 0120 001\r\nx\r\n", [Put(0, 0, 120, b"x")]),
    (b"put 0 0 0 1\r\nx\r\n", [Put(0, 0, 0, b"x")]),  # ttr 0 kept raw
    (b"put 4294967295 7 9 1\r\nx\r\n", [Put(U32, 7, 9, b"x")]),
    (b"put 5 4294967295 4294967295 1\r\nx\r\n", [Put(5, U32, U32, b"x")]),
    (b"put 0 0 1 0\r\n\r\n", [Put(0, 0, 1, b"")]),
    (b"put 0 0 1 5\r\na\r\nb\x00\r\n", [Put(0, 0, 1, b"a\r\nb\x00")]),
    (b"put 0 0 1 4\r\nput \r\n", [Put(0, 0, 1, b"put ")]),
    # a bad put line: BAD_FORMAT, and the body is parsed as a command
    *[
        (b"put " + arg + b"\r\nx\r\n", [BAD, UNK])
        for arg in (b"-1 0 1 1", b"+1 0 1 1", b"4294967296 0 1 1", b"0x10 0 1 1", b"1 0 1")
        + (b"9" * 23 + b" 0 1 1", b"0 0 1 4294967296", b"1\t0 1 1", b"")
    ],
    # trailing garbage is found after the command was counted (stat is set)
    (b"put 1 0 1 1 \r\nx\r\n", [ErrorReply(BAD_FORMAT, stat="cmd-put"), UNK]),
    (b"put 1 0 1 1 1\r\nx\r\n", [ErrorReply(BAD_FORMAT, stat="cmd-put"), UNK]),
    (b"put 1 0 1 1x\r\nx\r\n" + LTU, [ErrorReply(BAD_FORMAT, stat="cmd-put"), UNK, ListTubeUsed()]),
    # EXPECTED_CRLF: exactly bytes+2 consumed, then parsing resumes
    (b"put 0 0 1 3\r\nabcde\r\n", [Put(0, 0, 1, b"", EXPECTED_CRLF), UNK]),
    (b"put 0 0 1 3\r\nabcXY" + LTU, [Put(0, 0, 1, b"", EXPECTED_CRLF), ListTubeUsed()]),
    (b"put 0 0 1 0\r\nXY" + LTU, [Put(0, 0, 1, b"", EXPECTED_CRLF), ListTubeUsed()]),
    (b"put 0 0 1 2\r\nab\rX" + LTU, [Put(0, 0, 1, b"", EXPECTED_CRLF), ListTubeUsed()]),
    # max-job-size: 65535 fits, 65536 goes to the bit bucket (size checked before garbage)
    (
        b"put 0 0 1 65535\r\n" + b"x" * 65535 + CRLF + LTU,
        [Put(0, 0, 1, b"x" * 65535), ListTubeUsed()],
    ),
    (
        b"put 0 0 1 65536\r\n" + b"x" * 65536 + CRLF + LTU,
        [Put(0, 0, 1, b"", JOB_TOO_BIG), ListTubeUsed()],
    ),
    (
        b"put 0 0 1 65536 garbage\r\n" + b"y" * 65536 + b"zz" + LTU,
        [Put(0, 0, 1, b"", JOB_TOO_BIG), ListTubeUsed()],
    ),
    (b"put 0 0 1 70000\r\nshort\r\n" + LTU, []),  # still swallowing
    # FIX framing: 224 bytes with CRLF is a line; longer gets one BAD_FORMAT
    (b"x" * 222 + CRLF, [UNK]),
    (b"use " + b"a" * 218 + CRLF, [BAD]),
    (b"x" * 223 + CRLF + LTU, [BAD, ListTubeUsed()]),  # FIX: 1.12 swallows the follower
    (b"x" * 224 + CRLF + LTU, [BAD, ListTubeUsed()]),
    (b"x" * 250 + CRLF + LTU, [BAD, ListTubeUsed()]),
    (b"x" * 1000 + CRLF + LTU, [BAD, ListTubeUsed()]),
    (b"\r" * 300 + CRLF + LTU, [BAD, ListTubeUsed()]),
    (b"x" * 5000, []),
    (b"list-tube-used\rX\r\n" + LTU, [BAD, ListTubeUsed()]),  # FIX: 1.12 stalls
    (b"\rstats\r\n", [UNK]),
    (b"stats\r\r\n", [BAD]),
    # pipelining and incomplete input
    (b"stats", []),
    (b"stats\r", []),
    (b"use a\r\nwatch b\r\nignore default\r\n", [Use("a"), Watch("b"), Ignore("default")]),
    (b"quit\r\nstats\r\n", [Quit(), Stats()]),  # the server stops reading after Quit
]


def _case_id(case: tuple[bytes, list[Command]]) -> str:
    data = case[0]
    return repr(data[:40]) + (f"..({len(data)})" if len(data) > 40 else "")


@pytest.mark.parametrize("data,expected", CASES, ids=[_case_id(c) for c in CASES])
def test_whole(data: bytes, expected: list[Command]) -> None:
    assert parse([data]) == expected


@pytest.mark.parametrize("data,expected", CASES, ids=[_case_id(c) for c in CASES])
def test_random_chunks(data: bytes, expected: list[Command]) -> None:
    assert parse(split_randomly(data, seed=len(data))) == expected


SMALL_CASES = [case for case in CASES if len(case[0]) < 2000]


@pytest.mark.parametrize("data,expected", SMALL_CASES, ids=[_case_id(c) for c in SMALL_CASES])
def test_byte_by_byte(data: bytes, expected: list[Command]) -> None:
    assert parse([data[i : i + 1] for i in range(len(data))]) == expected


def test_all_cases_pipelined_in_one_feed() -> None:
    # Every case ends on a command boundary except the ones that leave the
    # parser waiting; chain the others in one buffer.
    complete = [
        (data, expected)
        for data, expected in CASES
        if expected and expected[-1] != Quit() and not data.startswith(b"put 0 0 1 70000")
    ]
    data = b"".join(d for d, _ in complete)
    assert parse([data]) == [cmd for _, expected in complete for cmd in expected]


def test_many_pipelined_commands() -> None:
    data = b"put 0 0 60 3\r\nabc\r\nreserve\r\ndelete 7\r\n" * 5000
    assert parse([data]) == [Put(0, 0, 60, b"abc"), Reserve(), Delete(7)] * 5000
