"""One guard per command: a bug in a handler costs that command, not the process.

An in-process Acceptor (no peers started: nothing here needs them) runs commands for two
connections on socket pairs. A handler that raises answers INTERNAL_ERROR to its own
command, logs the traceback, and the next command on either connection is served.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from shardq.processes.acceptor import handlers
from shardq.processes.acceptor.conn import Conn
from shardq.processes.acceptor.loop import Acceptor
from shardq.protocol import commands as c
from shardq.protocol import proto


@pytest.fixture
def acceptor(tmp_path: Path) -> Iterator[Acceptor]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    a = Acceptor(listener.detach(), str(tmp_path), 1, 65535)
    yield a
    for s in a.socks.values():
        s.close(0)
    a.listener.close()


def conn(a: Acceptor, conn_id: int) -> Conn:
    mine, _theirs = socket.socketpair()
    k = Conn(conn_id, mine, 65535)
    a.conns[conn_id] = k
    return k


def broken(a: Acceptor, k: Conn, cmd: object) -> None:
    raise RuntimeError("a bug in a handler")


def test_a_failing_handler_answers_internal_error_and_the_server_goes_on(
    acceptor: Acceptor, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(handlers.HANDLERS, c.ListTubesWatched, broken)
    first, second = conn(acceptor, 1), conn(acceptor, 2)
    with caplog.at_level(logging.ERROR):
        acceptor.dispatch(first, c.ListTubesWatched())
    assert bytes(first.out) == proto.INTERNAL_ERROR
    assert "a bug in a handler" in caplog.text and "Traceback" in caplog.text
    acceptor.dispatch(first, c.ListTubeUsed())
    acceptor.dispatch(second, c.ListTubeUsed())
    assert bytes(first.out) == proto.INTERNAL_ERROR + proto.using("default")
    assert bytes(second.out) == proto.using("default")
