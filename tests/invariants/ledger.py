"""What the clients observed and the checks over it (see workload.py for the invariants
and why each check is sound): constants, holds, the ledger, `analyze`, the report."""

from __future__ import annotations

import itertools
import re
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from helpers import shard_of_tube

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
    (``helpers.shard_of_tube``), so also over any divisor of ``spread``. Only the workload's
    spread depends on this, never a check."""
    per = -(-count // spread)
    names: list[str] = []
    used: Counter[int] = Counter()
    for k in itertools.count():
        if len(names) == count:
            return names
        name = f"inv-{k}"
        shard = shard_of_tube(name, spread)
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
