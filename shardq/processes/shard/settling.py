"""A restarted shard waits for the jobs held before its crash to be claimed again.

The log does not record reservations, so a shard that restarts has every job that was
reserved at the crash ready again. Each serving process re-reserves the jobs its live
connections still hold (REASSERT, sent first when it sees the shard come back) — but the
serving processes reach the shard in no particular order, and a reserve from one of them
could take a job another's client still holds before that one's REASSERT arrives: the job
would run twice (seen in the crash test with 4 shards and 2 serving processes).

So a restarted shard *settles* first: requests that hand out jobs (RESERVE, RESERVE_JOB)
are held, in arrival order, until every serving process that may hold jobs of it has sent
SETTLED (after its REASSERTs), or SETTLE_S has passed (a serving process that is itself
gone has nothing to claim). Everything else — puts, deletes, releases of held jobs, stats —
is applied at once. A held reserve that is cancelled (timeout, client gone) meanwhile is
dropped, so nothing is handed to a reserver that went away.
"""

from __future__ import annotations

from shardq.cluster.routing import origin_of
from shardq.processes.shard.held import HeldRequests

SETTLE_S = 2.0  #: the longest a restarted shard holds reserves for a silent serving process
SETTLE_NS = int(SETTLE_S * 1e9)


class Settling:
    """Held requests of a restarted shard, and the serving processes it still waits for."""

    def __init__(self, origins: set[int], now: int) -> None:
        self.waiting_for = set(origins)
        self.until = now + SETTLE_NS
        self.held = HeldRequests()

    def settled(self, conn: int) -> None:
        """SETTLED from the serving process that `conn` (its index) names."""
        self.waiting_for.discard(origin_of(conn))

    def done(self, now: int) -> bool:
        return not self.waiting_for or now >= self.until

    def drop_origin(self, origin: int) -> None:
        """A restarted serving process's held requests go with it (RESET); it has nothing
        left to claim either."""
        self.held.drop_origin(origin)
        self.waiting_for.discard(origin)
