"""The metrics endpoint serves many clients at once and none can keep a health check out
(processes/metrics/http.py): a client holding a half-sent request does not delay /health;
idle connections past the bound on open connections make room for new ones, oldest first,
and the bound holds; a client that goes before its answer leaves one DEBUG line at most,
never a traceback.

No test here measures time: "promptly" is "while the slow client is still held open",
i.e. before its deadline (processes/metrics/http.REQUEST_TIMEOUT_S) has closed it.
"""

from __future__ import annotations

import selectors
import socket
import struct
from collections.abc import Callable
from typing import Any

from helpers import http_get, metrics_port, poll_for

from shardq.processes.metrics.http import MAX_OPEN


def still_open(sock: socket.socket) -> bool:
    """Nothing to read and no end: the server holds the connection open."""
    sock.setblocking(False)
    try:
        sock.recv(1)  # an end (b""), or bytes nobody asked for
        return False
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        sock.setblocking(True)


def closed_by_server(socks: list[socket.socket]) -> list[int]:
    """Which of `socks` (idle: they sent nothing) the server has closed, by index."""
    with selectors.DefaultSelector() as sel:
        for i, sock in enumerate(socks):
            sel.register(sock, selectors.EVENT_READ, i)
        return sorted(key.data for key, _ in sel.select(0))


def test_a_half_sent_request_does_not_hold_health(shardq_server: Callable[..., Any]) -> None:
    """Before, /health waited until the slow client's 5 s read timeout had closed it."""
    server = shardq_server(shards=1, extra=("--metrics", "127.0.0.1:0"))
    port = metrics_port(server.run_dir)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as slow:
        slow.sendall(b"GET /metrics HTTP/1.1\r\nHost: shardq\r\n")  # no blank line yet
        for _ in range(3):
            assert http_get(port, "/health") == (200, b"ok\n")
        assert still_open(slow)  # it was answered while the slow one was held
        slow.sendall(b"\r\n")
        answer = slow.makefile("rb").read()
    assert answer.startswith(b"HTTP/1.0 200 OK\r\n")
    assert b"\r\n\r\n# HELP shardq_" in answer


def test_idle_connections_make_room_and_the_bound_holds(
    shardq_server: Callable[..., Any],
) -> None:
    """Past MAX_OPEN, each new connection closes the oldest still sending nothing: /health
    is answered with many more idle ones waiting, and exactly the oldest were closed.
    Before, /health waited behind every idle connection's 5 s."""
    server = shardq_server(shards=1, extra=("--metrics", "127.0.0.1:0"))
    port = metrics_port(server.run_dir)
    idle = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(MAX_OPEN + 36)]
    try:
        assert http_get(port, "/health") == (200, b"ok\n")
        # the /health connection made room too; the oldest went first, the rest are open
        gone = list(range(len(idle) - MAX_OPEN + 1))
        poll_for(lambda: len(closed_by_server(idle)) >= len(gone), timeout=10)
        assert closed_by_server(idle) == gone
    finally:
        for sock in idle:
            sock.close()


def test_max_connections_lowers_the_bound(shardq_server: Callable[..., Any]) -> None:
    server = shardq_server(shards=1, extra=("--metrics", "127.0.0.1:0", "--max-connections", "3"))
    port = metrics_port(server.run_dir)
    idle = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(3)]
    try:
        assert http_get(port, "/health") == (200, b"ok\n")
        poll_for(lambda: closed_by_server(idle) == [0], timeout=10)
        assert still_open(idle[1]) and still_open(idle[2])
    finally:
        for sock in idle:
            sock.close()


def test_a_client_that_goes_before_its_answer_leaves_no_traceback(
    shardq_server: Callable[..., Any],
) -> None:
    """Before, each one logged a 27-line traceback at ERROR."""
    server = shardq_server(shards=1, extra=("--metrics", "127.0.0.1:0"))
    port = metrics_port(server.run_dir)
    for _ in range(5):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        sock.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()  # a reset, at once
    assert http_get(port, "/health") == (200, b"ok\n")  # after those, in one process
    log = server.stderr()
    assert "Traceback" not in log and "ERROR" not in log, log
