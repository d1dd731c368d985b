"""How late a server's 1-second timers fire, as a client sees them.

Three kinds, each repeated --tries times on its own connections and tube:

  reserve-timeout  `reserve-with-timeout 1`: from sending it to reading TIMED_OUT
  delay            `put` with delay 1, then a blocking `reserve` on the same connection:
                   from sending the put to reading RESERVED (greenstalk's test_delays)
  ttr              a job with TTR 1 reserved by one connection (`reserve-with-timeout 0`)
                   while a second connection waits in `reserve`: from sending the first
                   reserve to the second one reading RESERVED

Lateness = observed - 1 s, so it includes the round trips and whatever queueing the
commands meet in the server. A try with no answer within --give-up seconds counts as lost:
its connections are closed (which releases its job) and the next try uses new ones on a
new tube. With --kind all the three kinds run at the same time, one thread each (the
server sees three quiet clients). Works against any beanstalk server:

    python tools/timer_lateness.py -p 11300 --kind all --tries 50
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import socket
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

log = logging.getLogger("timer_lateness")

KINDS = ("reserve-timeout", "delay", "ttr")
TIMER_S = 1.0  #: every kind measures a 1-second timer


@dataclass
class Samples:
    """Lateness (s) of the tries that were answered, and how many were not (lost)."""

    late: list[float] = field(default_factory=list)
    lost: int = 0


class Conn:
    """One beanstalk connection that sends a command and reads its one-line reply."""

    def __init__(self, host: str, port: int, tube: str, give_up: float) -> None:
        self.sock = socket.create_connection((host, port), timeout=give_up)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.command(f"use {tube}")
        self.command(f"watch {tube}")
        self.command("ignore default")

    def send(self, line: str, body: bytes | None = None) -> None:
        data = line.encode() + b"\r\n"
        if body is not None:
            data += body + b"\r\n"
        self.sock.sendall(data)

    def reply(self) -> str:
        """The next reply line; a job's body (RESERVED) is read and dropped."""
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("the server closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        text = line.decode()
        if text.startswith("RESERVED "):
            size = int(text.split()[2]) + 2
            while len(self.buf) < size:
                chunk = self.sock.recv(4096)
                if not chunk:
                    raise ConnectionError("the server closed the connection")
                self.buf += chunk
            self.buf = self.buf[size:]
        return text

    def command(self, line: str, body: bytes | None = None) -> str:
        self.send(line, body)
        return self.reply()

    def expect(self, line: str, prefix: str, body: bytes | None = None) -> str:
        reply = self.command(line, body)
        if not reply.startswith(prefix):
            raise RuntimeError(f"{line!r}: expected {prefix}, got {reply!r}")
        return reply

    def close(self) -> None:
        self.sock.close()


def job_id(reply: str) -> int:
    return int(reply.split()[1])


def measure_reserve_timeout(conn: Conn, _other: Conn) -> float:
    start = time.monotonic()
    conn.expect("reserve-with-timeout 1", "TIMED_OUT")
    return time.monotonic() - start - TIMER_S


def measure_delay(conn: Conn, _other: Conn) -> float:
    start = time.monotonic()
    conn.expect("put 0 1 60 1", "INSERTED", b"d")
    reply = conn.expect("reserve", "RESERVED")
    late = time.monotonic() - start - TIMER_S
    conn.expect(f"delete {job_id(reply)}", "DELETED")
    return late


def measure_ttr(holder: Conn, waiter: Conn) -> float:
    holder.expect("put 0 0 1 1", "INSERTED", b"t")
    start = time.monotonic()
    first = holder.expect("reserve-with-timeout 0", "RESERVED")
    reply = waiter.expect("reserve", "RESERVED")
    late = time.monotonic() - start - TIMER_S
    if job_id(reply) != job_id(first):
        raise RuntimeError(f"ttr: reserved job {job_id(first)}, got {reply!r} back")
    waiter.expect(f"delete {job_id(reply)}", "DELETED")
    return late


def measure(kind: str, host: str, port: int, tube: str, tries: int, give_up: float) -> Samples:
    """`tries` tries of one kind on two connections of its own (the ttr kind uses both)."""
    samples = Samples()
    conns = (Conn(host, port, tube, give_up), Conn(host, port, tube, give_up))
    try:
        for i in range(tries):
            try:
                samples.late.append(MEASURES[kind](*conns))
            except TimeoutError:
                samples.lost += 1
                log.warning("%s: try %d got no answer within %.0f s", kind, i + 1, give_up)
                for c in conns:
                    c.close()
                fresh = f"{tube}-{i + 1}"  # the released job stays behind in the old tube
                conns = (Conn(host, port, fresh, give_up), Conn(host, port, fresh, give_up))
    finally:
        for c in conns:
            c.close()
    return samples


MEASURES: dict[str, Callable[[Conn, Conn], float]] = {
    "reserve-timeout": measure_reserve_timeout,
    "delay": measure_delay,
    "ttr": measure_ttr,
}


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(p / 100 * len(ordered))))
    return ordered[rank - 1]


def run(
    host: str, port: int, kinds: list[str], tries: int, prefix: str, give_up: float
) -> dict[str, Samples]:
    """Samples per kind; the kinds run concurrently, one thread each."""
    results: dict[str, Samples] = {}
    errors: dict[str, BaseException] = {}

    def one(kind: str) -> None:
        tube = f"{prefix}-{kind}-{os.getpid()}"
        try:
            results[kind] = measure(kind, host, port, tube, tries, give_up)
        except (OSError, RuntimeError) as e:
            errors[kind] = e

    threads = [threading.Thread(target=one, args=(k,), name=k) for k in kinds]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for kind, error in errors.items():
        log.error("%s: %s", kind, error)
    return results


def table(results: dict[str, Samples], label: str) -> str:
    lines = [
        f"| {'label':<20} | {'kind':<16} | {'tries':>5} | {'p50 ms':>7} | {'p99 ms':>7} "
        f"| {'max ms':>7} | {'min ms':>7} | {'lost':>4} |",
        f"|{'-' * 22}|{'-' * 18}|{'-' * 6}:|{'-' * 8}:|{'-' * 8}:|{'-' * 8}:|{'-' * 8}:"
        f"|{'-' * 5}:|",
    ]
    for kind in KINDS:
        samples = results.get(kind)
        if samples is None:
            continue
        ms = [v * 1000 for v in samples.late] or [math.nan]
        lines.append(
            f"| {label:<20} | {kind:<16} | {len(samples.late) + samples.lost:>5} "
            f"| {statistics.median(ms):>7.1f} | {percentile(ms, 99):>7.1f} | {max(ms):>7.1f} "
            f"| {min(ms):>7.1f} | {samples.lost:>4} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1", help="server address [127.0.0.1]")
    parser.add_argument("-p", "--port", type=int, default=11300, help="server port [11300]")
    parser.add_argument(
        "--kind", choices=[*KINDS, "all"], default="all", help="what to measure [all]"
    )
    parser.add_argument("-n", "--tries", type=int, default=50, help="tries per kind [50]")
    parser.add_argument(
        "--give-up", type=float, default=10.0, help="a try unanswered this long is lost [10]"
    )
    parser.add_argument("--label", default="", help="first column of the table")
    parser.add_argument("--tube-prefix", default="lateness", help="tube names start so")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(name)s %(levelname)s %(message)s",
    )
    kinds = list(KINDS) if args.kind == "all" else [args.kind]
    log.info("%s:%d: %s, %d tries each", args.host, args.port, ", ".join(kinds), args.tries)
    started = time.monotonic()
    results = run(args.host, args.port, kinds, args.tries, args.tube_prefix, args.give_up)
    log.info("done in %.1f s", time.monotonic() - started)
    print(table(results, args.label or f"{args.host}:{args.port}"))
    return 0 if len(results) == len(kinds) else 1


if __name__ == "__main__":
    raise SystemExit(main())
