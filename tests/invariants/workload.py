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

import contextlib
import itertools
import random
import re
import socket
import struct
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from zlib import crc32

from helpers import READ_DEADLINE, ProtocolTimeout, UnexpectedEOF, connect, read_replies, send

#: Seconds of slack for a TTR deadline the server computed; it only widens what is allowed.
EPS = 0.05
#: DEADLINE_SOON fires this long before a held job's deadline (beanstalkd's safety margin).
SAFETY_MARGIN = 1.0
PRIORITIES = (0, 10, 100)
TTR_RANGE = (2, 5)
#: A consumer holds at most this many jobs at once.
MAX_HELD = 3
#: Producers wait while more than this many acknowledged jobs are not yet deleted.
BACKLOG = 200
#: A blocking ``reserve`` is given up (the socket closed) after this many seconds.
BLOCKING_WAIT = 3.0
#: After the drain, the server gets this long to show empty ``stats``.
STATS_SETTLE = 2.0
#: Seconds a thread may still take after it was told to stop.
JOIN_GRACE = 15.0
#: How far past a job's latest possible deadline an "expire" sleep goes.
EXPIRE_MARGIN = 0.25
#: STRANDED jobs whose ``stats-job`` is fetched and shown.
STRANDED_DETAIL = 20
#: The stats that must be 0 at the end (invariant 5).
EMPTY_STATS = (
    "current-jobs-urgent",
    "current-jobs-ready",
    "current-jobs-reserved",
    "current-jobs-delayed",
    "current-jobs-buried",
    "current-waiting",
)
#: Enough counters to make a run's mix visible; all start at 0.
COUNTERS = (
    "puts",
    "deletes",
    "reserves",
    "timeouts",
    "deadline_soon",
    "releases",
    "buries",
    "kicks",  # jobs kicked
    "touches",
    "expiries",
    "not_found",
    "abrupt_closes",
    "closes_while_waiting",
    "in_doubt_puts",
    "sessions",
)

_INSERTED = re.compile(rb"INSERTED (\d+)\r\n")
_KICKED = re.compile(rb"KICKED (\d+)\r\n")
_RESERVED = re.compile(rb"RESERVED (\d+) (\d+)\r\n")
_OK = re.compile(rb"OK (\d+)\r\n")
_SUCCESS = {
    "delete": b"DELETED\r\n",
    "release": b"RELEASED\r\n",
    "bury": b"BURIED\r\n",
    "touch": b"TOUCHED\r\n",
}
_COUNTER_OF = {"delete": "deletes", "release": "releases", "bury": "buries", "touch": "touches"}


# --------------------------------------------------------------------------- data


def tube_names(count: int, spread: int = 4) -> list[str]:
    """``count`` tube names, as evenly spread over ``spread`` shards as shardq routes them
    (``crc32(name) % shards``), so also over any divisor of ``spread``. Only the workload's
    spread depends on this, never a check."""
    per = -(-count // spread)
    names: list[str] = []
    used: Counter[int] = Counter()
    for k in itertools.count():
        if len(names) == count:
            return names
        name = f"inv-{k}"
        shard = crc32(name.encode()) % spread
        if used[shard] < per:
            used[shard] += 1
            names.append(name)
    raise AssertionError("unreachable")


def make_body(tube: str, ttr: int, token: str, pad: int) -> bytes:
    return f"{tube}:{ttr}:{token}:".encode() + b"." * pad


def parse_body(body: bytes) -> tuple[str, int] | None:
    """(tube, ttr) named by a body, or None if it is not one of ours."""
    parts = body.split(b":", 3)
    if len(parts) != 4:
        return None
    try:
        return parts[0].decode("ascii"), int(parts[1])
    except (UnicodeDecodeError, ValueError):
        return None


@dataclass
class Hold:
    """One reservation of a job by one connection, as the client saw it."""

    conn: int
    job_id: int
    body: bytes
    ttr: int
    sent: float  #: the reserve was sent (the server reserved the job after this)
    received: float  #: RESERVED was read (the server reserved the job before this)
    base: float  #: the reserve or last successful touch was sent: deadline >= base + ttr
    base_seen: float  #: ...and answered: deadline <= base_seen + ttr (plus timer lateness)
    end_sent: float | None = None  #: ending command sent / socket closed
    how: str = "not ended by its holder"  #: how the hold ended, as far as the client knows

    @property
    def deadline_floor(self) -> float:
        """The earliest moment the server may let the TTR run out."""
        return self.base + self.ttr - EPS

    def may_have_expired(self, at: float) -> bool:
        return at >= self.deadline_floor

    def surely_until(self) -> float:
        """The server held the job for this connection at least until this moment."""
        if self.end_sent is None:
            return self.deadline_floor
        return min(self.end_sent, self.deadline_floor)

    def describe(self, t0: float) -> str:
        return (
            f"conn {self.conn} (reserve sent {self.sent - t0:.3f}, RESERVED read "
            f"{self.received - t0:.3f}, ttr {self.ttr}, surely held until "
            f"{self.surely_until() - t0:.3f}; {self.how})"
        )


@dataclass(frozen=True)
class Op:
    """A successful delete/release/bury/touch: the server did it between sent and received."""

    conn: int
    job_id: int
    what: str
    sent: float
    received: float


def deadline_soon_allowed(held: Mapping[int, Hold], received: float) -> bool:
    """May a reserve answered at ``received`` be DEADLINE_SOON, given the jobs held?"""
    return any(h.deadline_floor <= received + SAFETY_MARGIN for h in held.values())


@dataclass
class Ledger:
    """Everything the clients observed. Mutated under ``lock``; ``room`` (on the same lock)
    is notified on every delete."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    t0: float = field(default_factory=time.monotonic)
    sent: dict[bytes, str] = field(default_factory=dict)  #: every put body sent -> its tube
    acked: dict[int, tuple[str, bytes]] = field(default_factory=dict)  #: id -> (tube, body)
    pending: set[int] = field(default_factory=set)  #: acknowledged, not yet deleted
    holds: dict[int, list[Hold]] = field(default_factory=dict)
    ops: list[Op] = field(default_factory=list)
    deleted: Counter[int] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    counters: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self.room = threading.Condition(self.lock)


def analyze(ledger: Ledger, job_stats: Mapping[int, str] | None = None) -> list[str]:
    """The violations in a finished run's ledger (the live checks' ones come first)."""
    job_stats = job_stats or {}
    problems = list(ledger.violations)
    acked = ledger.acked
    acked_by_body = {body: job_id for job_id, (_, body) in acked.items()}

    # 1. Exactly once.
    for job_id, count in sorted(ledger.deleted.items()):
        if count > 1:
            problems.append(f"job {job_id} deleted {count} times")
    never = sorted(job_id for job_id in acked if ledger.deleted[job_id] == 0)
    if never:
        problems.append(
            f"STRANDED: {len(never)} acknowledged job(s) never deleted: {never[:50]}"
            + (" ..." if len(never) > 50 else "")
        )
        for job_id in never:
            if job_id in job_stats:
                tube = acked[job_id][0]
                problems.append(
                    f"STRANDED job {job_id} (tube {tube}); stats-job: {job_stats[job_id]}"
                )

    # 1. Bodies; ids never acknowledged.
    doubtful: dict[bytes, set[int]] = {}
    for job_id, holds in sorted(ledger.holds.items()):
        bodies = {h.body for h in holds}
        if job_id in acked:
            want = acked[job_id][1]
            if bodies != {want}:
                problems.append(
                    f"job {job_id} was put with body {want[:60]!r} but reserved with "
                    f"{sorted(b[:60] for b in bodies - {want})!r}"
                )
            continue
        for body in bodies:
            other = acked_by_body.get(body)
            if other is not None:
                problems.append(
                    f"job {job_id} (never acknowledged) was reserved with the body of job {other}"
                )
            elif body in ledger.sent:
                doubtful.setdefault(body, set()).add(job_id)
            else:
                problems.append(
                    f"job {job_id} was reserved but never acknowledged, and its body "
                    f"{body[:60]!r} is not that of a put in doubt"
                )
    for body, ids in doubtful.items():
        if len(ids) > 1:
            problems.append(f"one put in doubt ({body[:60]!r}) became jobs {sorted(ids)}")
    for job_id in sorted(set(ledger.deleted) - set(acked) - set(ledger.holds)):
        problems.append(f"job {job_id} was deleted but never acknowledged nor reserved")

    # 2. Exclusive holding.
    t0 = ledger.t0
    for job_id, holds in sorted(ledger.holds.items()):
        for a, b in itertools.combinations(holds, 2):
            if b.received < a.surely_until() and a.received < b.surely_until():
                problems.append(
                    f"job {job_id} reserved twice at once: {a.describe(t0)} and {b.describe(t0)}"
                )
    for op in ledger.ops:
        for h in ledger.holds.get(op.job_id, ()):
            if h.conn != op.conn and h.received < op.sent and op.received < h.surely_until():
                problems.append(
                    f"job {op.job_id}: conn {op.conn} got {op.what} (sent {op.sent - t0:.3f}, "
                    f"answered {op.received - t0:.3f}) while {h.describe(t0)}"
                )
    return problems


@dataclass
class Report:
    """The outcome of one run: no violations means every invariant held."""

    seed: int
    violations: list[str]
    counters: dict[str, int]
    stranded: list[int]
    elapsed: float

    @property
    def ok(self) -> bool:
        return not self.violations

    def counters_line(self) -> str:
        return " ".join(f"{name}={self.counters.get(name, 0)}" for name in COUNTERS)

    def describe(self, limit: int = 40) -> str:
        lines = [f"seed {self.seed}, {self.elapsed:.1f} s: {self.counters_line()}"]
        if self.violations:
            lines.append(f"{len(self.violations)} violation(s):")
            lines += [f"  {v}" for v in self.violations[:limit]]
            if len(self.violations) > limit:
                lines.append(f"  ... and {len(self.violations) - limit} more")
        return "\n".join(lines)


# --------------------------------------------------------------------------- wire


class LinkError(Exception):
    """A connection failed: no reply in time, or the server closed it / refused it."""

    def __init__(self, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out  #: False: the server closed (or reset) the connection


class Link:
    """A blocking beanstalk connection on a plain socket; every read has a deadline."""

    def __init__(self, port: int, conn: int) -> None:
        self.conn = conn
        self.closed = False
        try:
            self.sock = connect(port)
        except OSError as exc:
            raise LinkError(f"connect failed: {exc!r}") from exc

    def send(self, data: bytes) -> float:
        """Send ``data``; return the time just before sending."""
        at = time.monotonic()
        try:
            send(self.sock, data)
        except OSError as exc:  # a timeout would mean a full window: the server is stuck
            raise LinkError(
                f"sending {data[:60]!r}: {exc!r}", timed_out=isinstance(exc, TimeoutError)
            ) from exc
        return at

    def read(self, n: int, timeout: float = READ_DEADLINE) -> tuple[list[bytes], float]:
        """Read ``n`` reply units; return them and the time just after reading."""
        try:
            replies = read_replies(self.sock, n, timeout)
        except ProtocolTimeout as exc:
            raise LinkError(str(exc), timed_out=True) from exc
        except (UnexpectedEOF, OSError) as exc:
            raise LinkError(f"connection lost: {exc}") from exc
        return replies, time.monotonic()

    def call(
        self, data: bytes, n: int = 1, timeout: float = READ_DEADLINE
    ) -> tuple[float, list[bytes], float]:
        sent = self.send(data)
        try:
            replies, received = self.read(n, timeout)
        except LinkError as exc:
            raise LinkError(f"{data[:60]!r}: {exc}", timed_out=exc.timed_out) from exc
        return sent, replies, received

    def close(self, reset: bool = False) -> float:
        """Close (with RST if ``reset``); return the time just before closing."""
        at = time.monotonic()
        if not self.closed:
            self.closed = True
            if reset:
                with contextlib.suppress(OSError):
                    self.sock.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                    )
            self.sock.close()
        return at


def parse_stats(reply: bytes) -> dict[str, str]:
    header, _, rest = reply.partition(b"\r\n")
    if _OK.fullmatch(header + b"\r\n") is None:
        raise ValueError(f"not an OK reply: {reply[:100]!r}")
    text = rest[:-2].decode(errors="replace")
    return dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)


# --------------------------------------------------------------------------- consumer


class Session:
    """One consumer connection: its watch list and the jobs it holds."""

    def __init__(self, wl: Workload, rng: random.Random, role: str) -> None:
        self.wl = wl
        self.rng = rng
        self.role = role
        self.link = Link(wl.port, next(wl.conn_ids))
        self.conn = self.link.conn
        self.watch: set[str] = {"default"}
        self.held: dict[int, Hold] = {}
        self.expiring: dict[int, float] = {}  #: held jobs left to expire -> when to act again
        self.may_expire = True  #: may leave one more job to expire
        wl.count("sessions")

    def fail(self, message: str) -> None:
        self.wl.violation(f"conn {self.conn} ({self.role}): {message}")

    # ----------------------------------------------------------- setup
    def watch_tubes(self, tubes: list[str], ignore_default: bool) -> None:
        cmds, wanted = [], []
        for tube in tubes:
            self.watch.add(tube)
            cmds.append(b"watch %s\r\n" % tube.encode())
            wanted.append(b"WATCHING %d\r\n" % len(self.watch))
        if ignore_default:
            self.watch.discard("default")
            cmds.append(b"ignore default\r\n")
            wanted.append(b"WATCHING %d\r\n" % len(self.watch))
        _, replies, _ = self.link.call(b"".join(cmds), len(cmds))
        for cmd, reply, want in zip(cmds, replies, wanted, strict=True):
            if reply != want:
                self.fail(f"{cmd!r} answered {reply!r}, expected {want!r}")

    # ----------------------------------------------------------- reserve
    def reserve(self, timeout: int | None) -> str:
        """One reserve: 'job', 'timeout', 'soon', 'abandoned' or 'bad'."""
        cmd = b"reserve\r\n" if timeout is None else b"reserve-with-timeout %d\r\n" % timeout
        sent = self.link.send(cmd)
        try:
            [reply], received = self.link.read(
                1, BLOCKING_WAIT if timeout is None else timeout + 4.0
            )
        except LinkError as exc:
            if timeout is None and exc.timed_out:
                self.close(reset=self.rng.random() < 0.5, how="closed while reserve waits")
                self.wl.count("closes_while_waiting")
                return "abandoned"
            raise LinkError(f"{cmd!r}: {exc}", timed_out=exc.timed_out) from exc
        if reply == b"TIMED_OUT\r\n":
            self.wl.count("timeouts")
            if timeout is None:
                self.fail("a blocking reserve answered TIMED_OUT")
            return "timeout"
        if reply == b"DEADLINE_SOON\r\n":
            self.wl.count("deadline_soon")
            if not deadline_soon_allowed(self.held, received):
                t0 = self.wl.ledger.t0
                self.fail(
                    f"{cmd!r} answered DEADLINE_SOON at {received - t0:.3f} but no held job is "
                    f"within {SAFETY_MARGIN} s of its deadline: "
                    + (", ".join(f"{i}: {h.describe(t0)}" for i, h in self.held.items()) or "none")
                )
            return "soon"
        header, _, rest = reply.partition(b"\r\n")
        match = _RESERVED.fullmatch(header + b"\r\n")
        if match is None or len(rest) != int(match.group(2)) + 2 or not rest.endswith(b"\r\n"):
            self.fail(f"{cmd!r} answered {reply[:100]!r}")
            return "bad"
        job_id, body = int(match.group(1)), rest[:-2]
        parsed = parse_body(body)
        if parsed is None:
            self.fail(f"job {job_id} has a body that is not ours: {body[:60]!r}")
            tube, ttr = "?", TTR_RANGE[0]
        else:
            tube, ttr = parsed
            if tube not in self.watch:
                self.fail(f"got job {job_id} of tube {tube} but watches {sorted(self.watch)}")
        old = self.held.pop(job_id, None)
        self.expiring.pop(job_id, None)
        if old is not None:  # its TTR ran out and we got it again: the analysis checks that
            old.how = "TTR (reserved again by the same connection)"
        hold = Hold(self.conn, job_id, body, ttr, sent, received, sent, received)
        self.held[job_id] = hold
        self.wl.record_hold(hold)
        return "job"

    # ----------------------------------------------------------- act on a held job
    def act(self, hold: Hold, what: str) -> None:
        job_id = hold.job_id
        if what == "release":
            pri, delay = self.rng.choice(PRIORITIES), self.rng.choice((0, 0, 1))
            cmd = b"release %d %d %d\r\n" % (job_id, pri, delay)
        elif what == "bury":
            cmd = b"bury %d %d\r\n" % (job_id, self.rng.choice(PRIORITIES))
        else:
            cmd = b"%s %d\r\n" % (what.encode(), job_id)
        sent, [reply], received = self.link.call(cmd)
        if reply == _SUCCESS[what]:
            self.wl.record_op(Op(self.conn, job_id, reply[:-2].decode(), sent, received), what)
            if what == "touch":
                hold.base, hold.base_seen = sent, received
                return
            hold.end_sent, hold.how = sent, what
            self.forget(job_id)
            return
        # Whatever else it says, the job is no longer ours.
        self.forget(job_id)
        hold.end_sent, hold.how = sent, f"{what} -> {reply[:20]!r}"
        if reply == b"NOT_FOUND\r\n":
            self.wl.count("not_found")
            if not hold.may_have_expired(received):
                t0 = self.wl.ledger.t0
                self.fail(
                    f"{cmd!r} answered NOT_FOUND at {received - t0:.3f}, but the job's TTR "
                    f"cannot have run out before {hold.deadline_floor - t0:.3f}: "
                    f"{hold.describe(t0)}"
                )
            return
        self.fail(f"{cmd!r} of a held job answered {reply[:100]!r}")

    def forget(self, job_id: int) -> None:
        self.held.pop(job_id, None)
        self.expiring.pop(job_id, None)

    def handle_one(self, eligible: list[Hold]) -> None:
        """Do something with one held job."""
        hold = self.rng.choice(eligible)
        if self.expiring.pop(hold.job_id, None) is not None:
            # Its TTR has surely run out: it may be gone, or someone else's by now.
            self.wl.count("expiries")
            self.act(hold, self.rng.choice(("delete", "delete", "release", "bury", "touch")))
            return
        r = self.rng.random()
        if r < 0.60:
            self.act(hold, "delete")
        elif r < 0.75:
            self.act(hold, "release")
        elif r < 0.83:
            self.act(hold, "bury")
        elif r < 0.97 or not self.may_expire:
            self.act(hold, "touch")
        else:
            # Keep it, untouched, until its TTR has surely run out (the server's deadline is
            # at most base_seen + ttr); meanwhile reserve and handle other jobs.
            self.expiring[hold.job_id] = hold.base_seen + hold.ttr + EXPIRE_MARGIN

    def eligible(self) -> list[Hold]:
        """Held jobs to act on now: all but those left to expire whose time has not come."""
        now = time.monotonic()
        return [h for i, h in self.held.items() if self.expiring.get(i, now) <= now]

    # ----------------------------------------------------------- sessions
    def work(self) -> None:
        """A load-phase session: watch some tubes, reserve and handle jobs, then leave."""
        rng = self.rng
        tubes = rng.sample(self.wl.tubes, rng.randint(1, min(5, len(self.wl.tubes))))
        self.watch_tubes(tubes, ignore_default=rng.random() < 0.7)
        idle, urgent = 0, False
        steps = rng.randint(10, 60)
        while (steps > 0 or self.expiring) and not self.wl.load_over.is_set():
            steps -= 1
            self.may_expire = steps > 0  # past its last step, a session only waits for expiries
            eligible = self.eligible()
            if eligible and (urgent or len(eligible) >= MAX_HELD or rng.random() < 0.55):
                self.handle_one(eligible)
                urgent = urgent and bool(self.held)
                continue
            if urgent and self.expiring:
                # Only jobs left to expire are near their deadline, so every reserve would
                # answer DEADLINE_SOON at once until the first of them is due.
                due = min(self.expiring.values())
                self.wl.load_over.wait(max(0.0, due - time.monotonic()))
                continue
            urgent = False
            blocking = not self.held and rng.random() < 0.05
            outcome = self.reserve(None if blocking else rng.choice((0, 1, 1, 1)))
            if outcome == "abandoned":
                return
            urgent = outcome == "soon"
            idle = idle + 1 if outcome == "timeout" else 0
            if idle >= 3 and not self.expiring:
                break  # nothing for this watch list lately
        self.leave()

    def leave(self) -> None:
        r = self.rng.random()
        reset = self.rng.random() < 0.5
        if r < 0.12:
            # Leave while a reserve waits: a job handed over now must not be lost.
            self.link.send(b"reserve-with-timeout 5\r\n")
            self.wl.count("closes_while_waiting")
            self.close(reset=reset, how="closed while reserve waits")
        elif self.held and r < 0.35:
            self.wl.count("abrupt_closes")
            self.close(reset=reset, how="closed abruptly")
        else:
            while self.held:
                self.act(next(iter(self.held.values())), self.rng.choice(("delete", "release")))
            self.close(reset=False, how="closed")

    def drain(self) -> None:
        """Watch every tube, kick them all, then reserve and delete until told to stop."""
        self.watch_tubes(self.wl.tubes, ignore_default=True)
        self.wl.kick_all(self.link, self.fail)
        while not self.wl.drain_over.is_set():
            if self.reserve(1) == "job":
                while self.held:
                    self.act(next(iter(self.held.values())), "delete")
        self.close(reset=False, how="closed")

    def close(self, reset: bool, how: str) -> None:
        at = self.link.close(reset)
        for hold in self.held.values():
            hold.end_sent, hold.how = at, how
        self.held.clear()
        self.expiring.clear()

    def lost(self, exc: LinkError) -> None:
        """The connection failed. If the server dropped it, it may have released our jobs at
        any moment, so they are only surely held until their RESERVED reply."""
        if not exc.timed_out:
            for hold in self.held.values():
                hold.end_sent, hold.how = hold.received, "connection lost"
            self.held.clear()
        self.close(reset=True, how="connection given up (no reply)")


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
