"""Job timings for the metrics endpoint: put → reserve wait and reserve → delete run time per
tube, and the write-ahead log's fsync latency, in fixed-bucket histograms.

Only a shard of a server started with ``metrics.listen`` has a `Timing` (the engine's
`timing`, None otherwise, so a server without metrics pays one ``is not None`` test per job
event). Recording is a `bisect` into a tuple of bounds and two additions.

Definitions, as the analytics pipeline's (shardq/pipeline/metrics.py):

* wait: first reserve − (put + delay), at least 0 (a delayed job kicked early waited 0);
* run: delete − last reserve, for a job deleted while reserved (by its holder).

A reserved job's last reserve time is its TTR deadline minus its TTR; only a touched job
(its deadline moved) has it kept here by id, until it is deleted, released, buried or timed
out (one freed by a closing connection stays until it is touched again or deleted). The
job itself stays as small as it is.

`snapshot` is what a shard answers the metrics process (plain lists, msgpack-friendly).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from typing import Any

from shardq.engine.job import ID_MASK, NS, ST_RESERVED, Job

#: upper bounds (seconds) of the wait and run buckets; one more bucket holds the rest (+Inf)
JOB_BOUNDS_S = (
    0.001,
    0.005,
    0.01,
    0.05,
    0.1,
    0.5,
    1.0,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
    900.0,
    3600.0,
)
#: upper bounds (seconds) of the fsync latency buckets
FSYNC_BOUNDS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0)
#: tubes with histograms of their own; later tubes share OTHER_TUBE (bounded memory when
#: clients make tubes without end)
MAX_TUBES = 1000
#: events after which a job is no longer reserved (delete is handled apart)
FORGET = frozenset(("release", "bury", "timeout"))
OTHER_TUBE = "*other*"  #: not a valid tube name (beanstalk names have no "*"): no clash


class Histogram:
    """Counts per bucket (``counts[i]``: values ≤ ``bounds[i]``, the last: the rest) and the
    sum, in nanoseconds."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds_s: tuple[float, ...]) -> None:
        self.bounds = tuple(round(b * NS) for b in bounds_s)
        self.counts = [0] * (len(bounds_s) + 1)
        self.total = 0

    def observe(self, ns: int) -> None:
        self.counts[bisect_left(self.bounds, ns)] += 1
        self.total += ns

    def snapshot(self) -> list[Any]:
        """[per-bucket counts (not cumulative), sum in ns]."""
        return [list(self.counts), self.total]


class Timing:
    """The histograms of one shard; `note` is called by the engine for every job event."""

    def __init__(self) -> None:
        self.wait: dict[str, Histogram] = {}
        self.run: dict[str, Histogram] = {}
        #: job id -> monotonic ns of its last reserve, for a reserved job that was touched
        #: (the others' is their TTR deadline minus their TTR)
        self.touched: dict[int, int] = {}
        self.fsync = Histogram(FSYNC_BOUNDS_S)
        #: what the process shell adds to a snapshot (the write-ahead log's byte counts)
        self.extra: Callable[[], dict[str, int]] | None = None

    def _of(self, table: dict[str, Histogram], tube: str) -> Histogram:
        hist = table.get(tube)
        if hist is None:
            if len(table) >= MAX_TUBES:
                tube = OTHER_TUBE
                hist = table.get(tube)
            if hist is None:
                hist = table[tube] = Histogram(JOB_BOUNDS_S)
        return hist

    def note(self, now: int, event: str, job: Job) -> None:
        """A job event (the engine's `_note`): see the module's definitions. Kept lean: it
        runs for every put, reserve and delete of a server with metrics on (the histogram's
        `observe` is inlined)."""
        if event == "reserve":
            if self.touched:  # touched in an earlier reservation its holder left
                self.touched.pop(job.id, None)
            if job.dur >> 128 & ID_MASK == 1:  # its first reserve (the count is 1 already)
                waited = now - job.created - (job.dur >> 64 & ID_MASK) * NS  # the delay
                if waited < 0:
                    waited = 0
                hist = self.wait.get(job.tube) or self._of(self.wait, job.tube)
                hist.counts[bisect_left(hist.bounds, waited)] += 1
                hist.total += waited
        elif event == "delete":
            if job.state == ST_RESERVED:
                at = self.touched.pop(job.id, None) if self.touched else None
                if at is None:  # its deadline is reserve time + TTR
                    at = job.deadline - (job.dur & ID_MASK) * NS
                ran = now - at
                hist = self.run.get(job.tube) or self._of(self.run, job.tube)
                hist.counts[bisect_left(hist.bounds, ran)] += 1
                hist.total += ran
        elif event == "touch":  # noted before the deadline moves: keep the reserve time
            self.touched.setdefault(job.id, job.deadline - (job.dur & ID_MASK) * NS)
        elif self.touched and event in FORGET:
            self.touched.pop(job.id, None)

    def timed_sync(
        self, sync: Callable[[int], None], clock: Callable[[], int]
    ) -> Callable[[int], None]:
        """`sync` (an fsync) that records how long each call took into `fsync`."""
        observe = self.fsync.observe

        def sync_and_time(fd: int) -> None:
            started = clock()
            sync(fd)
            observe(clock() - started)

        return sync_and_time

    def snapshot(self) -> dict[str, Any]:
        """{"wait": {tube: hist}, "run": {tube: hist}, "fsync": hist, **extra}."""
        return {
            "wait": {tube: h.snapshot() for tube, h in self.wait.items()},
            "run": {tube: h.snapshot() for tube, h in self.run.items()},
            "fsync": self.fsync.snapshot(),
            **(self.extra() if self.extra is not None else {}),
        }
