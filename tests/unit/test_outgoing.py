"""The connections to write at the end of a turn (serving/outgoing.py): each once, in the
order they got output, none left over, and one taken off not written."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from shardq.processes.serving.conn import Conn
from shardq.processes.serving.outgoing import Outgoing


@pytest.fixture
def conns() -> Iterator[list[Conn]]:
    socks = [socket.socket() for _ in range(3)]
    yield [Conn(i, sock, 65535) for i, sock in enumerate(socks)]
    for sock in socks:
        sock.close()


def test_each_once_in_order(conns: list[Conn]) -> None:
    a, b, c = conns
    out = Outgoing()
    assert not out and len(out) == 0
    for conn in (b, a, b, c, a):
        out.add(conn)
    assert out and len(out) == 3 and a in out
    assert out.take() == [b, a, c]
    assert not out and a not in out and out.take() == []


def test_one_taken_off_is_not_written_unless_added_again(conns: list[Conn]) -> None:
    a, b, c = conns
    out = Outgoing()
    out.add(a)
    out.add(b)
    out.discard(a)
    assert a not in out and len(out) == 1
    assert out.take() == [b]
    out.add(a)
    out.add(c)
    out.discard(a)
    out.add(a)  # back on: written once (where it was first listed)
    assert out.take() == [a, c]


def test_added_while_the_turn_writes_waits_for_the_next(conns: list[Conn]) -> None:
    """A connection listed while `take`'s connections are written (a write that fails
    finishes the connection, to be closed once written) is written in the next turn."""
    a, b, _ = conns
    out = Outgoing()
    out.add(a)
    taken = out.take()
    out.add(a)
    out.add(b)
    assert taken == [a] and out.take() == [a, b]
