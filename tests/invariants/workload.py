"""A randomized workload against a beanstalk server, with invariants checked from the client.

``run(port, seed, ...)`` drives one server for ``seconds`` of load and then drains it:

* **Producers** (one connection each) ``use`` a random tube now and then and ``put`` jobs
  with priority 0, 10 or 100, delay 0 (mostly) or 1 s and a TTR of 2-5 s. Every body is
  unique and names its tube and TTR (``<tube>:<ttr>:<token>:<padding>``), so a job that
  reaches the wrong connection is recognised by its body alone. A producer sometimes drops
  its connection with a put in flight: that put is *in doubt* (it may or may not exist). The
  backlog (puts minus deletes) is capped so the drain stays short.
* **Consumers** connect, watch a random set of tubes (usually spanning shards, usually
  ignoring ``default``) and loop: ``reserve-with-timeout`` 0 or 1, or a blocking
  ``reserve`` when they hold nothing (given up, by closing the socket, after a few seconds).
  A reserved job is deleted (mostly), released (delay 0 or 1, new priority), buried,
  touched and kept, or kept until its TTR has surely run out before the next command on it;
  up to three jobs are held at once. Sessions end by closing cleanly, by closing abruptly
  (FIN or RST) while holding jobs, or by closing right after sending
  ``reserve-with-timeout 5``; then the consumer reconnects with another watch list.
* A **kicker** ``use``s every tube and ``kick 100``s it about every 0.5 s.
* **Drain**: producers stop; every consumer reconnects watching all tubes (ignoring
  ``default``), kicks every tube, and reserves and deletes until every acknowledged job is
  deleted and ``stats`` shows no job left, or the drain deadline passes. Jobs still not
  deleted are reported as STRANDED with their ``stats-job``.

Invariants (a violation is a line of text in ``Report.violations``):

1. Every acknowledged put (``INSERTED <id>``) is deleted exactly once (``DELETED`` replies
   are counted per id), and every ``RESERVED`` body is the body put under that id. An id
   that was never acknowledged may be reserved only with the body of a put in doubt, and one
   such put makes at most one job.
2. No job is held by two reservations at once (below).
3. A job only reaches a connection that watches its tube.
4. Every reply is one the command allows at that moment: ``put`` -> ``INSERTED``, ``use`` ->
   ``USING <tube>``, ``watch``/``ignore`` -> ``WATCHING <n>`` with the right n, ``kick
   100`` -> ``KICKED <n <= 100>``, a reserve -> ``RESERVED``, ``TIMED_OUT`` (not for a
   blocking ``reserve``) or ``DEADLINE_SOON`` (only while the connection may hold a job
   within the safety margin of its deadline); ``delete``/``release``/``bury``/``touch`` of
   a held job -> its success reply, or ``NOT_FOUND`` only if the job's TTR may have run out.
5. When everything is deleted and every client has closed, ``stats`` shows no urgent,
   ready, reserved, delayed or buried job and no waiting connection (the server gets
   ``STATS_SETTLE`` seconds to process the closes).

Timing: one clock, ``time.monotonic()``, in the one process. A send time is read *before*
the bytes are sent and a reply time *after* they were read, so each is a bound in the
safe direction: the server did what a command asked after its send time and before its
reply time.

**Exclusive holding (2), soundly.** Server side, a reservation of job J by connection A is
an interval ``[a0, a1)``. A's reserve was sent at ``sA`` and its ``RESERVED`` read at
``rA``, so ``sA <= a0 <= rA``. The hold ends only when the server (i) processes A's
``delete``/``release``/``bury`` of J, which it reads after A sent it; (ii) sees A's
connection close, which happens after A closed it; or (iii) lets the TTR run out, at the
deadline ``a0 + ttr`` (or ``t + ttr`` for a successful ``touch`` processed at ``t``, which
is after the touch was sent). So ``a1 >= LA = min(time A sent its ending command or closed
the socket, base + ttr - EPS)`` where ``base`` is when A sent the reserve or its last
successful touch. For two reservations A and B of J (B may be A itself, reserving J
again): if ``rB < LA`` and ``rA < LB`` then ``b0 <= rB < LA <= a1`` and
``a0 <= rA < LB <= b1``, so the intervals intersect: a bug under every thread timing.
Both halves are needed: "B read RESERVED after A did and before LA" alone would flag a
correct server when B's reply was read late (a slow thread) after B's own reservation had
expired before A's began. Using A's *reply* times for the end would flag correct servers
too: the server may hand J to B before A reads its ``DELETED``. In the same way, a
successful ``delete``/``release``/``bury``/``touch`` of J by A, sent at s and answered at
r, happened at some ``t`` in ``[s, r]``; if another connection B surely held J over that
whole window (``rB < s`` and ``r < LB``), the server let A act on B's job. If the server
itself drops a connection, it may have released that connection's jobs at any moment, so
such holds are taken to end at their ``RESERVED`` reply.

``NOT_FOUND`` (4) for a command on a held job, answered at r, is allowed iff
``r >= base + ttr - EPS``. ``DEADLINE_SOON`` answered at r is allowed iff some job the
connection may hold has ``base + ttr - EPS <= r + SAFETY_MARGIN``. ``EPS`` only ever
widens what is allowed: it covers a server that stamps a reservation with a clock reading
taken a little before it actually read the command.

Everything random comes from ``random.Random(seed)`` (one ``Random`` per thread, seeded
from the master), so a failing seed replays the same choices; thread timing still varies.
Every socket read has a deadline (``helpers.READ_DEADLINE``), so a run cannot hang.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
import traceback
from collections.abc import Callable

from .ledger import (
    _COUNTER_OF,
    _INSERTED,
    _KICKED,
    BACKLOG,
    COUNTERS,
    EMPTY_STATS,
    JOIN_GRACE,
    PRIORITIES,
    STATS_SETTLE,
    STRANDED_DETAIL,
    TTR_RANGE,
    Hold,
    Ledger,
    Op,
    Report,
    analyze,
    make_body,
    tube_names,
)
from .session import Link, LinkError, Session, parse_stats

# --------------------------------------------------------------------------- the run


class Workload:
    def __init__(
        self,
        port: int,
        seed: int,
        seconds: float,
        tubes: int,
        producers: int,
        consumers: int,
        drain_seconds: float,
    ) -> None:
        self.port = port
        self.seed = seed
        self.seconds = seconds
        self.tubes = tube_names(tubes)
        self.n_producers = producers
        self.n_consumers = consumers
        self.drain_seconds = drain_seconds
        self.ledger = Ledger()
        self.conn_ids = itertools.count(1)
        self.load_over = threading.Event()
        self.drain_over = threading.Event()

    # ----------------------------------------------------------- recording
    def violation(self, message: str) -> None:
        with self.ledger.lock:
            self.ledger.violations.append(message)

    def count(self, name: str, n: int = 1) -> None:
        with self.ledger.lock:
            self.ledger.counters[name] += n

    def record_hold(self, hold: Hold) -> None:
        with self.ledger.lock:
            self.ledger.holds.setdefault(hold.job_id, []).append(hold)
            self.ledger.counters["reserves"] += 1

    def record_op(self, op: Op, what: str) -> None:
        led = self.ledger
        with led.lock:
            led.ops.append(op)
            led.counters[_COUNTER_OF[what]] += 1
            if what == "delete":
                led.deleted[op.job_id] += 1
                led.pending.discard(op.job_id)
                led.room.notify_all()

    def acknowledge(self, job_id: int, tube: str, body: bytes) -> None:
        led = self.ledger
        with led.lock:
            led.counters["puts"] += 1
            if job_id in led.acked:
                led.violations.append(f"job id {job_id} acknowledged for two puts")
                return
            led.acked[job_id] = (tube, body)
            if not led.deleted[job_id]:
                led.pending.add(job_id)

    # ----------------------------------------------------------- threads
    def thread(self, name: str, fn: Callable[[random.Random], None], seed: int) -> threading.Thread:
        def body() -> None:
            try:
                fn(random.Random(seed))
            except Exception:
                self.violation(f"{name} crashed:\n{traceback.format_exc()}")

        return threading.Thread(target=body, name=f"invariants-{name}", daemon=True)

    def wait_for_room(self) -> bool:
        """Block while the backlog is full; False once the load phase is over."""
        led = self.ledger
        with led.room:
            while not self.load_over.is_set():
                if led.counters["puts"] - led.counters["deletes"] < BACKLOG:
                    return True
                led.room.wait(0.1)
        return False

    def producer(self, index: int, rng: random.Random) -> None:
        seq = itertools.count()
        while not self.load_over.is_set():
            try:
                link = Link(self.port, next(self.conn_ids))
            except LinkError as exc:
                self.violation(f"producer {index}: {exc}")
                self.load_over.wait(0.2)  # do not spin on a refusing server
                continue
            try:
                self.produce(index, rng, link, seq)
            except LinkError as exc:  # the put in flight, if any, stays in doubt
                self.violation(f"producer {index} (conn {link.conn}): {exc}")
            finally:
                link.close()

    def produce(
        self, index: int, rng: random.Random, link: Link, seq: itertools.count[int]
    ) -> None:
        tube: str | None = None
        while self.wait_for_room():
            if tube is None or rng.random() < 0.15:
                tube = rng.choice(self.tubes)
                _, [reply], _ = link.call(b"use %s\r\n" % tube.encode())
                if reply != b"USING %s\r\n" % tube.encode():
                    self.violation(f"producer {index}: use {tube} answered {reply!r}")
            ttr = rng.randint(*TTR_RANGE)
            delay = 1 if rng.random() < 0.1 else 0
            body = make_body(tube, ttr, f"{self.seed}.{index}.{next(seq)}", rng.randint(0, 64))
            pri = rng.choice(PRIORITIES)
            cmd = b"put %d %d %d %d\r\n%s\r\n" % (pri, delay, ttr, len(body), body)
            with self.ledger.lock:
                self.ledger.sent[body] = tube
            if rng.random() < 0.003:
                # Drop the connection with this put in flight: it is in doubt.
                link.send(cmd)
                link.close(reset=rng.random() < 0.5)
                self.count("in_doubt_puts")
                return
            _, [reply], _ = link.call(cmd)
            match = _INSERTED.fullmatch(reply)
            if match is None:
                self.violation(f"producer {index}: put answered {reply!r}")
                continue
            self.acknowledge(int(match.group(1)), tube, body)

    def consumer(self, rng: random.Random) -> None:
        while not self.load_over.is_set():
            self.session(rng, "consumer", Session.work)
        while not self.drain_over.is_set():
            self.session(rng, "drain", Session.drain)

    def session(self, rng: random.Random, role: str, body: Callable[[Session], None]) -> None:
        try:
            session = Session(self, rng, role)
        except LinkError as exc:
            self.violation(f"{role}: {exc}")
            self.drain_over.wait(0.2)  # do not spin on a refusing server
            return
        try:
            body(session)
        except LinkError as exc:
            session.fail(str(exc))
            session.lost(exc)
        finally:
            if not session.link.closed:
                session.close(reset=False, how="closed")

    def kick_all(self, link: Link, fail: Callable[[str], None]) -> None:
        cmds = b"".join(b"use %s\r\nkick 100\r\n" % t.encode() for t in self.tubes)
        _, replies, _ = link.call(cmds, 2 * len(self.tubes))
        kicked = 0
        for tube, using, reply in zip(self.tubes, replies[::2], replies[1::2], strict=True):
            if using != b"USING %s\r\n" % tube.encode():
                fail(f"use {tube} answered {using!r}")
            match = _KICKED.fullmatch(reply)
            if match is None or int(match.group(1)) > 100:
                fail(f"kick 100 on {tube} answered {reply!r}")
            else:
                kicked += int(match.group(1))
        self.count("kicks", kicked)

    def kicker(self, rng: random.Random) -> None:
        while not self.drain_over.is_set():
            try:
                link = Link(self.port, next(self.conn_ids))
            except LinkError as exc:
                self.violation(f"kicker: {exc}")
                self.drain_over.wait(0.2)
                continue
            try:
                while not self.drain_over.is_set():
                    self.kick_all(link, lambda m: self.violation(f"kicker: {m}"))
                    self.drain_over.wait(rng.uniform(0.4, 0.6))
            except LinkError as exc:
                self.violation(f"kicker (conn {link.conn}): {exc}")
            finally:
                link.close()

    # ----------------------------------------------------------- monitor
    def stats(self, link: Link, cmd: bytes = b"stats\r\n") -> dict[str, str]:
        _, [reply], _ = link.call(cmd)
        return parse_stats(reply)

    def server_empty(self, link: Link) -> bool:
        stats = self.stats(link)
        return all(stats.get(key) == "0" for key in EMPTY_STATS[:-1])

    def wait_drained(self, link: Link, deadline: float) -> bool:
        """Until ``deadline``: every acknowledged job deleted and the server empty?"""
        led = self.ledger
        while True:
            with led.room:
                while led.pending:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return False
                    led.room.wait(remaining)
            if self.server_empty(link):  # jobs of puts in doubt may remain
                return True
            if time.monotonic() >= deadline:
                return False
            self.drain_over.wait(0.05)  # a pause between two polls of `stats`

    def settle(self, link: Link) -> None:
        """Invariant 5, once every other client has closed."""
        deadline = time.monotonic() + STATS_SETTLE
        while True:
            stats = self.stats(link)
            bad = {key: stats.get(key) for key in EMPTY_STATS if stats.get(key) != "0"}
            if not bad:
                return
            if time.monotonic() >= deadline:
                self.violation(
                    f"stats {STATS_SETTLE} s after every client closed: {bad} (all must be 0)"
                )
                return
            self.drain_over.wait(0.05)  # a pause between two polls of `stats`

    def stranded_stats(self, link: Link) -> dict[int, str]:
        """``stats-job`` of the first acknowledged jobs that the drain did not delete."""
        with self.ledger.lock:
            left = sorted(self.ledger.pending)
        if not left:
            self.violation(
                f"drain: every acknowledged job was deleted but stats still showed jobs "
                f"after {self.drain_seconds} s"
            )
        out: dict[int, str] = {}
        for job_id in left[:STRANDED_DETAIL]:
            _, [reply], _ = link.call(b"stats-job %d\r\n" % job_id)
            text = reply.partition(b"\r\n")[2][:-2] if reply.startswith(b"OK") else reply
            out[job_id] = text.decode(errors="replace").strip().replace("\n", ", ")
        return out

    def run(self) -> Report:
        started = time.monotonic()
        master = random.Random(self.seed)
        producers = [
            self.thread(f"producer-{i}", lambda r, i=i: self.producer(i, r), master.getrandbits(64))
            for i in range(self.n_producers)
        ]
        consumers = [
            self.thread(f"consumer-{i}", self.consumer, master.getrandbits(64))
            for i in range(self.n_consumers)
        ]
        kicker = self.thread("kicker", self.kicker, master.getrandbits(64))
        threads = [*producers, *consumers, kicker]
        for t in threads:
            t.start()
        time.sleep(self.seconds)  # the load phase
        self.load_over.set()
        with self.ledger.room:
            self.ledger.room.notify_all()
        for t in producers:
            t.join(JOIN_GRACE)
        drain_deadline = time.monotonic() + self.drain_seconds

        monitor: Link | None = None
        drained = False
        try:
            monitor = Link(self.port, next(self.conn_ids))
            drained = self.wait_drained(monitor, drain_deadline)
        except LinkError as exc:
            self.violation(f"monitor: {exc}")
        self.drain_over.set()
        join_deadline = time.monotonic() + JOIN_GRACE
        for t in threads:
            t.join(max(0.0, join_deadline - time.monotonic()))
        hung = [t.name for t in threads if t.is_alive()]
        if hung:
            self.violation(f"threads still running {JOIN_GRACE} s after the end: {hung}")
        job_stats: dict[int, str] = {}
        try:
            if monitor is None:
                monitor = Link(self.port, next(self.conn_ids))
            if not drained:
                job_stats = self.stranded_stats(monitor)
            self.settle(monitor)
        except LinkError as exc:
            self.violation(f"monitor: {exc}")
        finally:
            if monitor is not None:
                monitor.close()
        led = self.ledger
        with led.lock:
            violations = analyze(led, job_stats)
            counters = {name: led.counters[name] for name in COUNTERS}
            stranded = sorted(led.pending)
        return Report(self.seed, violations, counters, stranded, time.monotonic() - started)


def run(
    port: int,
    seed: int,
    seconds: float = 20.0,
    tubes: int = 12,
    producers: int = 6,
    consumers: int = 8,
    drain_seconds: float = 20.0,
) -> Report:
    """Drive the server on 127.0.0.1:``port`` for ``seconds``, drain it, check the invariants."""
    return Workload(port, seed, seconds, tubes, producers, consumers, drain_seconds).run()
