"""Tests for shardq.protocol.proto's reply formatters: job replies, YAML maps
and lists, and the fixed replies.

Every expectation was checked against a live beanstalkd 1.12 (Debian 1.12-2)
except the documented shardq fixes, marked FIX: over-long lines and bare CR
(framing), reserve-with-timeout parsed as in 1.13, and quoted YAML strings.
"""

from __future__ import annotations

import pytest
from proto_helpers import CRLF

from shardq.protocol.proto import Quoted, Raw, job_reply, yaml_list, yaml_map
from shardq.protocol.replies import job_reply_into, put_reply, set_yaml_style


def test_job_reply() -> None:
    assert job_reply(b"RESERVED", 5, b"abc") == b"RESERVED 5 3\r\nabc\r\n"
    assert job_reply(b"FOUND", 7, b"a\r\nb\x00") == b"FOUND 7 5\r\na\r\nb\x00\r\n"
    assert job_reply(b"FOUND", 1, b"") == b"FOUND 1 0\r\n\r\n"


NUMBERS = [0, 1, 9, 10, 99, 100, 101, 999_999, 1_000_000, 2**32, 2**63 - 1, 2**64 - 1]


@pytest.mark.parametrize("size", [0, 1, 9, 10, 100, 65_535, 65_536])
def test_job_reply_digits_as_printf(size: int) -> None:
    """Compiled, the reply is written digit by digit into a bytes of its size: every number
    of digits, for the id and the body's size, as `%d` prints it."""
    body = bytes(range(256)) * (size // 256) + b"\r" * (size % 256)
    for job_id in NUMBERS:
        for word in (b"RESERVED", b"FOUND"):
            expected = b"%s %d %d\r\n%s\r\n" % (word, job_id, size, body)
            assert job_reply(word, job_id, body) == expected


def test_put_reply() -> None:
    for job_id in NUMBERS:
        assert put_reply(job_id, True) == b"INSERTED %d\r\n" % job_id
    assert put_reply(5, False) == b"OUT_OF_MEMORY\r\n"


STATS_JOB_112 = (
    b"OK 145\r\n---\nid: 110\ntube: yml\nstate: ready\npri: 1025\nage: 0\ndelay: 0\n"
    b"ttr: 60\ntime-left: 0\nfile: 0\nreserves: 0\ntimeouts: 0\nreleases: 0\nburies: 0\n"
    b"kicks: 0\n\r\n"
)
STATS_JOB_PAIRS: list[tuple[str, object]] = [
    ("id", 110),
    ("tube", "yml"),
    ("state", Raw("ready")),
    ("pri", 1025),
    ("age", 0),
    ("delay", 0),
    ("ttr", 60),
    ("time-left", 0),
    ("file", 0),
    ("reserves", 0),
    ("timeouts", 0),
    ("releases", 0),
    ("buries", 0),
    ("kicks", 0),
]


def test_yaml_map_matches_live_layout() -> None:
    # beanstalkd 1.12 leaves string values unquoted: so does the default style
    assert yaml_map(STATS_JOB_PAIRS) == STATS_JOB_112
    assert yaml_map([("version", Quoted("1.12"))]) == b'OK 20\r\n---\nversion: "1.12"\n\r\n'


def test_yaml_map_quotes_strings_like_1_13_when_asked() -> None:
    set_yaml_style("quoted")
    try:
        expected = STATS_JOB_112.replace(b"OK 145", b"OK 147")
        assert yaml_map(STATS_JOB_PAIRS) == expected.replace(b"tube: yml", b'tube: "yml"')
    finally:
        set_yaml_style("plain")
    assert yaml_map(STATS_JOB_PAIRS) == STATS_JOB_112
    with pytest.raises(ValueError):
        set_yaml_style("fancy")


def test_yaml_map_values() -> None:
    reply = yaml_map(
        [("draining", False), ("up", True), ("time-left", -1), ("rusage-utime", Raw("0.001575"))]
    )
    body = b"---\ndraining: false\nup: true\ntime-left: -1\nrusage-utime: 0.001575\n"
    assert reply == b"OK %d\r\n%s\r\n" % (len(body), body)
    with pytest.raises(TypeError):
        yaml_map([("x", 1.5)])


def test_yaml_list() -> None:
    assert yaml_list(["default"]) == b"OK 14\r\n---\n- default\n\r\n"
    assert yaml_list(["default", "yml"]) == b"OK 20\r\n---\n- default\n- yml\n\r\n"
    assert yaml_list([]) == b"OK 4\r\n---\n\r\n"


def test_fixed_replies_are_full_lines() -> None:
    import shardq.protocol.proto as proto

    names = [
        "DELETED",
        "RELEASED",
        "BURIED",
        "KICKED",
        "TOUCHED",
        "PAUSED",
        "NOT_FOUND",
        "NOT_IGNORED",
        "TIMED_OUT",
        "DEADLINE_SOON",
        "DRAINING",
        "OUT_OF_MEMORY",
        "INTERNAL_ERROR",
        "BAD_FORMAT",
        "UNKNOWN_COMMAND",
        "EXPECTED_CRLF",
        "JOB_TOO_BIG",
    ]
    for name in names:
        assert getattr(proto, name) == name.encode() + CRLF
    assert proto.using("a") == b"USING a\r\n"
    assert proto.watching(2) == b"WATCHING 2\r\n"


def test_replies_written_in_place_are_the_replies() -> None:
    """The fast path writes a reserve's reply onto the connection's output
    (`job_reply_into`): the same bytes as the reply made whole."""
    out = bytearray(b"before ")
    for job_id in (1, 9, 10, 12345, (1 << 64) - 1):
        job_reply_into(out, b"RESERVED", job_id, b"body\r\nbytes")
        job_reply_into(out, b"FOUND", job_id, b"")
    expected = b"before " + b"".join(
        job_reply(b"RESERVED", job_id, b"body\r\nbytes") + job_reply(b"FOUND", job_id, b"")
        for job_id in (1, 9, 10, 12345, (1 << 64) - 1)
    )
    assert out == expected
    assert put_reply(12345, True) == b"INSERTED 12345\r\n"
    assert job_reply(b"RESERVED", 7, b"ab") == b"RESERVED 7 2\r\nab\r\n"
