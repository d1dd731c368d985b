"""limits.max_jobs and limits.max_memory (issue 14, item 2): one count for the whole server,
whichever shard and process a put lands in. Past a limit, put answers OUT_OF_MEMORY and
everything else goes on; a delete makes room at once; a shard that restarts gives back
what it lost and keeps what it recovered; SIGHUP changes a limit live."""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import connect, poll_for, read_replies, send, tube_on_shard, wal_args
from test_limits import MIB, refused, server_rss, stats

from shardq.bench.procs import read_line, terminate

LAYOUTS = [(1, "1"), (4, "1"), (4, "2")]
LAYOUT_IDS = ["shards1", "shards4", "shards4-serving2"]


def put(sock: socket.socket, tube: str, body: bytes = b"job") -> bytes:
    send(sock, f"use {tube}\r\nput 0 0 60 {len(body)}\r\n".encode() + body + b"\r\n")
    return read_replies(sock, 2)[1]


def fill(sock: socket.socket, n: int, shards: int) -> list[int]:
    """`n` puts spread over a tube on every shard, each INSERTED; their ids."""
    ids = []
    for i in range(n):
        reply = put(sock, tube_on_shard(i % shards, shards))
        assert reply.startswith(b"INSERTED"), (i, reply)
        ids.append(int(reply.split()[1]))
    return ids


@pytest.mark.parametrize(("shards", "serving"), LAYOUTS, ids=LAYOUT_IDS)
def test_max_jobs_counts_every_shard_and_a_delete_makes_room(
    shards: int, serving: str, shardq_server: Callable[..., Any]
) -> None:
    server = shardq_server(shards=shards, extra=("--serving", serving, "--max-jobs", "100"))
    sock = connect(server.port)
    ids = fill(sock, 100, shards)
    for shard in range(shards):  # the 101st, wherever it goes
        assert put(sock, tube_on_shard(shard, shards)) == b"OUT_OF_MEMORY\r\n"
    # everything else goes on
    send(sock, f"use {tube_on_shard(0, shards)}\r\npeek-ready\r\n".encode())
    assert read_replies(sock, 2)[1].startswith(b"FOUND")
    send(sock, b"watch " + tube_on_shard(shards - 1, shards).encode() + b"\r\nreserve\r\n")
    reserved = read_replies(sock, 2)[1]
    assert reserved.startswith(b"RESERVED")
    values = stats(server.port)
    assert values["current-jobs-ready"] == "99"
    assert values["limit-max-jobs"] == "100"
    assert values["limit-jobs"] == "100"
    assert values["limit-puts-refused"] == str(shards)
    # a delete on one shard makes room for a put on another, at once
    send(sock, f"delete {int(reserved.split()[1])}\r\n".encode())
    assert read_replies(sock, 1) == [b"DELETED\r\n"]
    assert put(sock, tube_on_shard(0, shards)).startswith(b"INSERTED")
    assert put(sock, tube_on_shard(shards - 1, shards)) == b"OUT_OF_MEMORY\r\n"
    assert len(ids) == 100
    sock.close()


def test_max_memory_holds_rss_near_the_limit(shardq_server: Callable[..., Any]) -> None:
    limit = 24 * MIB
    server = shardq_server(shards=4, extra=("--serving", "2", "--max-memory", "24M"))
    server.wait_all_children()
    idle = server_rss(server)
    body = b"m" * 16_000
    producers = [connect(server.port) for _ in range(4)]
    inserted = refused_puts = 0
    pushed = 0
    while pushed < 3 * limit:  # producers push three times the limit
        for i, sock in enumerate(producers):
            reply = put(sock, tube_on_shard(i, 4), body)
            pushed += len(body)
            if reply.startswith(b"INSERTED"):
                inserted += 1
            else:
                assert reply == b"OUT_OF_MEMORY\r\n", reply
                refused_puts += 1
    grown = server_rss(server) - idle
    per_job = len(body) + 512
    assert inserted == limit // per_job, (inserted, limit // per_job)
    assert refused_puts > 2 * inserted
    assert grown < 1.2 * limit, f"RSS grew {grown / MIB:.1f} MiB for a {limit / MIB:.0f} MiB limit"
    values = stats(server.port)
    assert values["limit-max-memory"] == str(limit)
    assert int(values["limit-memory"]) == inserted * per_job
    for sock in producers:
        sock.close()


@pytest.mark.parametrize("logged", [False, True], ids=["no-log", "log"])
def test_a_restarted_shard_gives_back_what_it_lost_and_keeps_what_it_recovered(
    logged: bool, tmp_path: Path, shardq_server: Callable[..., Any]
) -> None:
    extra = ("--max-jobs", "10", *(wal_args(tmp_path / "wal") if logged else ()))
    server = shardq_server(shards=2, extra=extra)  # shard 1 in a process of its own
    sock = connect(server.port)
    tube = tube_on_shard(1, 2)
    for _ in range(10):
        assert put(sock, tube).startswith(b"INSERTED")
    assert put(sock, tube) == b"OUT_OF_MEMORY\r\n"
    old = server.wait_all_children()["shard 1"]
    signal_and_wait_restart(server, old)
    after = poll_for(lambda: stats(server.port), timeout=10)
    if logged:  # the 10 jobs are back, and still count
        assert after["current-jobs-ready"] == "10"
        assert put(sock, tube) == b"OUT_OF_MEMORY\r\n"
    else:  # lost with the process: their room is free again
        assert after["current-jobs-ready"] == "0"
        for _ in range(10):
            assert put(sock, tube).startswith(b"INSERTED")
        assert put(sock, tube) == b"OUT_OF_MEMORY\r\n"
    sock.close()


def signal_and_wait_restart(server: Any, old: int) -> None:
    os.kill(old, signal.SIGKILL)

    def restarted() -> bool:
        pid = server.roles().get("shard 1")
        return pid is not None and pid != old

    poll_for(restarted, timeout=20)


def test_sighup_changes_max_jobs_live(shardq_launch: Callable[..., Any], tmp_path: Path) -> None:
    conf = tmp_path / "shardq.yaml"
    conf.write_text("limits:\n  max_jobs: 5\n")
    proc, _run, _tmp, stderr_path = shardq_launch(2, ("--config", str(conf), "-V"))
    try:
        port = int(read_line(proc, 20).decode().rsplit(":", 1)[1])
        sock = connect(port)
        fill(sock, 5, 2)
        assert put(sock, "t") == b"OUT_OF_MEMORY\r\n"
        conf.write_text("limits:\n  max_jobs: 8\n  max_memory: 64M\n")
        proc.send_signal(signal.SIGHUP)
        poll_for(lambda: stats(port)["limit-max-jobs"] == "8", timeout=10)
        assert stats(port)["limit-max-memory"] == str(64 * MIB)
        fill(sock, 3, 2)
        assert put(sock, "t") == b"OUT_OF_MEMORY\r\n"
        assert "SIGHUP: limits.max_jobs 5 -> 8" in stderr_path.read_text()
        sock.close()
    finally:
        terminate(proc, 10, group=True)


def test_a_limit_set_by_sighup_alone_needs_a_restart(
    shardq_launch: Callable[..., Any], tmp_path: Path
) -> None:
    conf = tmp_path / "shardq.yaml"
    conf.write_text("verbose: 0\n")
    proc, _run, _tmp, stderr_path = shardq_launch(1, ("--config", str(conf)))
    try:
        port = int(read_line(proc, 20).decode().rsplit(":", 1)[1])
        conf.write_text("limits:\n  max_jobs: 5\n")
        proc.send_signal(signal.SIGHUP)
        poll_for(lambda: "needs a restart" in stderr_path.read_text(), timeout=10)
        assert "SIGHUP: limits.max_jobs needs a restart to change (0 -> 5); kept" in (
            stderr_path.read_text()
        )
        assert "limit-max-jobs" not in stats(port)  # no limit set: beanstalkd's keys only
    finally:
        terminate(proc, 10, group=True)


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--max-memory", "12Q", "must be a size like 512M or 2G"),
        ("--max-memory", "1000", "must be 0 (no limit) or at least 1M"),
        ("--max-jobs", "-1", "must be an integer >= 0"),
    ],
)
def test_bad_limits_stop_start_up_with_one_line(flag: str, value: str, message: str) -> None:
    line = refused(flag, value)
    assert flag in line and message in line, line


def test_limits_in_a_config_file_take_sizes(tmp_path: Path) -> None:
    conf = tmp_path / "bad.yaml"
    conf.write_text("limits:\n  max_memory: 2X\n")
    line = refused("--config", str(conf))
    assert "limits.max_memory" in line and "must be a size" in line, line
