"""Nothing of a closed connection survives a restart of the process that served it.

200 connections watch a tube, send a blocking ``reserve`` and close while it waits. Then
20 jobs are put into the tube and the shard process that owns it is killed. The
restarted shard must not be sent the reserves of those long-closed connections again:
if it were, it would hand the 20 jobs to connections that no longer exist (and again each
time their TTR ran out) while a live worker gets nothing.
"""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path

import pytest
from crash_load import Client
from helpers import poll_for, tube_on_shard, wal_args

GHOSTS = 200
JOBS = 20


def tube_stats(c: Client, tube: bytes) -> dict[str, str]:
    return c.stats(b"stats-tube " + tube)


@pytest.mark.parametrize(
    ("shards", "victim", "extra"),
    [(1, 0, ("--no-colocate",)), (4, 1, ())],
    ids=["1-shard", "4-shards"],
)
def test_reserves_of_closed_connections_are_not_resent_after_a_shard_restart(
    shardq_server, tmp_path: Path, shards: int, victim: int, extra: tuple[str, ...]
) -> None:
    srv = shardq_server(shards, (*wal_args(tmp_path / "wal"), *extra))
    role = f"shard {victim}"
    before = srv.wait_all_children()[role]
    tube = tube_on_shard(victim, shards, "ghost-").encode()

    ghosts = []
    for _ in range(GHOSTS):
        g = Client(srv.port)
        g.send(b"watch %s\r\nignore default\r\nreserve\r\n" % tube)
        assert g.line() == b"WATCHING 2"
        assert g.line() == b"WATCHING 1"
        ghosts.append(g)
    admin = Client(srv.port)
    assert admin.cmd(b"use " + tube) == b"USING " + tube  # keeps the tube when the ghosts go
    poll_for(lambda: tube_stats(admin, tube)["current-waiting"] == str(GHOSTS), timeout=10)
    for g in ghosts:
        g.sock.shutdown(socket.SHUT_RDWR)
        g.close()
    poll_for(lambda: tube_stats(admin, tube)["current-waiting"] == "0", timeout=10)

    for i in range(JOBS):
        assert admin.cmd(b"put 0 0 60 2\r\nj%d" % (i % 10)).startswith(b"INSERTED ")
    assert tube_stats(admin, tube)["current-jobs-ready"] == str(JOBS)

    os.kill(before, signal.SIGKILL)
    poll_for(lambda: srv.roles().get(role, before) != before, timeout=15)

    worker = Client(srv.port)
    assert worker.cmd(b"watch " + tube) == b"WATCHING 2"
    assert worker.cmd(b"ignore default") == b"WATCHING 1"
    got = []
    for _ in range(JOBS):
        head = worker.cmd(b"reserve-with-timeout 10")
        assert head.startswith(b"RESERVED "), (head, got, tube_stats(admin, tube))
        got.append(int(head.split()[1]))
    assert len(set(got)) == JOBS
    stats = tube_stats(admin, tube)
    assert stats["current-jobs-reserved"] == str(JOBS), stats
    assert stats["current-waiting"] == "0", stats
    for job_id in got:
        assert worker.cmd(b"delete %d" % job_id) == b"DELETED"
    assert tube_stats(admin, tube)["current-jobs-ready"] == "0"
