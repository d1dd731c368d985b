"""A connection that held jobs on several shards closes: its jobs come back together.

beanstalkd makes every job of a closing connection ready in one step. Here each shard that
holds some of them hears of the close on its own, in no order: shard 1 could make job 1
ready and hand it to a waiting client, and that client's `stats-job` of job 2 could reach
shard 2 before shard 2 has heard of the close — job 2 still `reserved`, which beanstalkd
never shows (seen in the differential suite with 4 shards and 2 serving processes).

So the serving process sends each of those shards DISCONNECT with *hold*: the shard makes
the jobs ready at once (stats and peeks see them ready) but keeps the tubes they went back
to closed to reserves, as if paused, and answers. When every shard has answered, the
serving process sends UNHOLD: the tubes open, their waiters are served (the oldest first,
the best job first), and the reserves that came for those tubes meanwhile — held here, in
arrival order — run. Whoever gets one of the jobs then finds every other one ready.

A hold lasts one round trip. If the serving process dies between the two steps, its
restart (RESET) ends its holds; HOLD_S ends any hold that is never lifted.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from shardq.cluster.routing import origin_of
from shardq.cluster.wire import Request
from shardq.processes.shard.held import HeldRequests
from shardq.processes.shard.optable import OPS

if TYPE_CHECKING:
    from shardq.engine.engine import Engine

log = logging.getLogger(__name__)

HOLD_S = 1.0  #: the longest a close holds its tubes if its UNHOLD never comes
HOLD_NS = int(HOLD_S * 1e9)


class Hold:
    __slots__ = ("tubes", "until")

    tubes: list[str]  # the tubes the closed connection's jobs went back to
    until: int  # monotonic ns: lifted by then whatever happens

    def __init__(self, tubes: list[str], until: int) -> None:
        self.tubes = tubes
        self.until = until


class Closing:
    """One shard's held closes, and the reserves that wait for their tubes to open
    (compiled, a C struct, closing.pxd: every turn of the shard asks whether any is held)."""

    holds: dict[int, Hold]
    deferred: HeldRequests
    lifted: bool

    def __init__(self) -> None:
        self.holds = {}  # connection id -> its hold
        self.deferred = HeldRequests()  # reserves that would take from a held tube
        self.lifted = False  # a hold ended: deferred requests may run

    def hold(self, conn: int, tubes: list[str], now: int) -> None:
        if tubes:
            self.holds[conn] = Hold(tubes, now + HOLD_NS)

    def unhold(self, engine: Engine, conn: int, now: int) -> None:
        """UNHOLD: the close's tubes open (nothing if its hold had ended already)."""
        hold = self.holds.pop(conn, None)
        if hold is not None:
            self.lifted = True
            engine.unhold(hold.tubes, now)

    def reset(self, engine: Engine, origin: int, now: int) -> None:
        """A restarted serving process (RESET): its deferred requests go, its holds end."""
        self.deferred.drop_origin(origin)
        for conn in [c for c in self.holds if origin_of(c) == origin]:
            self.unhold(engine, conn, now)

    def runnable(self, engine: Engine, now: int) -> list[tuple[bytes, Request]]:
        """Holds past HOLD_S end; if any hold ended, the deferred requests, all of them, in
        order (one that meets a tube still held is deferred again when it runs)."""
        for conn in [c for c, hold in self.holds.items() if hold.until <= now]:
            log.warning("a close's hold ended unconfirmed after %.1f s", HOLD_S)
            self.unhold(engine, conn, now)
        if not self.lifted:
            return []
        self.lifted = False
        return self.deferred.take()

    def next_until(self) -> int | None:
        if not self.holds:  # the common case, asked every turn of the loop
            return None
        return min(hold.until for hold in self.holds.values())

    def defers(self, engine: Engine, req: Request) -> bool:
        """Must this request, which hands out a job, wait? It would take from a held tube
        (the tubes its op's declaration names: `Op.held`, ops.py)."""
        op = OPS[req.op]
        assert op.held is not None, op.name
        names = op.held(engine, op.make(req.args))
        tubes = engine.tubes
        return any(name in tubes and tubes[name].held for name in names)
