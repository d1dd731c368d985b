"""Removing what a `shardq bench` run put into the server it loaded.

A run uses tubes of its own (`tubes_of`: the spec's prefix, unique per run); afterwards one
connection watches them all and deletes every job it can reserve, pipelined in batches,
until the tubes are empty. Jobs the load's connections still held are released by the
server when those connections close, so a tube that still counts reserved jobs is drained
again for a moment. `count_jobs` reads what is left from `stats-tube`.
"""

from __future__ import annotations

import socket
import time

from shardq.bench.workloads import Spec, plan

#: Reserves sent per round trip while draining.
BATCH = 512
#: How long a drain may take, and how long it waits for jobs still reserved to come back.
DRAIN_TIMEOUT_S = 120.0
RELEASE_WAIT_S = 5.0
#: The `stats-tube` counters that together hold every job of a tube.
JOB_COUNTERS = (
    "current-jobs-ready",
    "current-jobs-reserved",
    "current-jobs-delayed",
    "current-jobs-buried",
)


def tubes_of(spec: Spec) -> list[str]:
    """Every tube the run puts into or watches (the pre-fill of `reserve` uses the prefix)."""
    tubes = {spec.prefix}
    for conn in plan(spec):
        if conn.use:
            tubes.add(conn.use)
        tubes.update(conn.watch)
    return sorted(tubes)


class _Conn:
    """A blocking beanstalk connection with a line reader (enough for drain and stats)."""

    def __init__(self, host: str, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b""

    def close(self) -> None:
        self.sock.close()

    def _fill(self) -> None:
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        self.buf += chunk

    def line(self) -> bytes:
        while (end := self.buf.find(b"\r\n")) < 0:
            self._fill()
        line, self.buf = self.buf[:end], self.buf[end + 2 :]
        return line

    def take(self, n: int) -> bytes:
        while len(self.buf) < n:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def ask(self, request: bytes, expect: bytes) -> bytes:
        self.sock.sendall(request)
        line = self.line()
        if not line.startswith(expect):
            raise ConnectionError(f"{request.strip()!r} answered {line!r}")
        return line


def _drain_once(conn: _Conn, deadline: float) -> int:
    """Reserve and delete until a reserve finds the watched tubes empty; jobs deleted."""
    deleted = 0
    while time.monotonic() < deadline:
        conn.sock.sendall(b"reserve-with-timeout 0\r\n" * BATCH)
        ids: list[bytes] = []
        empty = False
        for _ in range(BATCH):
            line = conn.line()
            if line.startswith(b"RESERVED "):
                _, job, size = line.split()
                conn.take(int(size) + 2)
                ids.append(job)
            elif line in (b"TIMED_OUT", b"DEADLINE_SOON"):
                empty = True
            else:
                raise ConnectionError(f"reserve answered {line!r}")
        if ids:
            conn.sock.sendall(b"".join(b"delete %s\r\n" % job for job in ids))
            for _ in ids:
                line = conn.line()
                if line != b"DELETED":
                    raise ConnectionError(f"delete answered {line!r}")
            deleted += len(ids)
        if empty:
            break
    return deleted


def _stats_tube(conn: _Conn, tube: str) -> dict[str, int]:
    """The numeric fields of `stats-tube` ({} if the tube does not exist any more)."""
    conn.sock.sendall(b"stats-tube %s\r\n" % tube.encode())
    line = conn.line()
    if line == b"NOT_FOUND":
        return {}
    if not line.startswith(b"OK "):
        raise ConnectionError(f"stats-tube answered {line!r}")
    body = conn.take(int(line.split()[1]) + 2).decode()
    out = {}
    for row in body.splitlines():
        key, _, value = row.partition(":")
        if value.strip().isdigit():
            out[key.strip()] = int(value)
    return out


def count_jobs(host: str, port: int, tubes: list[str]) -> dict[str, int]:
    """Jobs per state (the JOB_COUNTERS) summed over `tubes`."""
    conn = _Conn(host, port)
    try:
        stats = [_stats_tube(conn, t) for t in tubes]
    finally:
        conn.close()
    return {k: sum(s.get(k, 0) for s in stats) for k in JOB_COUNTERS}


def drain(host: str, port: int, tubes: list[str]) -> tuple[int, int]:
    """Delete every job in `tubes`; (jobs deleted, jobs left behind)."""
    conn = _Conn(host, port)
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    try:
        for tube in tubes:
            conn.ask(b"watch %s\r\n" % tube.encode(), b"WATCHING ")
        if "default" not in tubes:
            conn.ask(b"ignore default\r\n", b"WATCHING ")
        deleted = _drain_once(conn, deadline)
        # Jobs reserved by the load's connections come back once the server saw them close.
        waited_until = time.monotonic() + RELEASE_WAIT_S
        while time.monotonic() < min(deadline, waited_until):
            stats = [_stats_tube(conn, t) for t in tubes]
            if not any(s.get("current-jobs-reserved", 0) for s in stats):
                break
            time.sleep(0.05)
            deleted += _drain_once(conn, deadline)
        deleted += _drain_once(conn, deadline)
    finally:
        conn.close()
    left = sum(count_jobs(host, port, tubes).values())
    return deleted, left
