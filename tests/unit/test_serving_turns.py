"""Turns of a serving process hosting its shard: the fast path and the work bound per turn.

An in-process Serving process hosts a real ShardCore (its ZeroMQ sockets bound in a temp run dir,
no other process: ids come from a large block given up front); clients are socket pairs,
and the test runs the loop's turns itself, so what one turn does is seen exactly.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import make_cert

from shardq.config import load_config
from shardq.processes.common.listener import tls_context
from shardq.processes.serving import clients
from shardq.processes.serving.conn import Conn
from shardq.processes.serving.loop import ServingProcess
from shardq.processes.shard.core import ShardCore
from shardq.processes.supervision.children import serving_settings

USED = b"USING default\r\n"


@pytest.fixture
def serving_proc(tmp_path: Path) -> Iterator[ServingProcess]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    config = load_config("", {"shards": 1, "serving": 1})
    settings = serving_settings(config, str(tmp_path), 0, (listener.detach(), -1, -1))
    a = ServingProcess(settings, ShardCore(0, True))
    a.ids.give(0, range(1, 1 << 40))  # ids at hand: there is no coordinator to lease from
    yield a
    a.close_links()
    a.listener.close()


def client(a: ServingProcess, conn_id: int) -> socket.socket:
    """A connection the serving process serves, and the client's end of it."""
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    conn = Conn(conn_id, ours, 65535)
    a.conns[conn_id] = conn
    a.interest(conn)
    theirs.setblocking(False)
    return theirs


def received(sock: socket.socket) -> bytes:
    got = b""
    while True:
        try:
            chunk = sock.recv(1 << 20)
        except BlockingIOError:
            return got
        if not chunk:
            return got
        got += chunk


def test_a_long_pipeline_runs_a_bounded_part_per_turn(serving_proc: ServingProcess) -> None:
    """A connection with thousands of commands buffered gets at most PUMP_BUDGET of them
    run in one turn; another connection is answered in that same turn, and the rest of the
    pipeline follows in the next turns, in order."""
    many = 3 * clients.PUMP_BUDGET + 7
    a, b = client(serving_proc, 1), client(serving_proc, 2)
    a.sendall(b"list-tube-used\r\n" * many)
    b.sendall(b"list-tube-used\r\n")
    serving_proc.turn()
    assert received(b) == USED
    first = received(a)
    assert first == USED * clients.PUMP_BUDGET
    rest = b""
    for _ in range(many):  # as many turns as it takes, and no more than one per command
        if len(first) + len(rest) == len(USED) * many:
            break
        serving_proc.turn()
        rest += received(a)
    assert first + rest == USED * many


def test_end_of_input_waits_for_the_commands_left_over(serving_proc: ServingProcess) -> None:
    """A client that sends a long pipeline and closes its side gets every answer before
    the connection closes, though they take several turns."""
    many = 2 * clients.PUMP_BUDGET + 1
    a = client(serving_proc, 1)
    a.sendall(b"list-tube-used\r\n" * many)
    a.shutdown(socket.SHUT_WR)
    got = b""
    for _ in range(many):
        serving_proc.turn()
        got += received(a)
        if 1 not in serving_proc.conns:
            break
    assert got == USED * many
    assert 1 not in serving_proc.conns


def test_the_fast_path_serves_a_cycle_in_one_turn_and_counts_it(
    serving_proc: ServingProcess,
) -> None:
    """put, reserve and delete of one read are answered in one turn, as the general path
    would answer them, and counted in the command stats."""
    a = client(serving_proc, 1)
    serving_proc.turn()
    a.sendall(b"put 5 0 60 3\r\nabc\r\nreserve-with-timeout 0\r\nreserve\r\n")
    serving_proc.turn()
    job = received(a)
    assert job.startswith(b"INSERTED ")
    job_id = int(job.split()[1])
    assert job.endswith(b"RESERVED %d 3\r\nabc\r\n" % job_id)
    # the second reserve found nothing ready and waits (the general path has it now)
    a.sendall(b"delete %d\r\n" % job_id)
    serving_proc.turn()
    assert received(a) == b""  # the connection waits for its reserve: nothing runs
    for key, want in (("cmd-put", 1), ("cmd-reserve-with-timeout", 1), ("cmd-reserve", 1)):
        assert serving_proc.command_stats()[key] == want, key
    b = client(serving_proc, 2)
    b.sendall(b"put 0 0 60 1\r\nx\r\n")
    serving_proc.turn()
    serving_proc.turn()
    assert received(b).startswith(b"INSERTED ")
    other = received(a)  # the waiting reserve took b's job; then the delete of abc ran
    assert other.startswith(b"RESERVED ")
    assert other.endswith(b"\r\nx\r\nDELETED\r\n")


def test_half_open_tls_handshakes_are_bounded(serving_proc: ServingProcess, tmp_path: Path) -> None:
    """Past max_handshakes TLS connections under way, a new one is closed at accept (and
    counted); the ones admitted wait for their handshake."""
    cert, key = make_cert(tmp_path, "server", "127.0.0.1")
    serving_proc.tls = tls_context(str(cert), str(key), None)
    serving_proc.max_handshakes = 2
    port = serving_proc.listener.getsockname()[1]
    raw = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(3)]
    serving_proc.accept()
    assert len(serving_proc.handshakes) == 2
    assert serving_proc.tls_failed == 1
    assert raw[2].recv(10) == b""  # the third: closed at once
    for sock in raw:
        sock.close()
