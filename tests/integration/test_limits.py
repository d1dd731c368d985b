"""One server per directory, and the limits that keep one client from growing the server:
limits.max_connections, limits.max_output_bytes, and no reading past a bound of unparsed
input (issue 14, items 0 and 2). Real servers; RSS is summed over all their processes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from zlib import crc32

import pytest
from helpers import (
    REPO_ROOT,
    connect,
    poll_for,
    read_replies,
    send,
    tube_on_shard,
    waiting_to_be_accepted,
)

from shardq.bench.procs import wait_listening
from shardq.bench.servers import memory
from shardq.protocol.stats_keys import LIMIT_KEYS
from shardq.start import EXIT_CONFIG

REFUSE_TIMEOUT = 20.0  #: a refused start must exit within this
MIB = 1 << 20


def serve_argv(*extra: str) -> list[str]:
    return [sys.executable, "-m", "shardq", "serve", "-l", "127.0.0.1", "-p", "0", *extra]


def refused(*extra: str) -> str:
    """Run a second `shardq serve` that must be refused; its one line of stderr."""
    done = subprocess.run(
        serve_argv(*extra), cwd=REPO_ROOT, capture_output=True, timeout=REFUSE_TIMEOUT
    )
    lines = done.stderr.decode(errors="replace").splitlines()
    assert done.returncode == EXIT_CONFIG, (done.returncode, lines)
    assert b"listening" not in done.stdout
    assert len(lines) == 1, lines
    return lines[0]


def stats(port: int, sock: socket.socket | None = None) -> dict[str, str]:
    """`stats` as a dict, on `sock` (or on a connection of its own)."""
    own = sock is None
    sock = connect(port) if sock is None else sock
    try:
        send(sock, b"stats\r\n")
        [unit] = read_replies(sock, 1)
    finally:
        if own:
            sock.close()
    body = unit.split(b"\r\n", 1)[1].decode()
    return dict(line.split(": ", 1) for line in body.splitlines()[1:] if ": " in line)


def server_rss(server: Any) -> int:
    """RSS of the supervisor and all its children, in bytes."""
    return memory([server.pid, *server.roles().values()])["rss"]


@pytest.mark.parametrize("flag", ["-b", "--run-dir"])
def test_second_server_on_a_directory_is_refused(
    flag: str, tmp_path: Path, shardq_server: Callable[..., Any]
) -> None:
    wal = tmp_path / "wal"
    first = shardq_server(extra=("-b", str(wal)))
    first.wait_all_children()
    directory = wal if flag == "-b" else first.run_dir
    line = refused("--shards", "1", "--serving", "1", flag, str(directory))
    assert str(directory) in line and f"(pid {first.pid})" in line, line
    assert "in use by another shardq server" in line, line
    assert first.is_alive(first.pid)
    # restarted children of the first server are not refused: the lock is the supervisor's
    serving_proc = first.roles()["serving"]
    subprocess.run(["kill", "-9", str(serving_proc)], check=True)
    poll_for(lambda: first.roles().get("serving") not in (None, serving_proc), timeout=15)
    assert poll_for(lambda: "pid" in stats(first.port), timeout=15)
    # once the first has stopped, the directory is free again
    first.proc.terminate()
    first.proc.wait(10)
    third = subprocess.Popen(
        serve_argv("--shards", "1", "--serving", "1", flag, str(directory)),
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        port, data = wait_listening(third, REFUSE_TIMEOUT)
        assert port is not None, (data, third.stderr.read() if third.stderr else b"")
    finally:
        third.terminate()
        third.wait(10)
        for stream in (third.stdout, third.stderr):
            if stream is not None:
                stream.close()


def test_connections_past_max_connections_are_closed_at_accept(
    shardq_server: Callable[..., Any],
) -> None:
    server = shardq_server(extra=("--max-connections", "3"))
    held = [connect(server.port) for _ in range(2)]  # stats() below takes the third
    for sock in held:
        send(sock, b"use t\r\n")
        assert read_replies(sock, 1) == [b"USING t\r\n"]
    extra = connect(server.port)
    third = connect(server.port)
    try:
        send(held[0], b"list-tube-used\r\n")  # the server has accepted both by now
        read_replies(held[0], 1)
        # one of the last two got the third place, the other was closed at once
        closed = 0
        for sock in (extra, third):
            try:
                send(sock, b"use t\r\n")
                read_replies(sock, 1, timeout=2)
            except (AssertionError, OSError):
                closed += 1
        assert closed == 1
    finally:
        extra.close()
        third.close()
    values = stats(server.port, held[0])
    assert values["limit-max-connections"] == "3"
    assert values["limit-connections-refused"] == "1"
    keys = list(values)
    assert keys[-10:] == [
        "limit-max-connections",
        "limit-connections-refused",
        "limit-connections-denied",
        "limit-max-output-bytes",
        "limit-output-closed",
        "limit-max-jobs",
        "limit-max-memory",
        "limit-jobs",
        "limit-memory",
        "limit-puts-refused",
    ], "shardq's keys must follow all of beanstalkd's"
    for sock in held:
        sock.close()


def answered(sock: socket.socket) -> bool:
    """Does the server answer a command on `sock` (False: it closed it)?"""
    try:
        send(sock, b"list-tube-used\r\n")
        return read_replies(sock, 1) == [b"USING default\r\n"]
    except (AssertionError, OSError):
        return False


def test_max_connections_counts_handed_in_connections(
    shardq_server: Callable[..., Any],
) -> None:
    """With 2 serving processes a client of `default` accepted by the process that does not
    host it is handed to the one that does, which refuses handovers past its share of
    limits.max_connections; the sender counts a handover until it is answered. That one
    is stopped while 12 clients come, so the other accepts them all: it takes its share, 2,
    and refuses the rest (measured before: 12 of 12 served with --max-connections 4, each
    handover uncounted from the moment it was sent)."""
    server = shardq_server(shards=2, extra=("--serving", "2", "--max-connections", "4"))
    roles = server.wait_all_children()
    home = roles[f"serving {crc32(b'default') % 2}"]  # hosts the shard of `default`
    os.kill(home, signal.SIGSTOP)
    try:
        held = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(12)]
        poll_for(lambda: waiting_to_be_accepted(server.port) == 0)
    finally:
        os.kill(home, signal.SIGCONT)
    try:
        served = [sock for sock in held if answered(sock)]
        assert len(served) == 2, f"{len(served)} of 12 served"
        refused = stats(server.port, served[0])["limit-connections-refused"]
        assert int(refused) == 12 - len(served)
    finally:
        for sock in held:
            sock.close()


@pytest.mark.parametrize(
    ("shards", "serving"),
    [(1, "1"), (2, "1"), (2, "2")],
    ids=["hosted-shard", "shard-process", "two-serving"],
)
def test_client_that_never_reads_is_closed_and_rss_stays_bounded(
    shards: int, serving: str, shardq_server: Callable[..., Any]
) -> None:
    # with 2 shards and 1 serving process, shard 1 runs in a process of its own; with 2
    # serving processes the client may be handed to the one that hosts its tube
    server = shardq_server(shards=shards, extra=("--serving", serving))
    server.wait_all_children()
    tube = tube_on_shard(shards - 1, shards)
    producer = connect(server.port)
    body = b"x" * 60_000
    send(producer, f"use {tube}\r\nput 0 0 60 {len(body)}\r\n".encode() + body + b"\r\n")
    inserted = read_replies(producer, 2)[1]
    job_id = int(inserted.split()[1])
    before = server_rss(server)
    assert "limit-output-closed" not in stats(server.port)  # no limit set, none acted yet
    greedy = socket.create_connection(("127.0.0.1", server.port))
    greedy.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    greedy.sendall(f"peek {job_id}\r\n".encode() * 20_000)  # 1.2 GB of replies, never read
    peak = before
    deadline = time.monotonic() + 20
    while stats(server.port).get("limit-output-closed", "0") == "0":
        peak = max(peak, server_rss(server))
        assert time.monotonic() < deadline, "the client that never reads was not closed"
        time.sleep(0.05)
    peak = max(peak, server_rss(server))
    greedy.close()
    assert peak - before < 64 * MIB, f"RSS grew {(peak - before) / MIB:.0f} MiB"
    # the others are served as before
    send(producer, f"peek {job_id}\r\n".encode())
    assert read_replies(producer, 1)[0].startswith(f"FOUND {job_id} 60000".encode())
    producer.close()


def test_input_flood_behind_a_waiting_reserve_is_not_read(
    shardq_server: Callable[..., Any],
) -> None:
    server = shardq_server()
    server.wait_all_children()
    before = server_rss(server)
    flood = connect(server.port)
    send(flood, b"reserve\r\n")
    flood.setblocking(False)
    chunk = b"use some-tube-name\r\n" * 50_000  # 1 MB of commands behind the reserve
    sent = 0
    stalled_since: float | None = None
    deadline = time.monotonic() + 30
    while sent < 256 * MIB and time.monotonic() < deadline:
        try:
            sent += flood.send(chunk)
            stalled_since = None
        except BlockingIOError:
            now = time.monotonic()
            stalled_since = stalled_since or now
            if now - stalled_since > 1.0:  # the server stopped reading
                break
            time.sleep(0.01)
    grown = server_rss(server) - before
    assert sent < 64 * MIB, f"the server read {sent / MIB:.0f} MiB behind a waiting reserve"
    assert grown < 32 * MIB, f"RSS grew {grown / MIB:.0f} MiB"
    # the server serves others, and the flooding client's reserve is answered when a job comes
    producer = connect(server.port)
    send(producer, b"put 0 0 60 2\r\nhi\r\n")
    assert read_replies(producer, 1)[0].startswith(b"INSERTED")
    flood.setblocking(True)
    flood.settimeout(5)
    assert flood.recv(64).startswith(b"RESERVED")
    flood.close()
    producer.close()


@pytest.mark.parametrize(
    "flags",
    [
        ("--allow", "127.0.0.0/8"),
        ("--max-connections", "50"),
        ("--max-output-bytes", "65536"),
        ("--max-jobs", "10"),
        ("--max-memory", "64M"),
    ],
    ids=lambda flags: flags[0].lstrip("-"),
)
def test_stats_shows_the_limit_keys_when_a_limit_is_set(
    flags: tuple[str, ...], shardq_server: Callable[..., Any]
) -> None:
    """A limit set, even one that never acted: the ten limit-* keys after beanstalkd's.
    (Without any, `stats` has beanstalkd's keys only: tests/differential/test_stats.py.)"""
    server = shardq_server(shards=1, extra=flags)
    keys = list(stats(server.port))
    assert keys[keys.index("platform") + 1 :] == list(LIMIT_KEYS)
