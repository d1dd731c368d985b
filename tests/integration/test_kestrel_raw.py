"""Raw Kestrel sessions: every command of the Kestrel guide, byte for byte, its examples
replayed as written (upper-case commands, ``GET work/t=500/open``, ``GET
dirty_jobs/close/open`` twice), and malformed input answered with memcache's errors while
the connection goes on."""

from __future__ import annotations

import re

from helpers import poll_for
from kestrel_server import Raw, kestrel_server_fixture  # noqa: F401  (the fixture)


def test_the_guides_reliable_read_example(kestrel_server) -> None:
    server = kestrel_server(1)
    raw = Raw(server.kestrel)
    assert raw.ask(b"SET dirty_jobs 0 0 5\r\njob 1\r\n") == b"STORED\r\n"
    assert raw.ask(b"SET dirty_jobs 0 0 5\r\njob 2\r\n") == b"STORED\r\n"
    raw.send(b"GET dirty_jobs/close/open\r\n")  # receives job 1
    assert raw.read_until(b"END\r\n") == b"VALUE dirty_jobs/close/open 0 5\r\njob 1\r\nEND\r\n"
    raw.send(b"GET dirty_jobs/close/open\r\n")  # closes job 1, receives job 2
    assert raw.read_until(b"END\r\n") == b"VALUE dirty_jobs/close/open 0 5\r\njob 2\r\nEND\r\n"
    assert raw.get("dirty_jobs/close") == b"END\r\n"
    assert raw.get("dirty_jobs") == b"END\r\n"  # both closed: gone


def test_the_guides_timeout_example(kestrel_server) -> None:
    server = kestrel_server(1)
    raw, other = Raw(server.kestrel), Raw(server.kestrel)
    raw.send(b"GET work/t=500/open\r\n")  # waits up to 500 ms for an item
    assert other.ask(b"SET work 0 0 2\r\nhi\r\n") == b"STORED\r\n"
    assert raw.read_until(b"END\r\n") == b"VALUE work/t=500/open 0 2\r\nhi\r\nEND\r\n"
    assert (
        raw.ask(b"GET work/t=500/open\r\n")
        == b"CLIENT_ERROR an item is already open on this queue\r\n"
    )
    assert raw.ask(b"GET work/abort\r\n") == b"END\r\n"
    assert raw.ask(b"GET work/peek\r\n", b"END\r\n") == b"VALUE work/peek 0 2\r\nhi\r\nEND\r\n"
    assert raw.ask(b"GET work/t=50\r\n", b"END\r\n") == b"VALUE work/t=50 0 2\r\nhi\r\nEND\r\n"
    assert raw.ask(b"GET work/t=50\r\n") == b"END\r\n"  # empty after the wait


def test_every_admin_command(kestrel_server, tmp_path) -> None:
    """With kestrel.admin: true (flush_all, reload and shutdown are administrative)."""
    conf = tmp_path / "admin.yaml"
    conf.write_text("kestrel:\n  admin: true\n")
    server = kestrel_server(1, ("--config", str(conf)))
    raw = Raw(server.kestrel)
    assert raw.ask(b"set q1 0 0 1\r\na\r\n") == b"STORED\r\n"
    assert raw.ask(b"set q1 0 0 1 noreply\r\nb\r\nversion\r\n") == b"VERSION shardq-0.1.0\r\n"
    stats = raw.ask(b"STATS\r\n", b"END\r\n").decode()
    assert re.search(r"^STAT uptime \d+\r$", stats, re.M)
    assert "STAT cmd_set 2\r\n" in stats
    assert "STAT queue_q1_items 2\r\n" in stats
    assert "STAT queue_q1_open_transactions 0\r\n" in stats
    dump = raw.ask(b"DUMP_STATS\r\n", b"END\r\n").decode()
    assert "queue 'q1' {\r\n  items=2\r\n" in dump
    config = raw.ask(b"DUMP_CONFIG\r\n", b"END\r\n").decode()
    assert "queue 'q1' {\r\n  max_items=2147483647\r\n" in config
    assert "  max_item_size=65535\r\n" in config
    assert raw.ask(b"FLUSH q1\r\n") == b"END\r\n"
    assert raw.get("q1") == b"END\r\n"
    assert raw.ask(b"set q2 0 0 1\r\nc\r\n") == b"STORED\r\n"
    assert raw.ask(b"FLUSH_ALL\r\n") == b"Flushed all queues.\r\n"
    assert raw.get("q2") == b"END\r\n"
    assert raw.ask(b"set q3 0 0 1\r\nd\r\n") == b"STORED\r\n"
    assert raw.ask(b"DELETE q3\r\n") == b"DELETED\r\n"
    assert raw.get("q3") == b"END\r\n"
    conf.write_text("kestrel:\n  admin: true\nverbose: 1\n")  # a change the reload logs
    assert raw.ask(b"RELOAD\r\n") == b"Reloaded config.\r\n"
    assert poll_for(lambda: "SIGHUP: verbose 0 -> 1" in server.stderr_path.read_text())
    assert raw.ask(b"SHUTDOWN\r\n").startswith(b"SERVER_ERROR shutdown refused")
    assert raw.ask(b"VERSION\r\n") == b"VERSION shardq-0.1.0\r\n"  # still serving
    raw.send(b"quit\r\nversion\r\n")
    assert raw.eof()


def test_admin_commands_are_unknown_unless_enabled(kestrel_server) -> None:
    """By default a client of the door cannot empty every queue, make the server read its
    config again or ask it to stop: those commands answer as an unknown command does."""
    server = kestrel_server(1)
    raw = Raw(server.kestrel)
    assert raw.ask(b"set q1 0 0 1\r\na\r\n") == b"STORED\r\n"
    for line in (b"flush_all\r\n", b"FLUSH_ALL 0 noreply\r\n", b"reload\r\n", b"shutdown\r\n"):
        assert raw.ask(line) == b"ERROR\r\n"
    assert raw.get("q1") == b"VALUE q1 0 1\r\na\r\nEND\r\n"  # not flushed
    assert raw.ask(b"version\r\n") == b"VERSION shardq-0.1.0\r\n"  # the connection goes on
    assert "SIGHUP" not in server.stderr_path.read_text()  # no reload was asked for


def test_malformed_input_gets_memcache_errors_and_the_connection_goes_on(kestrel_server) -> None:
    server = kestrel_server(1)
    raw = Raw(server.kestrel)
    peek_open = b"CLIENT_ERROR peek cannot be combined with open, close or abort\r\n"
    too_large = b"SERVER_ERROR object too large for cache\r\n"
    for line, answer in [
        (b"bogus\r\n", b"ERROR\r\n"),
        (b"get\r\n", b"ERROR\r\n"),
        (b"get a b\r\n", b"CLIENT_ERROR one queue per get\r\n"),
        (b"get a/nope\r\n", b"CLIENT_ERROR bad get option\r\n"),
        (
            b"get a/peek/open\r\n",
            peek_open,
        ),
        (b"get +out\r\n", b"CLIENT_ERROR bad queue name\r\n"),
        (b"set q 0 0\r\n", b"CLIENT_ERROR bad command line format\r\n"),
        (b"\r\n", b"ERROR\r\n"),
        (
            b"set q 0 0 70000\r\n" + b"x" * 70000 + b"\r\n",
            too_large,
        ),
        (b"set q 0 0 2\r\nabc\r\n", b"CLIENT_ERROR bad data chunk\r\n"),
    ]:
        assert raw.ask(line) == answer, line
    # 2 bytes and "c\r" were the item: the "\n" left is an empty line, as in memcached
    assert raw.read_until(b"\r\n") == b"ERROR\r\n"
    assert raw.ask(b"version\r\n") == b"VERSION shardq-0.1.0\r\n"
    raw.send(b"x" * 3000)  # a line too long: memcached closes such a client
    assert raw.read_until(b"\r\n") == b"CLIENT_ERROR line too long\r\n"
    assert raw.eof()


def test_pipelined_sets_go_in_one_batch_and_answer_in_order(kestrel_server) -> None:
    """Consecutive sets are sent to the server together; each still gets its own answer,
    in order (none for noreply, STORED for one already expired), and the command after
    them sees all of them."""
    server = kestrel_server(1)
    raw = Raw(server.kestrel)
    raw.send(
        b"set q1 0 0 1\r\na\r\n"
        b"set q1 0 0 1 noreply\r\nb\r\n"
        b"set q2 0 0 1\r\nc\r\n"
        b"set q1 0 1000001 1\r\nd\r\n"  # a unix time long past: stored, never seen
        b"set q1 0 0 1\r\ne\r\n"
        b"get q1\r\n"
    )
    assert raw.read_until(b"END\r\n") == b"STORED\r\n" * 4 + b"VALUE q1 0 1\r\na\r\nEND\r\n"
    assert raw.get("q1") == b"VALUE q1 0 1\r\nb\r\nEND\r\n"
    assert raw.get("q1") == b"VALUE q1 0 1\r\ne\r\nEND\r\n"
    assert raw.get("q2") == b"VALUE q2 0 1\r\nc\r\nEND\r\n"
