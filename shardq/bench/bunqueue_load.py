"""`shardq bench --protocol bunqueue`: push and pull+ack loads through a bunqueue door —
shardq's, or a real bunqueue server's (the same load, the same client, for a comparison).

One process drives every connection (selectors), keeping `pipeline` requests in flight on
each; every reply is checked. With ``--batch 1`` a request is one job (``PUSH``; ``PULL``
then ``ACK``), with ``--batch N`` N jobs (``PUSHB``; ``PULLB`` then ``ACKB``). The count is
of jobs: pushed, or acknowledged. Replies are matched by ``reqId`` (bunqueue runs a
connection's commands concurrently: their order is not promised). A pull load fills the
queue first (``PUSHB`` of 500) and stops with an error if it runs dry (raise --prefill);
the run's queue (``bench-XXXXXX``) is drained at the end (``Drain``: what waits).
"""

from __future__ import annotations

import itertools
import logging
import selectors
import socket
import struct
import time
from typing import Any

import msgpack

from shardq.bench.workloads import Spec, counted

HEADER = struct.Struct(">I")
FILL_BATCH = 500

log = logging.getLogger(__name__)


class LoadError(RuntimeError):
    pass


def frame(msg: dict[str, Any]) -> bytes:
    body = msgpack.packb(msg, use_bin_type=True)
    return HEADER.pack(len(body)) + body


def undefined(code: int, data: bytes) -> None:
    """msgpackr's `undefined` (the only extension bunqueue sends)."""
    return None


class Conn:
    """One connection: its socket, unread bytes, and its requests in flight by reqId."""

    def __init__(self, spec: Spec, load: Load) -> None:
        self.load = load
        self.sock = socket.create_connection((spec.host, spec.port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.pending: dict[int, str] = {}  # reqId -> what it was: push, pull, ackN (N jobs)
        self.ids = itertools.count(1)

    def request(self, kind: str, msg: dict[str, Any]) -> bytes:
        rid = next(self.ids)
        self.pending[rid] = kind
        return frame({**msg, "reqId": rid})

    def replies(self) -> list[dict[str, Any]]:
        out = []
        while len(self.buf) >= 4:
            (size,) = HEADER.unpack_from(self.buf)
            if len(self.buf) < 4 + size:
                break
            body = bytes(self.buf[4 : 4 + size])
            del self.buf[: 4 + size]
            out.append(msgpack.unpackb(body, raw=False, ext_hook=undefined))
        return out


class Load:
    """What a request is and what its reply leads to."""

    def __init__(self, queue: str, workload: str, batch: int, body: str, most: int) -> None:
        self.queue, self.workload, self.batch, self.body = queue, workload, batch, body
        self.most = most  # jobs to ask for at most (0 once the run's time is up)
        self.asked = 0

    def next(self, c: Conn) -> bytes:
        """The next request (b"": none, the run has asked for all it counts)."""
        if self.asked >= self.most:
            return b""
        self.asked += self.batch
        if self.workload == "put":
            if self.batch == 1:
                return c.request("push", {"cmd": "PUSH", "queue": self.queue, "data": self.body})
            jobs = [{"data": self.body}] * self.batch
            return c.request("push", {"cmd": "PUSHB", "queue": self.queue, "jobs": jobs})
        if self.batch == 1:
            return c.request("pull", {"cmd": "PULL", "queue": self.queue})
        return c.request("pull", {"cmd": "PULLB", "queue": self.queue, "count": self.batch})

    def answer(self, c: Conn, reply: dict[str, Any]) -> tuple[int, bytes]:
        """(jobs it counts, what to send next)."""
        kind = c.pending.pop(reply.get("reqId"), None)  # type: ignore[arg-type]
        if not reply.get("ok") or kind is None:
            raise LoadError(f"unexpected reply {reply!r:.200}")
        if kind == "push":
            return self.batch, self.next(c)
        if kind.startswith("ack"):
            return int(kind[3:]), self.next(c)
        jobs = reply.get("jobs") if "jobs" in reply else [reply.get("job")]
        ids = [j["id"] for j in jobs or [] if j]
        if not ids:
            if self.asked < self.most:
                raise LoadError("the queue ran dry: raise --prefill")
            return 0, b""  # the run's last pulls, past what it counts
        if len(ids) == 1 and self.batch == 1:
            return 0, c.request("ack1", {"cmd": "ACK", "id": ids[0]})
        return 0, c.request(f"ack{len(ids)}", {"cmd": "ACKB", "ids": ids})


def drive(
    spec: Spec, load: Load, seconds: float | None, most: int, depth: int
) -> tuple[int, float]:
    """Keep `depth` requests in flight on each connection until `seconds` pass or `most`
    jobs are counted: (counted, elapsed seconds)."""
    sel = selectors.DefaultSelector()
    conns: list[Conn] = []
    try:
        for _ in range(spec.connections):
            c = Conn(spec, load)
            c.sock.sendall(b"".join(load.next(c) for _ in range(depth)))
            c.sock.setblocking(False)
            sel.register(c.sock, selectors.EVENT_READ, c)
            conns.append(c)
        count, start = 0, time.monotonic()
        end = start + seconds if seconds is not None else float("inf")
        while time.monotonic() < end and count < most:
            count += turn(sel)
        elapsed = time.monotonic() - start
        load.most = 0  # then what is in flight is answered (and pulled jobs acked), uncounted
        while any(c.pending for c in conns):
            turn(sel)
        return count, elapsed
    finally:
        for c in conns:
            c.sock.close()


def turn(sel: selectors.BaseSelector) -> int:
    """Read what came, answer it: the jobs it counts."""
    count = 0
    events = sel.select(1.0)
    if not events:
        raise LoadError("no reply for a second")
    for key, _ in events:
        c = key.data
        chunk = c.sock.recv(1 << 16)
        if not chunk:
            raise LoadError("the server closed the connection")
        c.buf += chunk
        out = []
        for reply in c.replies():
            jobs, follow = c.load.answer(c, reply)
            count += jobs
            if follow:
                out.append(follow)
        if out:
            c.sock.sendall(b"".join(out))
    return count


def call(sock: socket.socket, msg: dict[str, Any]) -> dict[str, Any]:
    sock.sendall(frame(msg))
    buf = b""
    while len(buf) < 4 or len(buf) < 4 + HEADER.unpack_from(buf)[0]:
        chunk = sock.recv(1 << 16)
        if not chunk:
            raise LoadError("the server closed the connection")
        buf += chunk
    return dict(msgpack.unpackb(buf[4:], raw=False, ext_hook=undefined))


def fill(spec: Spec, body: str, jobs: int) -> None:
    with socket.create_connection((spec.host, spec.port), timeout=60) as sock:
        for first in range(0, jobs, FILL_BATCH):
            n = min(FILL_BATCH, jobs - first)
            reply = call(sock, {"cmd": "PUSHB", "queue": spec.prefix, "jobs": [{"data": body}] * n})
            if not reply.get("ok"):
                raise LoadError(f"prefill: {reply!r:.200}")


def run_bunqueue(spec: Spec, batch: int) -> dict[str, object]:
    """One push or pull+ack load through a bunqueue door: jobs/s and what was left."""
    if spec.workload not in ("put", "reserve"):
        raise LoadError("--protocol bunqueue runs -w put or -w reserve")
    body = "x" * spec.size
    most = spec.jobs or 10**12
    if spec.workload == "reserve":
        want = spec.jobs or spec.prefill
        log.info("pushing %d jobs first", want)
        fill(spec, body, want)
    load = Load(spec.prefix, spec.workload, batch, body, most)
    cpu = time.process_time()
    count, elapsed = drive(spec, load, spec.duration, most, spec.pipeline)
    cpu = time.process_time() - cpu
    with socket.create_connection((spec.host, spec.port), timeout=60) as sock:
        removed = int(call(sock, {"cmd": "Drain", "queue": spec.prefix}).get("count", 0))
    return {
        "protocol": "bunqueue",
        "workload": spec.workload,
        "batch": batch,
        "jobs": count,
        "seconds": round(elapsed, 3),
        "jobs_per_s": round(count / elapsed if elapsed else 0.0, 1),
        "client_cpu_s": round(cpu, 3),
        "connections": spec.connections,
        "pipeline": spec.pipeline,
        "size": spec.size,
        "queue": spec.prefix,
        "removed": removed,
    }


def format_bunqueue_result(result: dict[str, object]) -> str:
    what = "push" if result["workload"] == "put" else "pull+ack"
    return (
        f"bunqueue {what} (batch {result['batch']}): {result['jobs_per_s']:,} jobs/s "
        f"({result['jobs']:,} in {result['seconds']} s, client CPU {result['client_cpu_s']} s; "
        f"{counted(int(str(result['connections'])), 'connection')}, "
        f"{result['pipeline']} in flight each, {result['size']}-byte data; "
        f"queue {result['queue']}; {result['removed']} left drained at the end)"
    )
