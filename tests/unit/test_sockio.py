"""Tests for shardq.processes.common.sockio: a client socket's reads and writes by its
descriptor (compiled) behave as the socket's own methods (pure, and TLS: fd -1)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from shardq.processes.common import sockio


@pytest.fixture(params=["descriptor", "methods"])
def pair(request: pytest.FixtureRequest) -> Iterator[tuple[socket.socket, socket.socket, int]]:
    """A connected pair, the server end non-blocking, and the fd its calls take."""
    client, server = socket.socketpair()
    server.setblocking(False)
    fd = sockio.plain_fd(server) if request.param == "descriptor" else -1
    yield client, server, fd
    client.close()
    server.close()


def test_plain_fd() -> None:
    a, b = socket.socketpair()
    with a, b:
        assert sockio.plain_fd(a) == a.fileno()

    class Wrapped(socket.socket):  # as ssl.SSLSocket: bytes of its own above the descriptor
        pass

    wrapped = Wrapped(socket.AF_INET, socket.SOCK_STREAM)
    with wrapped:
        assert sockio.plain_fd(wrapped) == -1


def test_read_what_came_then_nothing_then_the_end(
    pair: tuple[socket.socket, socket.socket, int],
) -> None:
    client, server, fd = pair
    buf = bytearray(8)
    with pytest.raises(BlockingIOError):
        sockio.recv_into(server, fd, buf)
    client.sendall(b"put 0 0 1 1\r\n")
    assert sockio.recv_into(server, fd, buf) == 8  # at most the buffer
    assert sockio.head(buf, 8) == b"put 0 0 "
    n = sockio.recv_into(server, fd, buf)
    assert sockio.head(buf, n) == b"1 1\r\n"
    assert type(sockio.head(buf, n)) is bytes
    client.close()
    assert sockio.recv_into(server, fd, buf) == 0


def test_write_until_full_then_to_a_closed_peer(
    pair: tuple[socket.socket, socket.socket, int],
) -> None:
    client, server, fd = pair
    assert sockio.send(server, fd, bytearray(b"INSERTED 1\r\n")) == 12
    assert client.recv(64) == b"INSERTED 1\r\n"
    chunk = bytearray(1 << 16)
    with pytest.raises(BlockingIOError):  # no room left: the kernel takes nothing
        while sockio.send(server, fd, chunk):
            pass
    client.close()
    with pytest.raises((BrokenPipeError, ConnectionResetError)):
        sockio.send(server, fd, bytearray(b"x"))


@pytest.mark.parametrize(
    ("start", "data"),
    [(b"", b""), (b"", b"INSERTED 1\r\n"), (b"abc", b""), (b"x" * 1000, b"y" * 70000)],
)
def test_add_is_in_place_concatenation(start: bytes, data: bytes) -> None:
    out = bytearray(start)
    alias = out
    sockio.add(out, data)
    assert out == start + data
    assert alias is out  # the same buffer, grown in place (the connection keeps it)


@pytest.mark.parametrize(("start", "n"), [(b"", 0), (b"abc", 0), (b"abc", 2), (b"abc", 3)])
def test_drop_is_in_place_deletion_of_the_first_n(start: bytes, n: int) -> None:
    out = bytearray(start)
    alias = out
    sockio.drop(out, n)
    assert out == start[n:]
    assert alias is out
    sockio.add(out, b"next")  # the buffer goes on taking replies
    assert out == start[n:] + b"next"
