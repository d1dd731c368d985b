"""The sans-IO Kestrel (memcache dialect) protocol: every command, the replies' bytes, and
malformed input answered with memcache's errors while the connection goes on."""

from __future__ import annotations

import pytest

from shardq.protocol import kestrel as k
from shardq.protocol import kestrel_replies as r
from shardq.protocol.reader import Reply, ReplyError, ReplyReader


def parse_all(data: bytes, max_item: int = 100) -> list[k.Command]:
    parser = k.KestrelParser(max_item)
    parser.feed(data)
    out = []
    while (cmd := parser.next_command()) is not None:
        out.append(cmd)
    return out


def one(data: bytes) -> k.Command:
    (cmd,) = parse_all(data)
    return cmd


def test_set_with_data_flags_expiry_and_noreply() -> None:
    assert one(b"set work 7 30 5\r\nhello\r\n") == k.Set("work", 7, 30, b"hello")
    assert one(b"SET work 0 0 0 noreply\r\n\r\n") == k.Set("work", 0, 0, b"", True)
    assert one(b"set q 0 -1 1\r\nx\r\n") == k.Set("q", 0, -1, b"x")


def test_set_data_may_hold_line_ends_and_arrive_in_pieces() -> None:
    parser = k.KestrelParser(100)
    data = b"set q 0 0 6\r\na\r\nb\r\n\r\nget q\r\n"
    cmds = []
    for i in range(len(data)):
        parser.feed(data[i : i + 1])
        while (cmd := parser.next_command()) is not None:
            cmds.append(cmd)
    assert cmds == [k.Set("q", 0, 0, b"a\r\nb\r\n"), k.Get("q", "q")]


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("work", k.Get("work", "work")),
        ("work/t=500/open", k.Get("work/t=500/open", "work", 500, open=True)),
        ("work/close/open", k.Get("work/close/open", "work", open=True, close=True)),
        ("work/close", k.Get("work/close", "work", close=True)),
        ("work/abort", k.Get("work/abort", "work", abort=True)),
        ("work/abort/open", k.Get("work/abort/open", "work", open=True, abort=True)),
        ("work/peek", k.Get("work/peek", "work", peek=True)),
        ("work/peek/t=20", k.Get("work/peek/t=20", "work", 20, peek=True)),
        ("work/T=5/OPEN", k.Get("work/T=5/OPEN", "work", 5, open=True)),
    ],
)
def test_get_options(key: str, expected: k.Get) -> None:
    assert one(f"get {key}\r\n".encode()) == expected


def test_which_gets_fetch() -> None:
    assert k.Get("q", "q").fetches
    assert k.Get("q", "q", open=True, close=True).fetches
    assert not k.Get("q", "q", close=True).fetches
    assert not k.Get("q", "q", abort=True).fetches
    assert k.Get("q", "q", peek=True).fetches


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (b"delete work\r\n", k.Delete("work")),
        (b"delete work 0 noreply\r\n", k.Delete("work", True)),
        (b"flush work\r\n", k.Flush("work")),
        (b"flush_all\r\n", k.FlushAll()),
        (b"flush_all 0 noreply\r\n", k.FlushAll(True)),
        (b"stats\r\n", k.Simple("stats")),
        (b"dump_stats\r\n", k.Simple("dump_stats")),
        (b"dump_config\r\n", k.Simple("dump_config")),
        (b"version\n", k.Simple("version")),
        (b"RELOAD\r\n", k.Simple("reload")),
        (b"shutdown\r\n", k.Simple("shutdown")),
        (b"quit\r\n", k.Simple("quit")),
    ],
)
def test_other_commands(line: bytes, expected: k.Command) -> None:
    assert one(line) == expected


@pytest.mark.parametrize(
    ("data", "reply"),
    [
        (b"\r\n", k.ERROR),
        (b"bogus\r\n", k.ERROR),
        (b"get\r\n", k.ERROR),
        (b"get a b\r\n", k.ONE_QUEUE),
        (b"get a/bogus\r\n", k.BAD_OPTION),
        (b"get a/t=x\r\n", k.BAD_OPTION),
        (b"get a/peek/open\r\n", k.BAD_PEEK),
        (b"get a/abort/close\r\n", k.BAD_ABORT),
        (b"get +b\r\n", k.BAD_QUEUE),  # a fanout mark needs a parent
        (b"get a.b\r\n", k.BAD_QUEUE),
        (b"get -a\r\n", k.BAD_QUEUE),
        (b"get " + b"a" * 201 + b"\r\n", k.BAD_QUEUE),
        (b"get \xff\r\n", k.BAD_QUEUE),
        (b"set q 0 0\r\n", k.BAD_FORMAT),
        (b"set q x 0 1\r\n", k.BAD_FORMAT),
        (b"set q 0 0 -1\r\n", k.BAD_FORMAT),
        (b"set q 4294967296 0 1\r\n", k.BAD_FORMAT),
        (b"delete\r\n", k.BAD_FORMAT),
        (b"delete q 5\r\n", k.BAD_FORMAT),
        (b"flush q extra\r\n", k.BAD_FORMAT),
        (b"flush_all soon\r\n", k.BAD_FORMAT),
        (b"stats items\r\n", k.BAD_FORMAT),
        (b"set q 0 0 3\r\nabcd\r\n", k.BAD_CHUNK),  # then "d\r\n": another ERROR
        (b"set a~b 0 0 1\r\nx\r\n", k.BAD_QUEUE),  # its data is taken, not parsed
    ],
)
def test_malformed_input_is_answered_and_the_connection_goes_on(data: bytes, reply: bytes) -> None:
    cmds = parse_all(data + b"version\r\n")
    assert cmds[0] == k.Invalid(reply)
    assert cmds[-1] == k.Simple("version")


def test_an_item_too_large_is_refused_and_skipped_as_it_arrives() -> None:
    parser = k.KestrelParser(4)
    parser.feed(b"set q 0 0 10\r\n01234")
    assert parser.next_command() == k.Invalid(k.TOO_LARGE)
    assert parser.buffered == 0
    parser.feed(b"56789\r\nversion\r\n")
    assert parser.next_command() == k.Simple("version")


def test_a_line_too_long_closes() -> None:
    parser = k.KestrelParser(10)
    parser.feed(b"g" * (k.MAX_LINE + 1))
    assert parser.next_command() == k.Invalid(k.LINE_TOO_LONG, close=True)
    parser.feed(b"version\r\n")
    assert parser.next_command() is None
    assert parser.buffered == 0


def test_expiry_as_kestrel_reads_it() -> None:
    now = 1_700_000_000_000
    assert k.expiry_ms(0, now) is None
    assert k.expiry_ms(30, now) == now + 30_000
    assert k.expiry_ms(999_999, now) == now + 999_999_000
    assert k.expiry_ms(1_700_000_100, now) == 1_700_000_100_000  # a unix time
    assert k.expiry_ms(-1, now) == now  # memcache: already expired


def test_reply_bytes() -> None:
    assert r.value("work/open", b"hi") == b"VALUE work/open 0 2\r\nhi\r\nEND\r\n"
    assert r.version("x") == b"VERSION x\r\n"
    assert r.server_error("boom") == b"SERVER_ERROR boom\r\n"
    assert r.stats([("uptime", 5)], [("q", [("items", 2)])]) == (
        b"STAT uptime 5\r\nSTAT queue_q_items 2\r\nEND\r\n"
    )
    assert r.blocks([("q", [("items", 2)])]) == b"queue 'q' {\r\n  items=2\r\n}\r\nEND\r\n"
    assert r.blocks([]) == b"END\r\n"


def test_the_beanstalk_reply_reader() -> None:
    reader = ReplyReader()
    reader.feed(b"INSERTED 5\r\nRESERVED 5 3\r\na\r\n\r\nOK 2")
    assert reader.next_reply() == Reply([b"INSERTED", b"5"])
    reserved = reader.next_reply()
    assert reserved == Reply([b"RESERVED", b"5", b"3"], b"a\r\n")
    assert reserved.number() == 5
    assert reader.next_reply() is None
    reader.feed(b"\r\nab\r\n")
    assert reader.next_reply() == Reply([b"OK", b"2"], b"ab")
    reader.feed(b"x" * 600)
    with pytest.raises(ReplyError):
        reader.next_reply()


def test_the_reply_reader_across_feeds() -> None:
    """Replies split anywhere over many feeds, bodies of many pieces: each read once, in
    order, and what was read dropped at the next feed."""
    replies = [b"INSERTED %d\r\n" % i for i in range(300)]
    replies += [b"RESERVED 9 %d\r\n%s\r\n" % (n, b"b" * n) for n in (0, 1, 70_000)]
    stream = b"".join(replies)
    reader = ReplyReader()
    got = []
    for at in range(0, len(stream), 997):
        reader.feed(stream[at : at + 997])
        while (reply := reader.next_reply()) is not None:
            got.append(reply)
        assert reader.buffered < 997 + 70_020
    assert [r.words[0] for r in got] == [b"INSERTED"] * 300 + [b"RESERVED"] * 3
    assert [r.number() for r in got[:300]] == list(range(300))
    assert [len(r.body or b"") for r in got[300:]] == [0, 1, 70_000]
    assert reader.buffered == 0
    reader.feed(b"")
    assert len(reader.buf) == 0  # what was read is gone
