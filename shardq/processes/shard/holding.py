"""What a shard holds back: reserves while a restarted shard settles (processes/shard/settling.py)
and while a close's tubes are held (processes/shard/closing.py); the ShardCore methods that hold
them and let them go."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from shardq.cluster.routing import origin_of
from shardq.engine.engine import CANCELLED
from shardq.processes.shard import ops
from shardq.processes.shard.closing import Closing
from shardq.processes.shard.ops import HANDLERS
from shardq.processes.shard.settling import Settling

if TYPE_CHECKING:
    from shardq.engine.engine import Engine

log = logging.getLogger("shardq.processes.shard.core")

Outbox = dict[bytes, list[Any]]  #: peer identity -> replies for it, in order


class Holding:
    """ShardCore's part that holds requests back (a mixin: the attributes are ShardCore's)."""

    index: int
    engine: Engine
    settling: Settling | None
    closing: Closing

    if TYPE_CHECKING:

        def apply(self, peer: bytes, req: list[Any], now: int) -> list[Any] | None: ...

        def handle_into(self, peer: bytes, req: list[Any], now: int, out: Outbox) -> None: ...

    def while_settling(self, settling: Settling, peer: bytes, req: list[Any]) -> list[Any] | None:
        """A request that settling changes: a reserve is held, a cancel may withdraw a held
        reserve, a close or a restarted serving process drops theirs, SETTLED counts."""
        op, rid, conn = req[0], req[1], req[2]
        if op in (ops.RESERVE, ops.RESERVE_JOB):
            settling.held.add(peer, req)
            return None  # answered when settled (a waiter's answer comes the same way)
        if op == ops.SETTLED:
            settling.settled(conn)
            return None
        if op == ops.CANCEL and settling.held.drop_rid(rid):
            return [CANCELLED]
        if op == ops.DISCONNECT:
            settling.held.drop_conn(conn)
        elif op == ops.RESET:
            settling.drop_origin(origin_of(conn))
        self.settling = None  # apply it as usual
        try:
            return self.apply(peer, req, time.monotonic_ns())
        finally:
            self.settling = settling

    def while_closing(self, op: int, rid: int, conn: int, now: int) -> list[Any] | None:
        """UNHOLD: the close's tubes open; RESET: a restarted serving process's holds end
        (and its connections go, as usual)."""
        if op == ops.UNHOLD:
            self.closing.unhold(self.engine, conn, now)
            return None
        self.closing.reset(self.engine, origin_of(conn), now)
        return HANDLERS[op](self.engine, conn, [], now)

    def end_holds(self, now: int, out: Outbox) -> None:
        """Holds past their time end; the requests deferred by ended holds run again."""
        for peer, req in self.closing.runnable(self.engine, now):
            self.handle_into(peer, req, now, out)

    def release_held(self, now: int, out: Outbox) -> None:
        """Settled: the held requests run now, in the order they came."""
        settling, self.settling = self.settling, None
        assert settling is not None
        log.info("shard %d: settled; %d held reserve(s) run now", self.index, len(settling.held))
        for peer, req in settling.held.take():
            self.handle_into(peer, req, now, out)
