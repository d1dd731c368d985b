"""The load loop of one load process: non-blocking sockets under epoll, pipelined requests.

Cost per operation is kept to a few bytes operations: requests are pre-built, replies are
split with `bytes.find`, latency is taken once per recv()/send() (requests sent in one
send() and answered in one recv() share a timestamp pair), and counters are plain ints.
Reads go into one preallocated buffer (`recv_into`): `recv(256 KiB)` had glibc mmap,
mremap and munmap a fresh block on every read, three system calls per reply batch.
Shared counters (a RawArray, one slot triple per process, single writer each) feed the
progress bar and the mixed loads' backlog bound without locks.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import time
from collections import deque
from typing import Any

from shardq.bench.hist import Histogram
from shardq.bench.workloads import (
    CONSUMER,
    DRAINER,
    PINGPONG,
    PRODUCER,
    ConnPlan,
    Spec,
    body_of,
    put_request,
    reserve_request,
    setup_commands,
)

PUT, RESERVE, DELETE = 0, 1, 2
OPS = ("put", "reserve", "delete")
#: Shared counter slots per process: puts acked, deletes acked, all ops acked.
SLOTS = 3
RECV = 1 << 18
MAX_SAMPLES = 5  # wrong replies kept verbatim for the report
GRACE_S = 10.0  #: how long past its deadline a run with nothing measured yet waits (loadcore.c)


class Conn:
    """One client connection and the requests it has in flight, oldest first."""

    __slots__ = ("plan", "sock", "fd", "rbuf", "out", "pending", "stopped", "cycle_t0", "want_w")

    def __init__(self, plan: ConnPlan, sock: socket.socket) -> None:
        self.plan = plan
        self.sock = sock
        self.fd = sock.fileno()
        self.rbuf = b""
        self.out: list[bytes] = []  # requests not yet handed to send()
        self.pending: deque[list[Any]] = deque()  # [op, t_send] per request in flight
        self.stopped = False
        self.cycle_t0 = 0
        self.want_w = False


def unreachable(host: str, port: int, error: OSError) -> str:
    """``cannot reach HOST:PORT: reason`` (the address the user gave, then the OS's words)."""
    return f"cannot reach {host}:{port}: {(error.strerror or str(error)).lower()}"


def check_reachable(host: str, port: int, timeout: float = 5.0) -> None:
    """Raise ConnectionError naming the address unless a TCP connection to it succeeds."""
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as e:
        raise ConnectionError(unreachable(host, port, e)) from None


def connect(spec: Spec, plan: ConnPlan, timeout: float = 10.0) -> Conn:
    """Connect and send the connection's use/watch/ignore, blocking, before the clock."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            sock = socket.create_connection((spec.host, spec.port), timeout=timeout)
            break
        except OSError as e:
            if time.monotonic() > deadline:
                raise ConnectionError(unreachable(spec.host, spec.port, e)) from None
            time.sleep(0.05)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = b""
    for req, expect in setup_commands(plan):
        sock.sendall(req)
        while b"\r\n" not in buf:
            chunk = sock.recv(4096)
            if not chunk:
                raise ConnectionError("server closed the connection during setup")
            buf += chunk
        line, buf = buf.split(b"\r\n", 1)
        if not line.startswith(expect):
            raise ConnectionError(f"setup {req!r} answered {line!r}")
    sock.setblocking(False)
    return Conn(plan, sock)


class Result:
    """What one load process measured; `to_dict` crosses the process boundary."""

    def __init__(self) -> None:
        self.counts = [0, 0, 0]
        self.errors = [0, 0, 0]
        self.hists = [Histogram(), Histogram(), Histogram()]
        self.cycle = Histogram()  # pingpong: put -> deleted
        self.timed_out = 0
        self.samples: list[str] = []
        self.conn_errors = 0
        self.elapsed = 0.0
        self.cpu = 0.0

    def error(self, op: int, line: bytes) -> None:
        self.errors[op] += 1
        if len(self.samples) < MAX_SAMPLES:
            self.samples.append(f"{OPS[op]}: {line[:80]!r}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "counts": dict(zip(OPS, self.counts, strict=True)),
            "errors": dict(zip(OPS, self.errors, strict=True)),
            "hists": {op: h.to_dict() for op, h in zip(OPS, self.hists, strict=True)},
            "cycle": self.cycle.to_dict(),
            "timed_out": self.timed_out,
            "samples": self.samples,
            "conn_errors": self.conn_errors,
            "elapsed": self.elapsed,
            "cpu": self.cpu,
        }


class LoadLoop:
    """Runs the connections of one process until the deadline or its share of --jobs."""

    def __init__(self, spec: Spec, conns: list[Conn], slot: int, shared: Any, quota: int | None):
        self.spec = spec
        self.conns = conns
        self.slot = slot * SLOTS
        self.shared = shared
        self.quota = quota  # puts (put/mixed), reserves (reserve) or cycles (pingpong)
        self.issued = 0
        self.res = Result()
        self.put_req = put_request(spec)
        self.body = body_of(spec.size) + b"\r\n"  # what every RESERVED must carry
        self.sel: selectors.BaseSelector = selectors.DefaultSelector()  # epoll on Linux
        self.inbuf = bytearray(RECV)  # every recv_into of this process lands here
        self.total_target = (spec.jobs or 0) if spec.jobs else None

    # -- requests -------------------------------------------------------------------------

    def backlog(self) -> int:
        s = self.shared
        n = len(s)
        return sum(s[i] for i in range(0, n, SLOTS)) - sum(s[i] for i in range(1, n, SLOTS))

    def refill(self, c: Conn, paused: bool) -> None:
        """Top the connection's pipeline up to --pipeline requests in flight."""
        if c.stopped:
            return
        role = c.plan.role
        room = self.spec.pipeline - len(c.pending) - len(c.out)
        if room <= 0:
            return
        if role == PRODUCER:
            if paused:
                return
            if self.quota is not None:
                room = min(room, self.quota - self.issued)
                if room <= 0:
                    return
            self.issued += room
            c.out.extend([self.put_req] * room)
            c.pending.extend([[PUT, 0] for _ in range(room)])
        elif role in (CONSUMER, DRAINER):
            if role == DRAINER and self.quota is not None:
                room = min(room, self.quota - self.issued)
                if room <= 0:
                    return
                self.issued += room
            req = reserve_request(role)
            c.out.extend([req] * room)
            c.pending.extend([[RESERVE, 0] for _ in range(room)])
        elif role == PINGPONG and not c.pending:
            if self.quota is not None:
                if self.issued >= self.quota:
                    return
                self.issued += 1
            c.out.append(self.put_req)
            c.pending.append([PUT, 0])
            c.cycle_t0 = 0

    def send(self, c: Conn, now: int) -> None:
        if not c.out:
            return
        data = b"".join(c.out)
        # Stamp every request that has not been sent yet (t_send == 0).
        for item in reversed(c.pending):
            if item[1]:
                break
            item[1] = now
        if c.plan.role == PINGPONG and not c.cycle_t0:
            c.cycle_t0 = now
        try:
            n = c.sock.send(data)
        except BlockingIOError:
            n = 0
        except OSError:
            self.drop(c)
            return
        c.out = [data[n:]] if n < len(data) else []
        want = bool(c.out)
        if want != c.want_w:
            c.want_w = want
            ev = selectors.EVENT_READ | (selectors.EVENT_WRITE if want else 0)
            self.sel.modify(c.sock, ev, c)

    def drop(self, c: Conn) -> None:
        if not c.stopped:
            self.res.conn_errors += 1
        c.stopped = True
        c.pending.clear()
        c.out = []
        with contextlib.suppress(KeyError, ValueError):
            self.sel.unregister(c.sock)
        c.sock.close()

    # -- replies --------------------------------------------------------------------------

    def on_data(self, c: Conn, data: bytes, now: int) -> None:
        """Check every complete reply against the request it answers."""
        buf = c.rbuf + data if c.rbuf else data
        pos = 0
        pending = c.pending
        res = self.res
        counts, hists = res.counts, res.hists
        find = buf.find
        size = self.spec.size
        body = self.body
        while pending:
            i = find(b"\r\n", pos)
            if i < 0:
                break
            item = pending[0]
            op = item[0]
            line = buf[pos:i]
            if op == PUT:
                pending.popleft()
                pos = i + 2
                if line[:9] == b"INSERTED " and line[9:].isdigit():
                    counts[PUT] += 1
                    hists[PUT].record(now - item[1])
                    if c.plan.role == PINGPONG:
                        c.out.append(reserve_request(CONSUMER))
                        pending.append([RESERVE, 0])
                else:
                    res.error(PUT, line)
            elif op == RESERVE:
                if line[:9] == b"RESERVED ":
                    parts = line.split()
                    if (
                        len(parts) != 3
                        or len(parts[1]) > 20
                        or not (parts[1].isdigit() and parts[2].isdigit())
                    ):  # an id has at most 20 digits (a u64)
                        pending.popleft()
                        pos = i + 2
                        res.error(RESERVE, line)
                        continue
                    n = int(parts[2])
                    end = i + 2 + n + 2
                    if end > len(buf):
                        break  # body not complete yet
                    pending.popleft()
                    pos = end
                    if n != size or buf[i + 2 : end] != body:
                        res.error(RESERVE, line)
                        continue
                    counts[RESERVE] += 1
                    hists[RESERVE].record(now - item[1])
                    c.out.append(b"delete %s\r\n" % parts[1])
                    pending.append([DELETE, 0])
                else:
                    pending.popleft()
                    pos = i + 2
                    if line == b"TIMED_OUT" and c.plan.role != PINGPONG:
                        res.timed_out += 1
                        if c.plan.role == DRAINER:
                            c.stopped = True  # drained: the pre-filled jobs are all gone
                    else:
                        res.error(RESERVE, line)
            else:
                pending.popleft()
                pos = i + 2
                if line == b"DELETED":
                    counts[DELETE] += 1
                    hists[DELETE].record(now - item[1])
                    if c.plan.role == PINGPONG:
                        res.cycle.record(now - c.cycle_t0)
                else:
                    res.error(DELETE, line)
        c.rbuf = buf[pos:] if pos < len(buf) else b""

    # -- loop -----------------------------------------------------------------------------

    def done(self) -> bool:
        """Every connection idle with nothing left to issue; a bounded mixed load once every
        job is put and deleted (its consumers' waiting reserves can take nothing more)."""
        spec = self.spec
        mixed = spec.workload in ("mixed", "multitube")
        if mixed and self.quota is not None and self.issued >= self.quota:
            s = self.shared
            if sum(s[i] for i in range(1, len(s), SLOTS)) >= (spec.jobs or 0):
                return True
        if any(c.pending for c in self.conns if not c.stopped):
            return False
        if spec.workload == "reserve":
            return all(c.stopped for c in self.conns) or self.issued >= (self.quota or 0)
        if self.quota is None:
            return all(c.stopped for c in self.conns)
        return not mixed and self.issued >= self.quota

    def measured(self) -> bool:
        """Whether the run has a figure: a cycle for pingpong (its figure is cycles/s), else
        any operation answered."""
        if self.spec.workload == "pingpong":
            return self.res.cycle.total > 0
        return any(self.res.counts)

    def run(self, deadline: float) -> Result:
        """Loop until done, or until `deadline` (time.monotonic) once something is measured:
        with nothing measured yet, up to `GRACE_S` more (a short run on a busy machine);
        returns this process's result."""
        sel, spec, res, shared, slot = self.sel, self.spec, self.res, self.shared, self.slot
        inbuf = self.inbuf
        inview = memoryview(inbuf)
        mixed = spec.workload in ("mixed", "multitube")
        for c in self.conns:
            sel.register(c.sock, selectors.EVENT_READ, c)
        t_start = time.monotonic()
        cpu0 = sum(os.times()[:2])
        now = time.perf_counter_ns()
        for c in self.conns:
            self.refill(c, False)
            self.send(c, now)
        counts = res.counts
        paused = False
        check_done = 0
        while True:
            mono = time.monotonic()
            end = deadline if self.measured() else deadline + GRACE_S
            if mono >= end:
                break
            events = sel.select(0.002 if paused else min(0.05, end - mono))
            now = time.perf_counter_ns()
            for key, mask in events:
                c = key.data
                if c.stopped and not c.pending:
                    continue
                if mask & selectors.EVENT_READ:
                    try:
                        n = c.sock.recv_into(inbuf)
                    except BlockingIOError:
                        n = -1
                    except OSError:
                        n = 0
                    if n == 0:
                        self.drop(c)
                        continue
                    if n > 0:
                        self.on_data(c, bytes(inview[:n]), now)
                if not c.stopped:
                    if not c.want_w:
                        self.refill(c, paused)
                    self.send(c, now)
            shared[slot] = counts[PUT]
            shared[slot + 1] = counts[DELETE]
            shared[slot + 2] = counts[PUT] + counts[RESERVE] + counts[DELETE]
            if mixed:
                was = paused
                paused = self.backlog() > spec.backlog
                if was and not paused:
                    for c in self.conns:
                        if c.plan.role == PRODUCER and not c.stopped:
                            self.refill(c, False)
                            self.send(c, now)
            check_done += 1
            if (check_done & 15 == 0 or not events) and self.done():
                break
        res.elapsed = time.monotonic() - t_start
        res.cpu = sum(os.times()[:2]) - cpu0
        for c in self.conns:
            with contextlib.suppress(KeyError, ValueError):
                sel.unregister(c.sock)
            c.sock.close()
        return res
