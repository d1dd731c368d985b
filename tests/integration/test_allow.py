"""``--allow CIDR`` (config ``allow``): TCP clients from other networks are closed at accept
and counted (``limit-connections-denied`` in ``stats``, summed over the serving processes);
clients from an allowed network are served as usual. A bad network stops start-up with one
line naming the flag.
"""

from __future__ import annotations

import contextlib
import socket

import pytest
from helpers import LAYOUTS, Layout, read_replies, send

from shardq.start import EXIT_CONFIG

ALLOWED_SOURCE = "127.0.0.2"  # loopback has all of 127/8: a client can pick its source


def connect_from(port: int, source: str) -> socket.socket:
    sock = socket.socket()
    sock.settimeout(10)
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", port))
    return sock


def stats(sock: socket.socket) -> dict[str, str]:
    send(sock, b"stats\r\n")
    (reply,) = read_replies(sock, 1)
    return dict(line.split(": ", 1) for line in reply.decode().splitlines()[2:] if ": " in line)


@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
def test_clients_from_elsewhere_are_closed_and_counted(shardq_server, layout: Layout) -> None:
    extra = ("--allow", "10.0.0.0/8", "--allow", f"{ALLOWED_SOURCE}/32")
    srv = shardq_server(layout.shards, (*extra, "--serving", str(layout.serving)))
    for _ in range(3):
        with connect_from(srv.port, "127.0.0.1") as denied:
            send(denied, b"put 0 0 60 1\r\nx\r\n")
            # closed at accept, nothing answered (a reset, our put unread, says the same)
            with contextlib.suppress(ConnectionResetError):
                assert denied.recv(100) == b""
    with connect_from(srv.port, ALLOWED_SOURCE) as ok:
        send(ok, b"put 0 0 60 1\r\ny\r\n")
        assert read_replies(ok, 1) == [b"INSERTED 1\r\n"]
        got = stats(ok)
    assert got["limit-connections-denied"] == "3"
    assert got["total-jobs"] == "1"  # the denied put never reached a shard
    assert got["total-connections"] == "1"  # a denied client is no connection of the server


def test_a_bad_network_is_one_line_naming_the_flag(shardq_launch) -> None:
    proc, *_rest, stderr_path = shardq_launch(1, ("--allow", "10.0.0.0/33"))
    out, _ = proc.communicate(timeout=20)
    assert (proc.returncode, out) == (EXIT_CONFIG, b"")
    assert stderr_path.read_text().splitlines() == [
        "shardq: flag --allow (allow): '10.0.0.0/33' is not a network like 10.0.0.0/8"
    ]
