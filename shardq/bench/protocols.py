"""`shardq bench --protocol kestrel|workq`: put and get loads through shardq's other doors.

One process drives every connection (selectors), keeping `pipeline` requests in flight on
each; every reply is checked. The loads:

* ``put``: Kestrel ``set``; Workq ``add`` (a fresh UUID each);
* ``reserve``: Kestrel ``get`` of a queue filled first; Workq ``lease`` then ``complete`` (a
  cycle counts once, when its ``complete`` is answered).

``--protocol beanstalk-door`` drives beanstalk (``put``; ``reserve-with-timeout 0`` then
``delete``) with this same loop, so the three doors compare like for like.

Bounded by time (`duration`) and count (`jobs`); a get load stops with an error if its
queue runs dry (raise --prefill). The queue is the run's own (``bench-XXXXXX``) and what
the run leaves is removed at the end (Kestrel: ``get`` until the queue is empty; Workq:
``delete`` of every id the run added, done jobs' results too; beanstalk: the bench's drain).
"""

from __future__ import annotations

import dataclasses
import logging
import re
import selectors
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from shardq.bench.workloads import Spec, counted

#: "beanstalk-door": beanstalk driven by this module's loop, for ratios like for like
PROTOCOLS = ("beanstalk", "kestrel", "workq", "beanstalk-door")
LOADS = ("put", "reserve")
FILL_BATCH = 500
WORKQ_TTR_MS = 60_000
WORKQ_TTL_MS = 600_000  # a job the run leaves goes by itself after ten minutes anyway

log = logging.getLogger(__name__)

_STORED = re.compile(rb"STORED\r\n")
_VALUE = re.compile(rb"VALUE \S+ \d+ (\d+)\r\n")
_OK = re.compile(rb"\+OK\r\n")
_INSERTED = re.compile(rb"INSERTED \d+\r\n")
_RESERVED = re.compile(rb"RESERVED (\d+) (\d+)\r\n")
_DELETED = re.compile(rb"DELETED\r\n")
_LEASED = re.compile(rb"\+OK 1\r\n([0-9a-f-]{36}) \S+ \d+ (\d+)\r\n")


class LoadError(RuntimeError):
    pass


#: One reply read from the front of a buffer: (bytes it took, counted, what to send next),
#: or None when the reply is not all here yet.
Read = tuple[int, bool, bytes] | None


@dataclass
class Door:
    """A protocol's load: what a request is and how its replies read."""

    request: Callable[[], bytes]
    read: Callable[[bytearray], Read]
    setup: bytes = b""  # sent first on each connection (one reply a line, not counted)
    added: list[str] = field(default_factory=list)  # Workq: the ids the run added


def unexpected(buf: bytearray) -> LoadError:
    return LoadError(f"unexpected reply {bytes(buf[:80])!r}")


def line_reader(done: re.Pattern[bytes]) -> Callable[[bytearray], Read]:
    """The reader of a load whose every reply is one line matching `done` (counted)."""

    def read_line(buf: bytearray) -> Read:
        if (m := done.match(buf)) is not None:
            return m.end(), True, b""
        if b"\r\n" in buf:
            raise unexpected(buf)
        return None

    return read_line


read_stored = line_reader(_STORED)
read_added = line_reader(_OK)
read_inserted = line_reader(_INSERTED)


def read_value(buf: bytearray) -> Read:
    m = _VALUE.match(buf)
    if m is not None:
        end = m.end() + int(m[1]) + 2 + 5  # the item, CRLF, END CRLF
        if len(buf) < end:
            return None
        return end, True, b""
    if buf.startswith(b"END\r\n"):
        raise LoadError("the queue ran dry: raise --prefill")
    if b"\r\n" in buf:
        raise unexpected(buf)
    return None


def cycle_reader(
    done: re.Pattern[bytes], job: re.Pattern[bytes], follow: bytes, dry: bytes, head_lines: int
) -> Callable[[bytearray], Read]:
    """The reader of a take-then-finish load: a taken job (`job`: its id and size; answered
    with `follow` % id) or the finishing reply (`done`: counted). `dry`: the queue is empty;
    `head_lines`: CRLFs in a job's reply before its body."""

    def read_cycle(buf: bytearray) -> Read:
        if (m := done.match(buf)) is not None:
            return m.end(), True, b""
        m = job.match(buf)
        if m is not None:
            end = m.end() + int(m[2]) + 2
            if len(buf) < end:
                return None
            return end, False, follow % m[1]
        if buf.startswith(dry):
            raise LoadError("the queue ran dry: raise --prefill")
        if buf.count(b"\r\n") >= head_lines or buf.startswith(b"-"):
            raise unexpected(buf)
        return None

    return read_cycle


#: Workq: a lease's job, answered with its complete; a complete's +OK counts.
read_lease_cycle = cycle_reader(_OK, _LEASED, b"complete %s 0\r\n\r\n", b"-TIMEOUT", 2)
#: beanstalk: a reserved job, answered with its delete; DELETED counts.
read_reserve_cycle = cycle_reader(_DELETED, _RESERVED, b"delete %s\r\n", b"TIMED_OUT", 1)


def door(spec: Spec, protocol: str, load: str, body: bytes) -> Door:
    queue = spec.prefix
    if protocol == "beanstalk-door":
        tube = queue.encode()
        if load == "put":
            put = b"put 1024 0 60 %d\r\n%s\r\n" % (len(body), body)
            return Door(constant(put), read_inserted, b"use %s\r\n" % tube)
        setup = b"watch %s\r\nignore default\r\n" % tube
        return Door(constant(b"reserve-with-timeout 0\r\n"), read_reserve_cycle, setup)
    if protocol == "kestrel":
        item = b"set %s 0 0 %d\r\n%s\r\n" % (queue.encode(), len(body), body)
        if load == "put":
            return Door(constant(item), read_stored)
        return Door(constant(b"get %s\r\n" % queue.encode()), read_value)
    d = Door(constant(b""), read_added)

    def add() -> bytes:
        ident = str(uuid.uuid4())
        d.added.append(ident)
        head = f"add {ident} {queue} {WORKQ_TTR_MS} {WORKQ_TTL_MS} {len(body)}\r\n"
        return head.encode() + body + b"\r\n"

    if load == "put":
        d.request = add
        return d
    d.request, d.read = constant(f"lease {queue} 1000\r\n".encode()), read_lease_cycle
    return d


def constant(data: bytes) -> Callable[[], bytes]:
    """A request that is always the same bytes."""

    def same() -> bytes:
        return data

    return same


def drive(spec: Spec, d: Door, seconds: float | None, most: int, depth: int) -> tuple[int, float]:
    """Keep `depth` requests in flight on each of the spec's connections until `seconds`
    pass or `most` are counted: (counted, elapsed seconds)."""
    sel = selectors.DefaultSelector()
    bufs: dict[socket.socket, bytearray] = {}
    try:
        for _ in range(spec.connections):
            sock = socket.create_connection((spec.host, spec.port), timeout=10)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if d.setup:
                sock.sendall(d.setup)
                answers = b""
                while answers.count(b"\r\n") < d.setup.count(b"\r\n"):
                    answers += sock.recv(4096)
            sock.sendall(b"".join(d.request() for _ in range(min(depth, most))))
            sock.setblocking(False)
            sel.register(sock, selectors.EVENT_READ)
            bufs[sock] = bytearray()
        count, sent, start = 0, depth * spec.connections, time.monotonic()
        end = start + seconds if seconds is not None else float("inf")
        while time.monotonic() < end and count < most:
            events = sel.select(1.0)
            if not events:
                raise LoadError("no reply for a second")
            for key, _ in events:
                conn = key.fileobj
                if not isinstance(conn, socket.socket):
                    continue
                chunk = conn.recv(1 << 16)
                if not chunk:
                    raise LoadError("the server closed the connection")
                buf = bufs[conn]
                buf += chunk
                out: list[bytes] = []
                while (got := d.read(buf)) is not None:
                    took, counted, follow = got
                    del buf[:took]
                    if follow:
                        out.append(follow)
                    if counted:
                        count += 1
                        if sent < most:
                            out.append(d.request())
                            sent += 1
                if out:
                    conn.sendall(b"".join(out))
        return count, time.monotonic() - start
    finally:
        for sock in bufs:
            sock.close()


def run_protocol(spec: Spec, protocol: str) -> dict[str, object]:
    """One put or reserve load through `protocol`'s door: ops/s and what was left."""
    if spec.workload not in LOADS:
        raise LoadError(f"--protocol {protocol} runs -w put or -w reserve")
    body = b"x" * spec.size
    most = spec.jobs or 10**12
    if spec.workload == "reserve":
        fill = door(spec, protocol, "put", body)
        want = spec.jobs or spec.prefill
        log.info("putting %d jobs through %s first", want, protocol)
        drive(dataclasses.replace(spec, connections=1), fill, None, want, FILL_BATCH)
        added = fill.added
    d = door(spec, protocol, spec.workload, body)
    cpu = time.process_time()
    count, elapsed = drive(spec, d, spec.duration, most, spec.pipeline)
    cpu = time.process_time() - cpu
    if spec.workload == "put":
        added = d.added
    removed = clean_up(spec, protocol, added)
    return {
        "protocol": protocol,
        "workload": spec.workload,
        "ops": count,
        "seconds": round(elapsed, 3),
        "ops_per_s": round(count / elapsed if elapsed else 0.0, 1),
        "client_cpu_s": round(cpu, 3),  # near `seconds`: the load tool was the limit
        "connections": spec.connections,
        "pipeline": spec.pipeline,
        "size": spec.size,
        "queue": spec.prefix,
        "removed": removed,
    }


def clean_up(spec: Spec, protocol: str, added: list[str]) -> int:
    """Remove what the run left in its queue: how many items, ids or jobs went."""
    with socket.create_connection((spec.host, spec.port), timeout=30) as sock:
        if protocol == "beanstalk-door":
            from shardq.bench.cleanup import drain

            return drain(spec.host, spec.port, [spec.prefix])[0]
        if protocol == "kestrel":
            return drain_kestrel(sock, spec.prefix)
        removed = 0
        for first in range(0, len(added), FILL_BATCH):
            ids = added[first : first + FILL_BATCH]
            sock.sendall(b"".join(b"delete %s\r\n" % i.encode() for i in ids))
            answer = b""
            while answer.count(b"\r\n") < len(ids):
                answer += sock.recv(1 << 16)
            removed += answer.count(b"+OK\r\n")
        return removed


def drain_kestrel(sock: socket.socket, queue: str) -> int:
    """Get every item of `queue`, FILL_BATCH gets in flight (Kestrel's flush takes two
    round trips an item): how many there were."""
    removed = 0
    get = b"get %s\r\n" % queue.encode()
    while True:
        sock.sendall(get * FILL_BATCH)
        buf, got, empty = bytearray(), 0, 0
        while got + empty < FILL_BATCH:
            buf += sock.recv(1 << 16)
            while True:
                if buf.startswith(b"END\r\n"):
                    del buf[:5]
                    empty += 1
                    continue
                read = read_value(buf) if buf.startswith(b"VALUE") else None
                if read is None:
                    break
                del buf[: read[0]]
                got += 1
        removed += got
        if empty:
            return removed


def format_protocol_result(result: dict[str, object]) -> str:
    return (
        f"{result['protocol']} {result['workload']}: {result['ops_per_s']:,} ops/s "
        f"({result['ops']:,} in {result['seconds']} s, client CPU {result['client_cpu_s']} s; "
        f"{counted(int(str(result['connections'])), 'connection')}, "
        f"{result['pipeline']} in flight each, {result['size']}-byte bodies; "
        f"queue {result['queue']}; {result['removed']} left removed at the end)"
    )
