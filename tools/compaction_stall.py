"""How long a compaction of the write-ahead log holds up its shard (docs/BENCHMARKS.md,
"Compaction in a forked child").

In process: an engine with N jobs of 100 bytes and a log in a temp directory; the time the
shard's loop spends in the compaction, in process (`Wal.compact`) and forked
(`Wal.start_compaction`, and how long its child writes):

    python tools/compaction_stall.py in-process -n 1000000

Against a server (`shardq serve -b DIR ...` on PORT): a backlog of N jobs put first, then
one connection puts and deletes, one command at a time, for S seconds; the worst round
trip is the longest a client waited (a compaction of the backlog falls in it once the log
holds twice the backlog plus a segment):

    python tools/compaction_stall.py server -p PORT -n 100000 -s 60
"""

from __future__ import annotations

import argparse
import logging
import shutil
import socket
import tempfile
import time

from shardq.engine.engine import Engine
from shardq.storage.wal import Wal

BODY = b"x" * 100
PUT = b"put 100 0 60 %d\r\n%s\r\n" % (len(BODY), BODY)

log = logging.getLogger("compaction_stall")


def in_process(jobs: int) -> None:
    engine = Engine()
    now = 10**12
    for n in range(1, jobs + 1):
        engine.put(n, n, "default", 0, 0, 60, BODY, now)
    for forked in (False, True):
        directory = tempfile.mkdtemp()
        try:
            wal = Wal(directory, 64 << 20, 100)
            wal.start()
            started = time.perf_counter()
            if forked:
                wal.start_compaction(engine.snapshot, len(engine.jobs))
            else:
                wal.compact(engine.snapshot())
            held = time.perf_counter() - started
            while forked and wal.poll_compaction() is None:
                time.sleep(0.01)  # (the child's write, timed as a whole below)
            whole = time.perf_counter() - started
            how = "forked" if forked else "in process"
            log.info(
                "%d jobs, %s: the loop held %.1f ms; written in %.2f s",
                jobs,
                how,
                held * 1000,
                whole,
            )
            wal.close()
        finally:
            shutil.rmtree(directory)


class Replies:
    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.buf = sock, b""

    def lines(self, n: int) -> list[bytes]:
        while self.buf.count(b"\r\n") < n:
            self.buf += self.sock.recv(1 << 20)
        *got, self.buf = self.buf.split(b"\r\n", n)
        return got


def against_server(port: int, backlog: int, seconds: float) -> None:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    replies = Replies(sock)
    for start in range(0, backlog, 1000):
        count = min(1000, backlog - start)
        sock.sendall(PUT * count)
        replies.lines(count)
    times: list[float] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        started = time.perf_counter()
        sock.sendall(PUT)
        (inserted,) = replies.lines(1)
        sock.sendall(b"delete %s\r\n" % inserted.split()[1])
        replies.lines(1)
        times.append(time.perf_counter() - started)
    times.sort()
    log.info(
        "%d put+delete round trips over a backlog of %d: p50 %.0f µs, p99.9 %.1f ms, worst %.1f ms",
        len(times),
        backlog,
        times[len(times) // 2] * 1e6,
        times[int(len(times) * 0.999)] * 1e3,
        times[-1] * 1e3,
    )
    sock.close()


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("where", choices=["in-process", "server"])
    parser.add_argument("-n", "--jobs", type=int, default=100_000)
    parser.add_argument("-p", "--port", type=int, default=11300)
    parser.add_argument("-s", "--seconds", type=float, default=60.0)
    args = parser.parse_args()
    if args.where == "in-process":
        in_process(args.jobs)
    else:
        against_server(args.port, args.jobs, args.seconds)


if __name__ == "__main__":
    main()
