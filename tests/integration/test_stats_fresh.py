"""`stats` and `stats-tube` reflect everything the server processed before it read them,
whichever process handled it: a close on one connection, then `stats` on another, never
counts the closed one; a put acknowledged on one connection is always in the next
`stats-tube` on another. 1,000 tries each, with one shard, four, and two serving
processes (how it is guaranteed: docs/ARCHITECTURE.md, "Stats that are never stale")."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from helpers import LAYOUTS, Layout, connect, read_replies, send

TRIES = 1000


def ask(sock, data: bytes) -> bytes:
    send(sock, data)
    return read_replies(sock, 1)[0]


def field(reply: bytes, key: str) -> str:
    for line in reply.decode().splitlines():
        if line.startswith(key + ": "):
            return line.split(": ", 1)[1]
    raise AssertionError(f"no {key} in {reply!r}")


@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
def test_close_then_stats_never_counts_the_closed_connection(
    start_shardq: Callable[[Layout], int], layout: Layout
) -> None:
    port = start_shardq(layout)
    watcher = connect(port)
    stale = []
    for i in range(TRIES):
        other = connect(port)
        assert ask(other, b"list-tube-used\r\n") == b"USING default\r\n"
        other.close()
        count = field(ask(watcher, b"stats\r\n"), "current-connections")
        if count != "1":
            stale.append((i, count))
    watcher.close()
    assert not stale, f"{len(stale)} of {TRIES} stats counted a closed connection: {stale[:10]}"


@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
def test_put_then_stats_tube_always_counts_the_job(
    start_shardq: Callable[[Layout], int], layout: Layout
) -> None:
    port = start_shardq(layout)
    producer, watcher = connect(port), connect(port)
    assert ask(producer, b"use fresh\r\n") == b"USING fresh\r\n"
    stale = []
    for i in range(1, TRIES + 1):
        assert ask(producer, b"put 0 0 60 1\r\nx\r\n").startswith(b"INSERTED ")
        ready = field(ask(watcher, b"stats-tube fresh\r\n"), "current-jobs-ready")
        if ready != str(i):
            stale.append((i, ready))
    assert not stale, f"{len(stale)} of {TRIES} stats-tube missed a put: {stale[:10]}"
