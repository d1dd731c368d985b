"""Tests for the fast path's field readers (shardq.processes.serving.home: `has`,
`put_numbers`) and the serving path's clocks (shardq.processes.common.clock), in whichever
build runs: compiled, C loops and `clock_gettime`; pure, the bytes methods and the time
module. Each is checked against what it stands for."""

from __future__ import annotations

import random
import time

import pytest

from shardq.processes.common import clock
from shardq.processes.serving.home import PutLine, has, put_numbers
from shardq.protocol.parser import U32_MAX


@pytest.mark.parametrize(
    ("data", "pos", "word"),
    [
        (b"put 0 0 1 1\r\n", 0, b"put "),
        (b"xput ", 1, b"put "),
        (b"pu", 0, b"put "),
        (b"put", 1, b"ut"),
        (b"reserve\r\n", 0, b"reserve"),
        (b"reserve-with-timeout 5\r\n", 0, b"reserve-with-timeout "),
        (b"delete 5\r\n", 0, b"delete "),
        (b"\r\n", 0, b"\r\n"),
        (b"a\r", 1, b"\r\n"),
        (b"", 0, b"\r\n"),
        (b"abc", 3, b""),
        (b"abc", 4, b"c"),
    ],
)
def test_has_is_startswith(data: bytes, pos: int, word: bytes) -> None:
    assert has(data, pos, word) is data.startswith(word, pos)


def expected_numbers(fields: bytes) -> tuple[int, int, int, int] | None:
    """What `put_numbers` stands for: four runs of 1 to 18 ASCII digits, one space apart,
    the first three at most 2**32 - 1."""
    parts = fields.split(b" ")
    if len(parts) != 4 or not all(p.isdigit() and p.isascii() and len(p) <= 18 for p in parts):
        return None
    pri, delay, ttr, size = (int(p) for p in parts)
    if max(pri, delay, ttr) > U32_MAX:
        return None
    return pri, delay, ttr, size


@pytest.mark.parametrize(
    "fields",
    [
        b"0 0 60 5",
        b"4294967295 4294967295 4294967295 999999999999999999",
        b"4294967296 0 60 5",
        b"0 4294967296 60 5",
        b"0 0 4294967296 5",
        b"0 0 60 1000000000000000000",
        b"0 0 60",
        b"0 0 60 5 6",
        b"0  0 60 5",
        b" 0 0 60 5",
        b"0 0 60 5 ",
        b"0 0 +6 5",
        b"0 0 -6 5",
        b"0 0 6x 5",
        b"",
        b"1 2 3 4",
    ],
)
def test_put_numbers(fields: bytes) -> None:
    data = b"put " + fields + b"\r\n"
    line = PutLine()
    got = put_numbers(data, 4, 4 + len(fields), line)
    want = expected_numbers(fields)
    assert got is (want is not None)
    if want is not None:
        assert (line.pri, line.delay, line.ttr, line.size) == want


def test_put_numbers_on_random_lines() -> None:
    rng = random.Random(7)
    alphabet = b"0123456789 x+-"
    line = PutLine()
    for _ in range(3000):
        fields = bytes(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))
        if rng.random() < 0.5:  # mostly well formed: numbers of every length
            fields = b" ".join(b"%d" % rng.randrange(10 ** rng.randrange(1, 20)) for _ in range(4))
        data = b"put " + fields + b"\r\n"
        got = put_numbers(data, 4, 4 + len(fields), line)
        want = expected_numbers(fields)
        assert got is (want is not None), fields
        if want is not None:
            assert (line.pri, line.delay, line.ttr, line.size) == want, fields


def test_the_clocks_are_the_time_modules() -> None:
    before = time.monotonic_ns()
    now = clock.monotonic()
    after = time.monotonic_ns()
    assert before <= now <= after
    before = time.time_ns()
    now = clock.wall()
    after = time.time_ns()
    assert before <= now <= after
