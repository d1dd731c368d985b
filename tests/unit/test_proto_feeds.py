"""Tests for shardq.protocol.proto's parser: its state across feeds (partial
lines and bodies, oversized jobs and lines, the buffer), no sockets.

Every expectation was checked against a live beanstalkd 1.12 (Debian 1.12-2)
except the documented shardq fixes, marked FIX: over-long lines and bare CR
(framing), reserve-with-timeout parsed as in 1.13, and quoted YAML strings.
"""

from __future__ import annotations

from proto_helpers import BAD, parse

from shardq.protocol.commands import ListTubeUsed, Put, Stats
from shardq.protocol.proto import JOB_TOO_BIG, OUT_OF_MEMORY, Parser


def test_need_data_until_crlf() -> None:
    parser = Parser()
    parser.feed(b"list-tube-used\r")
    assert parser.next_command() is None
    parser.feed(b"\n")
    assert parser.next_command() == ListTubeUsed()
    assert parser.next_command() is None


def test_put_body_waits_for_every_byte() -> None:
    parser = Parser()
    parser.feed(b"put 1 2 3 10\r\n0123456789\r")
    assert parser.next_command() is None
    parser.feed(b"\nstats\r\n")
    assert parser.next_command() == Put(1, 2, 3, b"0123456789")
    assert parser.next_command() == Stats()


def test_job_too_big_replies_only_after_the_whole_bit_bucket() -> None:
    parser = Parser(max_job_size=10)
    parser.feed(b"put 0 0 1 11\r\n")
    for _ in range(11 + 2):
        assert parser.next_command() is None
        parser.feed(b"x")
        assert parser.buffered <= 1
    assert parser.next_command() == Put(0, 0, 1, b"", JOB_TOO_BIG)
    assert parser.next_command() is None


def test_job_too_big_does_not_buffer_the_body() -> None:
    parser = Parser()
    parser.feed(b"put 0 0 1 1000000\r\n")
    assert parser.next_command() is None
    for _ in range(100):
        parser.feed(b"z" * 10000)
        assert parser.buffered == 0  # dropped on arrival
        assert parser.next_command() is None
    parser.feed(b"\r\nstats\r\n")
    assert parser.next_command() == Put(0, 0, 1, b"", JOB_TOO_BIG)
    assert parser.next_command() == Stats()


def test_overlong_line_is_discarded_as_it_arrives() -> None:
    parser = Parser()
    for _ in range(100):
        parser.feed(b"y" * 1000 + b"\r")
        assert parser.next_command() is None
        assert parser.buffered <= 1
    parser.feed(b"\nstats\r\n")
    assert parser.next_command() == BAD
    assert parser.next_command() == Stats()


def test_max_job_size_is_configurable() -> None:
    data = b"put 0 0 1 4\r\nabcd\r\nput 0 0 1 5\r\nabcde\r\n"
    assert parse([data], max_job_size=4) == [
        Put(0, 0, 1, b"abcd"),
        Put(0, 0, 1, b"", JOB_TOO_BIG),
    ]


def test_buffer_is_compacted() -> None:
    parser = Parser()
    parser.feed(b"stats\r\n" * 1000)
    while parser.next_command() is not None:
        pass
    assert parser.buffered == 0
    assert len(parser._buf) == 0  # white-box: consumed bytes are released


def test_a_shed_put_is_answered_out_of_memory_and_its_body_not_kept() -> None:
    """Out of memory (Parser.shed): the put whose body is being read, or whose line is the
    next one held, drops its body as a too big one does and answers OUT_OF_MEMORY; the
    commands after it go on."""
    parser = Parser()
    parser.feed(b"put 1 0 60 10\r\nabc")
    assert parser.next_command() is None
    assert parser.shed()
    assert parser.buffered == 0  # the 3 body bytes held are gone
    parser.feed(b"defghij\r\nstats\r\n")
    assert parser.next_command() == Put(1, 0, 60, b"", OUT_OF_MEMORY)
    assert parser.next_command() == Stats()
    parser.feed(b"put 1 0 60 3\r\n")  # its line held, not parsed yet
    assert parser.shed()
    parser.feed(b"abc\r\nlist-tube-used\r\n")
    assert parser.next_command() == Put(1, 0, 60, b"", OUT_OF_MEMORY)
    assert parser.next_command() == ListTubeUsed()


def test_only_a_put_can_be_shed() -> None:
    parser = Parser(max_job_size=10)
    parser.feed(b"stats\r\nput 1 0 60 3\r\n")
    assert not parser.shed()  # a command comes first: it is not given up
    assert parser.next_command() == Stats()
    assert parser.shed()
    assert not parser.shed()  # once
    assert parser.next_command() is None
    parser.feed(b"abc\r\nput 0 0 1 11\r\n")
    assert parser.next_command() == Put(1, 0, 60, b"", OUT_OF_MEMORY)
    assert parser.next_command() is None
    assert not parser.shed()  # too big: dropped as it comes anyway
