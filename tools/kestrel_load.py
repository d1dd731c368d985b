"""A small, bounded load for the Kestrel front-end, with the beanstalk figures of the
same kind from the same script and server, so the two doors compare like for like.

    .venv/bin/python tools/kestrel_load.py --kestrel PORT --beanstalk PORT [-c 8] [-P 8] [-d 5]

Rows: ``set`` (Kestrel ``set``, C connections, P in flight each), ``get`` (Kestrel ``get`` of
a pre-filled queue), ``put`` and ``reserve`` (beanstalk ``put``; ``reserve-with-timeout 0`` +
``delete`` of a pre-filled tube). 100-byte bodies. One Python process drives every
connection (selectors), so the client costs CPU too: read the ratio, not the absolutes.
Bounded: at most --max-ops operations a row, and every reply is checked.
"""

from __future__ import annotations

import argparse
import logging
import re
import selectors
import socket
import time
from collections.abc import Callable

BODY = b"x" * 100
log = logging.getLogger("kestrel_load")

Request = Callable[[], bytes]


def ops_per_s(
    port: int,
    conns: int,
    depth: int,
    seconds: float,
    max_ops: int,
    request: Request,
    done: re.Pattern[bytes],
) -> float:
    """Keep `depth` requests in flight on each of `conns` connections for `seconds`; count
    the replies matching `done` (anything else stops the row with an error)."""
    sel = selectors.DefaultSelector()
    bufs: dict[socket.socket, bytearray] = {}
    for _ in range(conns):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(b"".join(request() for _ in range(depth)))
        sock.setblocking(False)
        sel.register(sock, selectors.EVENT_READ)
        bufs[sock] = bytearray()
    count, start = 0, time.monotonic()
    end = start + seconds
    while time.monotonic() < end and count < max_ops:
        for key, _ in sel.select(0.5):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            buf = bufs[sock]
            buf += sock.recv(1 << 16)
            n = 0
            while (m := done.match(buf)) is not None:
                del buf[: m.end()]
                n += 1
            if b"\r\n" in buf and not buf.startswith(b"VALUE"):  # a whole reply, not ours
                raise RuntimeError(f"unexpected reply {bytes(buf[:80])!r}")
            count += n
            if n:
                sock.sendall(b"".join(request() for _ in range(n)))
    elapsed = time.monotonic() - start
    for sock in bufs:
        sock.close()
    return count / elapsed


def fill(port: int, lines: bytes, count: int, reply: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        batch = 500
        for first in range(0, count, batch):
            n = min(batch, count - first)
            sock.sendall(lines * n)
            got = b""
            while got.count(reply) < n:
                got += sock.recv(1 << 16)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kestrel", type=int, required=True)
    ap.add_argument("--beanstalk", type=int, required=True)
    ap.add_argument("-c", type=int, default=8, help="connections")
    ap.add_argument("-P", type=int, default=8, help="requests in flight per connection")
    ap.add_argument("-d", type=float, default=5.0, help="seconds per row")
    ap.add_argument("--max-ops", type=int, default=200_000, help="a row stops past this")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    n = args.max_ops
    put = b"put 1024 0 60 100\r\n" + BODY + b"\r\n"
    rows: list[tuple[str, int, Request, bytes]] = [
        (
            "kestrel set",
            args.kestrel,
            lambda: b"set kload 0 0 100\r\n" + BODY + b"\r\n",
            rb"STORED\r\n",
        ),
        ("beanstalk put", args.beanstalk, lambda: put, rb"INSERTED \d+\r\n"),
    ]
    results = {}
    for name, port, request, done in rows:
        results[name] = ops_per_s(port, args.c, args.P, args.d, n, request, re.compile(done))
    # the get rows read what the set rows left, topped up to what they can take
    fill(args.kestrel, b"set kload 0 0 100\r\n" + BODY + b"\r\n", n, b"STORED\r\n")
    results["kestrel get"] = ops_per_s(
        args.kestrel,
        args.c,
        1,
        args.d,
        n,
        lambda: b"get kload\r\n",
        re.compile(rb"VALUE kload 0 100\r\n" + BODY + rb"\r\nEND\r\n"),
    )
    with socket.create_connection(("127.0.0.1", args.beanstalk)) as sock:
        sock.sendall(b"use bload\r\n")
        sock.recv(100)
        sent = 0
        while sent < n:
            k = min(500, n - sent)
            sock.sendall(put * k)
            got = b""
            while got.count(b"INSERTED") < k:
                got += sock.recv(1 << 16)
            sent += k

    results["beanstalk reserve+delete"] = reserve_rate(args.beanstalk, args.c, args.d, n)
    for name, rate in results.items():
        log.info(
            "%-26s %9.0f ops/s  (c=%d, P=%s, %.0f s)",
            name,
            rate,
            args.c,
            1 if "get" in name or "reserve" in name else args.P,
            args.d,
        )


def reserve_rate(port: int, conns: int, seconds: float, max_ops: int) -> float:
    """reserve-with-timeout 0 then delete, one job at a time per connection."""
    sel = selectors.DefaultSelector()
    state: dict[socket.socket, bytearray] = {}
    for _ in range(conns):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(b"watch bload\r\nignore default\r\n")
        got = b""
        while got.count(b"\r\n") < 2:
            got += sock.recv(100)
        sock.sendall(b"reserve-with-timeout 0\r\n")
        sock.setblocking(False)
        sel.register(sock, selectors.EVENT_READ)
        state[sock] = bytearray()
    reserved = re.compile(rb"RESERVED (\d+) (\d+)\r\n")
    count, start = 0, time.monotonic()
    while time.monotonic() < start + seconds and count < max_ops:
        for key, _ in sel.select(0.5):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            buf = state[sock]
            buf += sock.recv(1 << 16)
            while True:
                m = reserved.match(buf)
                if m and len(buf) >= m.end() + int(m.group(2)) + 2:
                    job = bytes(m.group(1))  # before the del: a match reads the live buffer
                    del buf[: m.end() + int(m.group(2)) + 2]
                    sock.sendall(b"delete %s\r\n" % job)
                elif buf.startswith(b"DELETED\r\n"):
                    del buf[:9]
                    count += 1
                    sock.sendall(b"reserve-with-timeout 0\r\n")
                elif buf.startswith((b"TIMED_OUT\r\n", b"NOT_FOUND\r\n")):
                    raise RuntimeError(f"unexpected {bytes(buf[:40])!r}: tube dry? raise --max-ops")
                else:
                    break
    elapsed = time.monotonic() - start
    for sock in state:
        sock.close()
    return count / elapsed


if __name__ == "__main__":
    main()
