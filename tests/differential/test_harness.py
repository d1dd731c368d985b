"""The harness itself: reply framing, normalisation and templates (no servers)."""

from __future__ import annotations

import socket
import threading

import pytest
from helpers import (
    ProtocolTimeout,
    UnexpectedData,
    UnexpectedEOF,
    expect_eof,
    expect_silence,
    poll_for,
    read_replies,
)

from .normalise import IGNORED_KEYS, IdMap, normalise_unit


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    yield a, b
    a.close()
    b.close()


def test_read_replies_splits_units_with_bodies(pair) -> None:
    server, client = pair
    server.sendall(b"INSERTED 1\r\nRESERVED 1 4\r\na\r\nb\r\nOK 5\r\n---\n\n\r\nFOUND 2 0\r\n\r\nX")
    assert read_replies(client, 2, 1.0) == [b"INSERTED 1\r\n", b"RESERVED 1 4\r\na\r\nb\r\n"]
    assert read_replies(client, 2, 1.0) == [b"OK 5\r\n---\n\n\r\n", b"FOUND 2 0\r\n\r\n"]
    with pytest.raises(ProtocolTimeout):
        read_replies(client, 1, 0.1)
    server.sendall(b"\r\n")
    assert read_replies(client, 1, 1.0) == [b"X\r\n"]


def test_read_replies_waits_for_a_body_split_across_writes(pair) -> None:
    server, client = pair
    timer = threading.Timer(0.1, server.sendall, args=(b"bc\r\n",))
    server.sendall(b"RESERVED 7 3\r\na")
    timer.start()
    assert read_replies(client, 1, 2.0) == [b"RESERVED 7 3\r\nabc\r\n"]
    timer.join()


def test_silence_and_eof(pair) -> None:
    server, client = pair
    expect_silence(client, 0.05)
    server.sendall(b"X")
    with pytest.raises(UnexpectedData):
        expect_silence(client, 0.05)
    server.close()
    with pytest.raises(UnexpectedData):  # the pending "X"
        expect_eof(client)


def test_eof_while_reading(pair) -> None:
    server, client = pair
    server.sendall(b"USING a\r\nUSI")
    server.close()
    with pytest.raises(UnexpectedEOF):
        read_replies(client, 2, 1.0)


def test_poll_for() -> None:
    calls = iter([0, 0, 3])
    assert poll_for(lambda: next(calls), 1.0, 0.001) == 3
    with pytest.raises(TimeoutError):
        poll_for(lambda: False, 0.05)


def test_ids_become_names_or_order_of_appearance() -> None:
    ids = IdMap()
    ids.bind("j1", 41)
    assert normalise_unit(b"INSERTED 41\r\n", ids, IGNORED_KEYS) == b"INSERTED {j1}\r\n"
    assert normalise_unit(b"RESERVED 99 2\r\nhi\r\n", ids, IGNORED_KEYS) == (
        b"RESERVED {#2} 2\r\nhi\r\n"
    )
    assert normalise_unit(b"FOUND 41 0\r\n\r\n", ids, IGNORED_KEYS) == b"FOUND {j1} 0\r\n\r\n"
    assert normalise_unit(b"KICKED 41\r\n", ids, IGNORED_KEYS) == b"KICKED 41\r\n"
    assert ids.expand(b"delete {j1}\r\nrelease {j1+1} {j1-41}") == b"delete 41\r\nrelease 42 0"
    with pytest.raises(KeyError):
        ids.expand(b"peek {nope}\r\n")


def test_yaml_quoting_is_kept_ignored_keys_and_counts_are_not() -> None:
    ids = IdMap()
    ids.bind("j1", 5)
    v112 = b"---\nid: 5\ntube: foo\nstate: ready\nage: 3\nfile: 0\n"
    v113 = b'---\nid: 5\ntube: "foo"\nstate: ready\nage: 0\nfile: 2\n'
    norm112 = normalise_unit(b"OK %d\r\n%s\r\n" % (len(v112), v112), ids, IGNORED_KEYS)
    norm113 = normalise_unit(b"OK %d\r\n%s\r\n" % (len(v113), v113), ids, IGNORED_KEYS)
    assert norm112 != norm113  # 1.13's quoting is a difference from 1.12's bytes
    assert norm113.endswith(b'tube: "foo"\nstate: ready\nage: <ignored>\nfile: <ignored>\n\r\n')
    assert norm112 == (
        b"OK <n>\r\n---\nid: {j1}\ntube: foo\nstate: ready\nage: <ignored>\nfile: <ignored>\n\r\n"
    )
    bad = normalise_unit(b"OK 99\r\n%s\r\n" % v112, ids, IGNORED_KEYS)
    assert bad.startswith(b"OK <BAD COUNT>\r\n")
    stats = b'---\ncmd-put: 1\nid: 0123456789abcdef\nname: "x"\n'
    assert normalise_unit(b"OK %d\r\n%s\r\n" % (len(stats), stats), ids, IGNORED_KEYS) == (
        b'OK <n>\r\n---\ncmd-put: 1\nid: <ignored>\nname: "x"\n\r\n'
    )
    tubes = b'---\n- default\n- "a b"\n'
    assert normalise_unit(b"OK %d\r\n%s\r\n" % (len(tubes), tubes), ids, IGNORED_KEYS) == (
        b'OK <n>\r\n---\n- default\n- "a b"\n\r\n'
    )
    # key order is kept, so a reordering shows up as a difference
    swapped = b"---\ntube: foo\nid: 5\n"
    norm = normalise_unit(b"OK %d\r\n%s\r\n" % (len(swapped), swapped), ids, IGNORED_KEYS)
    assert norm.startswith(b"OK <n>\r\n---\ntube: foo\n")


@pytest.mark.parametrize("shardq_port", [1], indirect=True)
def test_fixtures_start_fresh_servers(shardq_port: int, beanstalkd_port: int) -> None:
    from helpers import connect, send

    for port in (shardq_port, beanstalkd_port):
        sock = connect(port)
        send(sock, b"list-tube-used\r\n")
        assert read_replies(sock, 1) == [b"USING default\r\n"]
        sock.close()
