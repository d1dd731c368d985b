"""`limits.max_jobs` and `limits.max_memory`: one exact count for the whole server.

Jobs live in several shards in several processes, and the limit is on their sum: the 101st
put of a server with ``--max-jobs 100`` is refused whichever shard it goes to, and a delete
anywhere makes room at once. The counts live in an anonymous shared mapping the supervisor
makes before it forks its children, so every process (a restarted one too) sees the same
memory; a lock (a POSIX semaphore, also inherited) makes "is there room? take it" one step.

Layout, int64 each: the two limits (0: none), the server's totals (jobs, bytes), puts
refused, then per shard what it holds (jobs, bytes). A shard *takes* room before a put
(`admit`: the totals and its own part grow together, under the lock) and *settles* at the
end of each turn (`settle`: its part set to what its engine really holds, the totals moved
by the difference). So deletes give room back by the end of their turn, before their
replies leave; a put resent after a restart that the engine already had is evened out
there; and a shard that restarted settles to what it recovered, which also drops whatever
its previous life held. Recovered jobs are kept even past the limit (puts are refused until
deletes bring the server under it).

Memory is counted as job bodies plus `JOB_OVERHEAD_BYTES` a job: measured with 50,000 puts
(10 B and 1,000 B bodies, 1 and 4 shards), the server's RSS grew 430–460 B a job beyond
its body.

A process killed while it holds the lock (a few microseconds, but SIGKILL can land there)
would leave it held: a wait longer than `LOCK_STALE_S` takes the lock over, with a warning.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
from typing import Any

from shardq.config import FIELDS
from shardq.processes.common.live import Change

log = logging.getLogger(__name__)

JOB_OVERHEAD_BYTES = 512  #: what a job costs the server besides its body (see above)
LOCK_STALE_S = 1.0  #: a lock held this long belongs to a process that died holding it
WORD = 8
MAX_JOBS, MAX_BYTES, JOBS, BYTES, REFUSED = range(5)  #: the server-wide words
HEAD = 5  #: then two words a shard: (jobs, bytes)


def job_bytes(body_len: int) -> int:
    """What one job of `body_len` body bytes counts against `max_memory`."""
    return body_len + JOB_OVERHEAD_BYTES


class Quota:
    """The shared counts; made once, before the fork, and used by every process."""

    def __init__(self, max_jobs: int, max_bytes: int, shards: int) -> None:
        self.shards = shards
        self.area = mmap.mmap(-1, WORD * (HEAD + 2 * shards))  # MAP_SHARED|MAP_ANONYMOUS
        self.words = memoryview(self.area).cast("q")
        self.words[MAX_JOBS] = max_jobs
        self.words[MAX_BYTES] = max_bytes
        import multiprocessing  # only with a limit: ≈ 3 ms of imports at every start otherwise

        self.lock = multiprocessing.get_context("fork").Lock()

    def _acquire(self) -> None:
        if not self.lock.acquire(timeout=LOCK_STALE_S):
            log.warning("quota: lock held for %.0f s, taken over (its holder died)", LOCK_STALE_S)
            with contextlib.suppress(ValueError):  # released meanwhile
                self.lock.release()
            self.lock.acquire()

    def admit(self, shard: int, nbytes: int, jobs: int = 1) -> bool:
        """Take room for `jobs` jobs of `nbytes` each (`job_bytes`: a put and its fanout
        copies) for `shard`; False if either limit would be passed (the put is answered
        OUT_OF_MEMORY)."""
        w = self.words
        total = nbytes * jobs
        self._acquire()
        try:
            max_jobs, max_bytes = w[MAX_JOBS], w[MAX_BYTES]
            if (max_jobs and w[JOBS] + jobs > max_jobs) or (
                max_bytes and w[BYTES] + total > max_bytes
            ):
                w[REFUSED] += 1
                return False
            slot = HEAD + 2 * shard
            w[JOBS] += jobs
            w[BYTES] += total
            w[slot] += jobs
            w[slot + 1] += total
            return True
        finally:
            self.lock.release()

    def settle(self, shard: int, jobs: int, nbytes: int) -> None:
        """`shard` holds `jobs` jobs of `nbytes` (`job_bytes` summed) now; cheap when
        nothing changed since the last admit or settle (no lock)."""
        w = self.words
        slot = HEAD + 2 * shard
        if w[slot] == jobs and w[slot + 1] == nbytes:
            return
        self._acquire()
        try:
            w[JOBS] += jobs - w[slot]
            w[BYTES] += nbytes - w[slot + 1]
            w[slot] = jobs
            w[slot + 1] = nbytes
        finally:
            self.lock.release()

    def fields(self) -> dict[str, Any]:
        """The `stats` keys of these limits (read without the lock: a snapshot)."""
        w = self.words
        return {
            "limit-max-jobs": w[MAX_JOBS],
            "limit-max-memory": w[MAX_BYTES],
            "limit-jobs": w[JOBS],
            "limit-memory": w[BYTES],
            "limit-puts-refused": w[REFUSED],
        }

    def set_limits(self, max_jobs: int, max_bytes: int) -> None:
        """New limits (a SIGHUP); jobs already past a lowered one stay, puts wait for room."""
        self.words[MAX_JOBS] = max_jobs
        self.words[MAX_BYTES] = max_bytes


#: The Config fields of the limits kept here.
LIMIT_FIELDS = ("max_jobs", "max_memory")


def reload(refused: list[Change], new: Any) -> tuple[list[Change], list[Change]]:
    """Of the changes a SIGHUP found that processes cannot take (`refused`), apply here
    those of the limits when a quota exists (the counts are shared: writing them is enough).
    Returns (applied, still refused). Without a quota (no limit at start) they need a
    restart: the children were forked without one."""
    if inherited is None:
        return [], refused
    keys = {FIELDS[name][0] for name in LIMIT_FIELDS}  # as the config file names them
    applied = [change for change in refused if change[0] in keys]
    if applied:
        inherited.set_limits(new.max_jobs, new.max_memory)
    return applied, [change for change in refused if change[0] not in keys]


#: The server's quota, made by the supervisor before it forks (None: no limit configured).
inherited: Quota | None = None


def install(max_jobs: int, max_bytes: int, shards: int) -> Quota | None:
    """In the supervisor, before any fork: the quota every child will find in `inherited`."""
    global inherited
    inherited = Quota(max_jobs, max_bytes, shards) if (max_jobs or max_bytes) else None
    return inherited
