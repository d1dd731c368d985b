"""The threads and the checks of test_concurrency.py: producers, consumers and a kicker
on one shardq server, everything they observed (``Record``) and its checks (``Run.check``).

Exclusive holding, checked soundly from the client side. Connection A surely holds a job
on the server from the moment A *received* RESERVED until the moment A *sent* the
delete/release/bury (or closed the socket): the server reserved it before sending the
reply and ends the hold only after reading the command. Clock: time.monotonic(), one
clock for all threads. So if B received RESERVED for the job before A sent its ending
command (and after A received its own RESERVED), both held it at the same time: a bug,
whatever the thread scheduling. Using A's *reply* time instead would flag correct
servers, because the server may hand the job to B before A's DELETED reaches A.
The TTR is an hour, so no reservation ever times out during the test.
"""

from __future__ import annotations

import itertools
import random
import socket
import struct
import threading
import time
import traceback
import uuid
from collections import Counter
from dataclasses import dataclass, field

from helpers import connect, read_replies, send

SHARDS = 4
N_TUBES = 12
N_JOBS = 2000
PRODUCERS = 4
CONSUMERS = 8
TTR = 3600
#: The whole run (puts to last delete) must finish within this many seconds.
HARD_DEADLINE = 45.0

TUBES = [f"conc-{i}" for i in range(N_TUBES)]


@dataclass
class Hold:
    conn: int
    start: float  # RESERVED received
    end: float | None = None  # ending command sent / socket closed
    how: str = ""


@dataclass
class Record:
    """Everything the clients observed; guarded by ``lock``."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    put_body: dict[int, bytes] = field(default_factory=dict)
    reserved_bodies: dict[int, set[bytes]] = field(default_factory=dict)
    holds: dict[int, list[Hold]] = field(default_factory=dict)
    deleted: Counter[int] = field(default_factory=Counter)
    buried: set[int] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)
    ops: Counter[str] = field(default_factory=Counter)

    def error(self, message: str) -> None:
        with self.lock:
            self.errors.append(message)

    def count(self, what: str) -> None:
        with self.lock:
            self.ops[what] += 1


class Run:
    def __init__(self, port: int, seed: int) -> None:
        self.port = port
        self.seed = seed
        self.rec = Record()
        self.stop = threading.Event()
        self.all_deleted = threading.Event()
        self.conn_ids = itertools.count(1)
        self.deadline = time.monotonic() + HARD_DEADLINE

    # -------------------------------------------------------------- threads
    def guarded(self, name: str, fn, *args) -> threading.Thread:
        def body() -> None:
            try:
                fn(*args)
            except Exception:
                self.rec.error(f"{name} crashed:\n{traceback.format_exc()}")
                self.stop.set()

        return threading.Thread(target=body, name=name, daemon=True)

    def producer(self, index: int, count: int) -> None:
        rng = random.Random(self.seed * 1000 + index)
        sock = connect(self.port)
        try:
            for i in range(count):
                if self.stop.is_set():
                    return
                tube = rng.choice(TUBES)
                body = f"{self.seed}:{index}:{i}:{uuid.uuid4().hex}:".encode()
                body += b"x" * rng.randint(0, 200)
                delay = 1 if rng.random() < 0.05 else 0
                pri = rng.choice([0, 10, 100, 1000, 65536])
                send(
                    sock,
                    b"use %s\r\nput %d %d %d %d\r\n%s\r\n"
                    % (tube.encode(), pri, delay, TTR, len(body), body),
                )
                using, inserted = read_replies(sock, 2)
                if using != b"USING %s\r\n" % tube.encode() or not inserted.startswith(
                    b"INSERTED "
                ):
                    self.rec.error(f"producer {index}: put answered {using!r} {inserted!r}")
                    continue
                job_id = int(inserted.split()[1])
                with self.rec.lock:
                    if job_id in self.rec.put_body:
                        self.rec.errors.append(f"job id {job_id} handed out twice")
                    self.rec.put_body[job_id] = body
        finally:
            sock.close()

    def kicker(self) -> None:
        rng = random.Random(self.seed * 1000 + 999)
        sock = connect(self.port)
        try:
            while not self.stop.is_set():
                cmds = b"".join(b"use %s\r\nkick 20\r\n" % t.encode() for t in TUBES)
                send(sock, cmds)
                for reply in read_replies(sock, 2 * N_TUBES):
                    if not (reply.startswith(b"USING ") or reply.startswith(b"KICKED ")):
                        self.rec.error(f"kicker: unexpected {reply!r}")
                with self.rec.lock:
                    some = rng.sample(sorted(self.rec.buried), min(3, len(self.rec.buried)))
                for job_id in some:
                    send(sock, b"kick-job %d\r\n" % job_id)
                    [reply] = read_replies(sock, 1)
                    # It may have been kicked (and even deleted) already.
                    if reply not in (b"KICKED\r\n", b"NOT_FOUND\r\n"):
                        self.rec.error(f"kicker: kick-job {job_id} answered {reply!r}")
                self.stop.wait(0.05)
        finally:
            sock.close()

    def consumer(self, index: int) -> None:
        rng = random.Random(self.seed * 1000 + 100 + index)
        while not self.stop.is_set():
            self.consumer_session(rng)

    def consumer_session(self, rng: random.Random) -> None:
        """One connection: watch a random tube set, work a while, then leave (rudely or not)."""
        conn = next(self.conn_ids)
        sock = connect(self.port)
        held: list[int] = []
        try:
            watch = rng.sample(TUBES, rng.randint(1, 5))
            send(
                sock, b"".join(b"watch %s\r\n" % t.encode() for t in watch) + b"ignore default\r\n"
            )
            replies = read_replies(sock, len(watch) + 1)
            if replies[-1] != b"WATCHING %d\r\n" % len(watch):
                self.rec.error(f"conn {conn}: watch/ignore answered {replies!r}")
            idle = 0
            for _ in range(rng.randint(5, 80)):
                if self.stop.is_set() or idle >= 3:
                    break  # nothing for us here lately: try another watch list
                job_id = self.reserve(sock, conn, rng)
                idle = idle + 1 if job_id is None else 0
                if job_id is not None:
                    held.append(job_id)
                    if len(held) < 3 and rng.random() < 0.3:
                        continue  # hold it and take another one
                if rng.random() < 0.04 and held:
                    break  # abrupt disconnect while holding jobs
                for held_id in held:
                    self.finish(sock, conn, held_id, rng)
                held.clear()
            if rng.random() < 0.15:
                # Leave while a reserve waits: a job handed over now must not be lost.
                send(sock, b"reserve-with-timeout 1\r\n")
                self.rec.count("closed-while-waiting")
        finally:
            self.close(sock, conn, held, rng)

    def reserve(self, sock: socket.socket, conn: int, rng: random.Random) -> int | None:
        timeout = rng.choice([0, 0, 1])
        send(sock, b"reserve-with-timeout %d\r\n" % timeout)
        [reply] = read_replies(sock, 1, timeout=timeout + 4)
        now = time.monotonic()
        if reply == b"TIMED_OUT\r\n":
            self.rec.count("timed-out")
            return None
        if not reply.startswith(b"RESERVED "):
            self.rec.error(f"conn {conn}: reserve answered {reply[:100]!r}")
            return None
        header, _, rest = reply.partition(b"\r\n")
        job_id = int(header.split()[1])
        with self.rec.lock:
            self.rec.holds.setdefault(job_id, []).append(Hold(conn, now))
            self.rec.reserved_bodies.setdefault(job_id, set()).add(rest[:-2])
            self.rec.ops["reserved"] += 1
        return job_id

    def end_hold(self, job_id: int, conn: int, how: str) -> None:
        now = time.monotonic()
        with self.rec.lock:
            for hold in reversed(self.rec.holds[job_id]):
                if hold.conn == conn and hold.end is None:
                    hold.end, hold.how = now, how
                    return
        self.rec.error(f"conn {conn}: ends a hold of job {job_id} it does not have")

    def finish(self, sock: socket.socket, conn: int, job_id: int, rng: random.Random) -> None:
        r = rng.random()
        if r < 0.6:
            cmd, want, how = b"delete %d\r\n" % job_id, b"DELETED\r\n", "deleted"
        elif r < 0.8:
            delay = 1 if rng.random() < 0.3 else 0
            pri = rng.choice([0, 10, 100, 1000])
            cmd, want, how = (
                b"release %d %d %d\r\n" % (job_id, pri, delay),
                b"RELEASED\r\n",
                "released",
            )
        elif r < 0.9:
            cmd, want, how = (
                b"bury %d %d\r\n" % (job_id, rng.randint(0, 100)),
                b"BURIED\r\n",
                "buried",
            )
        else:
            send(sock, b"touch %d\r\n" % job_id)
            if read_replies(sock, 1) != [b"TOUCHED\r\n"]:
                self.rec.error(f"conn {conn}: touch {job_id} of a held job failed")
            cmd, want, how = b"delete %d\r\n" % job_id, b"DELETED\r\n", "deleted"
        self.end_hold(job_id, conn, how)
        send(sock, cmd)
        [reply] = read_replies(sock, 1)
        if reply != want:
            self.rec.error(f"conn {conn}: {cmd!r} on a held job answered {reply!r}")
            return
        with self.rec.lock:
            self.rec.ops[how] += 1
            if how == "buried":
                self.rec.buried.add(job_id)
            elif how == "deleted":
                self.rec.buried.discard(job_id)
                self.rec.deleted[job_id] += 1
                if self.rec.ops["deleted"] >= N_JOBS:
                    self.all_deleted.set()
                    self.stop.set()

    def close(self, sock: socket.socket, conn: int, held: list[int], rng: random.Random) -> None:
        how = "disconnected"
        if rng.random() < 0.5:  # reset instead of FIN
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            how = "reset"
        for job_id in held:
            self.end_hold(job_id, conn, how)
            self.rec.count(f"{how}-holding")
        sock.close()

    # -------------------------------------------------------------- checks
    def check(self) -> list[str]:
        rec = self.rec
        problems = list(rec.errors)
        put_ids = set(rec.put_body)
        if len(put_ids) != N_JOBS:
            problems.append(f"{len(put_ids)} jobs put, expected {N_JOBS}")
        twice = {i: n for i, n in rec.deleted.items() if n != 1}
        if twice:
            problems.append(f"deleted more than once: {dict(list(twice.items())[:20])}")
        never = sorted(put_ids - set(rec.deleted))
        if never:
            problems.append(f"{len(never)} jobs never deleted, e.g. {never[:20]}")
        phantom = sorted(set(rec.deleted) - put_ids)
        if phantom:
            problems.append(f"deleted ids that were never put: {phantom[:20]}")
        for job_id, bodies in rec.reserved_bodies.items():
            if bodies != {rec.put_body.get(job_id)}:
                problems.append(f"job {job_id} reserved with bodies {bodies!r:.300}")
        for job_id, holds in rec.holds.items():
            ordered = sorted(holds, key=lambda h: h.start)
            for a, b in itertools.pairwise(ordered):
                if a.end is None or b.start < a.end:
                    problems.append(
                        f"job {job_id} held by conn {a.conn} ({a.start:.4f}..{a.end}, {a.how}) "
                        f"and reserved by conn {b.conn} at {b.start:.4f}"
                    )
            if ordered and ordered[-1].end is None:
                problems.append(f"job {job_id} still held at the end by conn {ordered[-1].conn}")
        return problems

    def missing_report(self) -> str:
        """Where the jobs that were never deleted are, according to the server."""
        never = sorted(set(self.rec.put_body) - set(self.rec.deleted))[:10]
        if not never:
            return ""
        sock = connect(self.port)
        try:
            lines = []
            for job_id in never:
                send(sock, b"stats-job %d\r\n" % job_id)
                [reply] = read_replies(sock, 1)
                lines.append(f"  {job_id}: {reply[:400]!r}")
            return "server's view of jobs never deleted:\n" + "\n".join(lines)
        finally:
            sock.close()
