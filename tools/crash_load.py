"""The load side of tools/crash_test.py: a blocking beanstalk client, producer and
consumer threads that note in a `Ledger` what they sent and what the server acknowledged,
and `drain`, which takes every job of the test tubes back out after a crash.

The durability tests (tests/integration) use `Client` as their blocking client too.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from dataclasses import dataclass, field

TUBES = ("crash-a", "crash-b", "crash-c", "crash-d", "crash-e")
OP_TIMEOUT = 15.0  #: a single reply may take this long (a shard restart is a delay)
DRAIN_TIMEOUT = 30.0


# --------------------------------------------------------------------------- client


class Client:
    """A blocking beanstalk connection with a timeout on every reply."""

    def __init__(self, port: int, timeout: float = OP_TIMEOUT) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.f = self.sock.makefile("rb")
        self.last_body = b""

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.f.close()
            self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def line(self) -> bytes:
        got = self.f.readline()
        if not got.endswith(b"\r\n"):
            raise ConnectionError(f"connection closed (got {got!r})")
        return got[:-2]

    def cmd(self, data: bytes) -> bytes:
        self.send(data + b"\r\n")
        head = self.line()
        self.last_body = b""  # the body of a reply that has one
        if head.startswith(b"OK "):
            self.last_body = self.body(int(head.split()[1]))
        elif head.startswith((b"RESERVED ", b"FOUND ")):
            self.last_body = self.body(int(head.split()[2]))
        return head

    def body(self, size: int) -> bytes:
        data = self.f.read(size + 2)
        if len(data) != size + 2:
            raise ConnectionError("connection closed in a body")
        return data[:-2]

    def stats(self, what: bytes = b"stats") -> dict[str, str]:
        self.send(what + b"\r\n")
        head = self.line()
        if not head.startswith(b"OK "):
            raise RuntimeError(f"{what!r}: {head!r}")
        text = self.body(int(head.split()[1])).decode()
        return {k.strip(): v.strip() for k, v in (ln.split(":", 1) for ln in text.splitlines()[1:])}


# --------------------------------------------------------------------------- the ledger


@dataclass
class Ledger:
    """What the clients sent and what the server acknowledged, by job body."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    put_sent: set[bytes] = field(default_factory=set)
    put_acked: dict[bytes, int] = field(default_factory=dict)
    del_sent: set[bytes] = field(default_factory=set)
    del_acked: set[bytes] = field(default_factory=set)
    delivered: dict[bytes, int] = field(default_factory=dict)  # reserves seen by consumers
    errors: list[str] = field(default_factory=list)
    max_wait: float = 0.0  # the longest a client waited for one reply

    def note_wait(self, seconds: float) -> None:
        with self.lock:
            self.max_wait = max(self.max_wait, seconds)

    def error(self, text: str) -> None:
        with self.lock:
            if len(self.errors) < 50:
                self.errors.append(text)


class Load:
    """Producer and consumer threads against one server."""

    def __init__(self, port: int, ledger: Ledger, tag: str, producers: int, consumers: int) -> None:
        self.port = port
        self.ledger = ledger
        self.tag = tag
        self.stop = threading.Event()
        self.killed = threading.Event()  # set just before a kill: errors after it are expected
        self.threads = [
            threading.Thread(target=self._producer, args=(i,), daemon=True)
            for i in range(producers)
        ] + [threading.Thread(target=self._consumer, daemon=True) for _ in range(consumers)]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def join(self, timeout: float = OP_TIMEOUT + 5) -> None:
        self.stop.set()
        deadline = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.0, deadline - time.monotonic()))
        alive = [t for t in self.threads if t.is_alive()]
        if alive:
            self.ledger.error(f"{len(alive)} client thread(s) still blocked after {timeout} s")

    def _failed(self, what: str, e: BaseException) -> None:
        if not self.killed.is_set():
            self.ledger.error(f"{what}: {e!r}")

    def _connect(self) -> Client | None:
        try:
            return Client(self.port)
        except OSError as e:
            self._failed("connect", e)
            return None

    def _timed(self, c: Client, data: bytes) -> bytes:
        t0 = time.monotonic()
        c.send(data)
        head = c.line()
        self.ledger.note_wait(time.monotonic() - t0)
        return head

    def _producer(self, k: int) -> None:
        led = self.ledger
        c = self._connect()
        if c is None:
            return
        try:
            tube = TUBES[k % len(TUBES)].encode()
            if c.cmd(b"use " + tube) != b"USING " + tube:
                raise RuntimeError("use failed")
            n = 0
            while not self.stop.is_set():
                n += 1
                body = f"{self.tag}-p{k}-{n}-".encode() + os.urandom(8).hex().encode()
                with led.lock:
                    led.put_sent.add(body)
                head = self._timed(c, b"put %d 0 120 %d\r\n%s\r\n" % (n % 3, len(body), body))
                if head.startswith(b"INSERTED "):
                    with led.lock:
                        led.put_acked[body] = int(head.split()[1])
                else:
                    led.error(f"put answered {head!r}")
                    if head != b"OUT_OF_MEMORY":
                        return
        except (OSError, ConnectionError, RuntimeError) as e:
            self._failed("producer", e)
        finally:
            c.close()

    def _consumer(self) -> None:
        led = self.ledger
        c = self._connect()
        if c is None:
            return
        try:
            for tube in TUBES:
                c.cmd(b"watch " + tube.encode())
            c.cmd(b"ignore default")
            while not self.stop.is_set():
                head = self._timed(c, b"reserve-with-timeout 1\r\n")
                if head in (b"TIMED_OUT", b"DEADLINE_SOON"):
                    continue
                if not head.startswith(b"RESERVED "):
                    led.error(f"reserve answered {head!r}")
                    return
                _, job_id, size = head.split()
                body = c.body(int(size))
                with led.lock:
                    led.delivered[body] = led.delivered.get(body, 0) + 1
                    led.del_sent.add(body)
                head = self._timed(c, b"delete %s\r\n" % job_id)
                if head == b"DELETED":
                    with led.lock:
                        led.del_acked.add(body)
                else:
                    led.error(f"delete {int(job_id)} answered {head!r}")
        except (OSError, ConnectionError) as e:
            self._failed("consumer", e)
        finally:
            c.close()


# --------------------------------------------------------------------------- the drain


def drain(
    port: int, deadline_s: float = DRAIN_TIMEOUT
) -> tuple[dict[bytes, list[int]], dict[str, int]]:
    """Reserve and delete every job of the test tubes: body -> ids it was found under."""
    found: dict[bytes, list[int]] = {}
    c = Client(port)
    try:
        for tube in TUBES:
            c.cmd(b"watch " + tube.encode())
        c.cmd(b"ignore default")
        deadline = time.monotonic() + deadline_s
        left: dict[str, int] = {}
        while time.monotonic() < deadline:
            head = c.cmd(b"reserve-with-timeout 0")
            if head.startswith(b"RESERVED "):
                job_id = head.split()[1]
                found.setdefault(c.last_body, []).append(int(job_id))
                if c.cmd(b"delete " + job_id) != b"DELETED":
                    raise RuntimeError(f"drain: delete {job_id!r} failed")
                continue
            if head not in (b"TIMED_OUT", b"DEADLINE_SOON"):
                raise RuntimeError(f"drain: reserve answered {head!r}")
            left = {}
            for tube in TUBES:
                st = c.stats(b"stats-tube " + tube.encode())
                if st.get("name") is None:
                    continue
                for key in ("ready", "reserved", "delayed", "buried"):
                    left[key] = left.get(key, 0) + int(st.get(f"current-jobs-{key}", "0"))
            if not any(left.values()):
                break
            time.sleep(0.05)  # reserved by a connection that is going away, or delayed
        return found, left
    finally:
        c.close()
