"""What one hop between two processes costs: ZeroMQ (a DEALER asking a ROUTER over ipc, as a
serving process asks a shard) against a plain unix stream socket and against shardq's own
transport over one (processes/common/links.py), one small message each way, one round trip
at a time.

    python tools/hop_cost.py [--trips N] [--bytes B] [--rounds R]

Prints, per transport, the wall time of a round trip, the CPU both processes spent on it
(their user + system time, ZeroMQ's I/O threads included) and the context switches a
round trip made (voluntary + involuntary, both processes). Each round forks a fresh
answering process (no ZeroMQ context exists across a fork). ZeroMQ is measured when pyzmq
is installed (`pip install -e '.[measure]'`: shardq itself no longer uses it).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import select
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from statistics import median
from typing import Any

from shardq.processes.common import links

TOKEN = b"t" * 16

Pair = tuple[Callable[[bytes], None], Callable[[], bytes], Callable[[], None]]


def usage() -> tuple[float, int]:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime, r.ru_nvcsw + r.ru_nivcsw


def zmq_answerer(path: str, trips: int) -> None:
    zmq: Any = importlib.import_module("zmq")
    ctx = zmq.Context()
    s = ctx.socket(zmq.ROUTER)
    s.bind(f"ipc://{path}")
    for _ in range(trips):
        peer, data = s.recv_multipart()
        s.send_multipart([peer, data])
    s.close(0)
    ctx.term()


def zmq_asker(path: str) -> Pair:
    zmq: Any = importlib.import_module("zmq")
    ctx = zmq.Context()
    s = ctx.socket(zmq.DEALER)
    s.connect(f"ipc://{path}")

    def close() -> None:
        s.close(0)
        ctx.term()

    return s.send, s.recv, close


def unix_answerer(path: str, trips: int) -> None:
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen()
    conn, _ = srv.accept()
    for _ in range(trips):
        conn.sendall(conn.recv(1 << 16))
    conn.close()
    srv.close()


def unix_asker(path: str) -> Pair:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    while True:
        try:
            s.connect(path)
            break
        except (FileNotFoundError, ConnectionRefusedError):
            time.sleep(0.001)  # the answerer has not bound yet
    return s.sendall, lambda: s.recv(1 << 16), s.close


def links_answerer(path: str, trips: int) -> None:
    """shardq's own transport (processes/common/links.py), waited on as a loop waits: one
    epoll over the end's descriptor."""
    router = links.Router(path, TOKEN)
    poller = select.epoll()
    poller.register(router.fd, select.EPOLLIN)
    done = 0
    while done < trips:
        try:
            name, data = router.peek()
        except links.Again:
            poller.poll()
            continue
        reply = bytes(data)
        router.taken()
        router.send(name, reply)
        done += 1
    router.close()


def links_asker(path: str) -> Pair:
    dealer = links.Dealer(path, TOKEN + b"a" * 8)
    poller = select.epoll()
    poller.register(dealer.fd, select.EPOLLIN)
    while dealer.stream is None:
        dealer.connect()
        time.sleep(0.001)  # the answerer has not bound yet

    def recv() -> bytes:
        while True:
            try:
                data = dealer.peek()
            except links.Again:
                poller.poll()
                dealer.take_changes()
                continue
            reply = bytes(data)
            dealer.taken()
            return reply

    def close() -> None:
        dealer.close()
        poller.close()

    return dealer.send, recv, close


TRANSPORTS = {
    "zmq": (zmq_answerer, zmq_asker),
    "unix": (unix_answerer, unix_asker),
    "links": (links_answerer, links_asker),
}


def one_round(transport: str, trips: int, size: int) -> tuple[float, float, float]:
    """(µs wall, µs CPU, context switches) per round trip, both processes."""
    path = os.path.join(tempfile.mkdtemp(prefix="hop-"), "sock")
    answerer, asker = TRANSPORTS[transport]
    pid = os.fork()
    if pid == 0:
        answerer(path, trips + 1)
        os._exit(0)
    send, recv, close = asker(path)
    message = b"x" * size
    send(message)
    recv()  # connected and warm
    cpu0, switches0 = usage()
    start = time.perf_counter()
    for _ in range(trips):
        send(message)
        recv()
    wall = time.perf_counter() - start
    cpu1, switches1 = usage()
    close()
    _, _, child = os.wait4(pid, 0)
    child_cpu = child.ru_utime + child.ru_stime  # its whole life: start-up is a small part
    child_switches = child.ru_nvcsw + child.ru_nivcsw
    cpu = cpu1 - cpu0 + child_cpu
    switches = switches1 - switches0 + child_switches
    return wall / trips * 1e6, cpu / trips * 1e6, switches / trips


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trips", type=int, default=20_000)
    ap.add_argument("--bytes", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    transports = [t for t in TRANSPORTS if t != "zmq" or importlib.util.find_spec("zmq")]
    if "zmq" not in transports:
        sys.stderr.write("pyzmq is not installed: ZeroMQ is not measured\n")
    results: dict[str, list[tuple[float, float, float]]] = {t: [] for t in transports}
    for _ in range(args.rounds):
        for transport in results:  # alternated
            results[transport].append(one_round(transport, args.trips, args.bytes))
    for transport, rounds in results.items():
        wall, cpu, switches = (median(r[i] for r in rounds) for i in range(3))
        sys.stdout.write(
            f"{transport:>5}: {wall:6.1f} µs a round trip, {cpu:5.1f} µs CPU (both processes), "
            f"{switches:.2f} context switches (medians of {args.rounds} x {args.trips})\n"
        )


if __name__ == "__main__":
    main()
