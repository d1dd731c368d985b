"""What a shard holds back: reserves while a restarted shard settles (processes/shard/settling.py)
and while a close's tubes are held (processes/shard/closing.py); the ShardCore methods that hold
them and drop them with the waiter, connection or serving process that went away (CANCEL,
DISCONNECT, RESET). Letting them go is part of every turn: `Direct.take_events`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from shardq.cluster.routing import origin_of
from shardq.cluster.wire import Request
from shardq.processes.shard.closing import Closing
from shardq.processes.shard.settling import Settling

if TYPE_CHECKING:
    from shardq.engine.engine import Engine


#: a reply as the shard builds it: a plain (rid, payload) pair, read as `wire.Reply`
Answered = tuple[int, Sequence[Any]]
Outbox = dict[bytes, list[Answered]]  #: peer identity -> replies for it, in order


class Holding:
    """ShardCore's part that holds requests back (a mixin: the attributes are ShardCore's)."""

    index: int
    engine: Engine
    settling: Settling | None
    closing: Closing
    waiting_peer: dict[int, bytes]

    if TYPE_CHECKING:

        def handle_into(self, peer: bytes, req: Request, now: int, out: Outbox) -> None: ...

    def holds(self, peer: bytes, req: Request) -> bool:
        """Must this request, which hands out a job (`Op.held`), wait? While the shard
        settles, every such request is held until settled; while a close holds tubes, one
        that would take from a held tube is deferred until UNHOLD."""
        if self.settling is not None:
            self.settling.held.add(peer, req)
            return True
        if self.closing.holds and self.closing.defers(self.engine, req):
            self.closing.deferred.add(peer, req)
            return True
        return False

    def cancel(self, rid: int) -> None:
        """The waiter `rid` withdrawn (CANCEL), held or not: no offer of it follows."""
        if self.settling is not None and self.settling.held.drop_rid(rid):
            return
        if self.closing.deferred.drop_rid(rid):
            return
        if self.engine.cancel(rid):
            self.waiting_peer.pop(rid, None)
        # else the waiter was served: its event still needs the peer (route_events)

    def disconnect(self, conn: int, hold: bool, now: int) -> None:
        """`conn` closed (DISCONNECT): its held requests and waiters go quietly (forget whom
        they answered to), its jobs are ready again; with `hold`, their tubes closed until
        UNHOLD."""
        if self.settling is not None:
            self.settling.held.drop_conn(conn)
        engine = self.engine
        for rid in [r for r, w in engine.waiters.items() if w.conn == conn]:
            self.waiting_peer.pop(rid, None)
        self.closing.deferred.drop_conn(conn)
        if hold:
            self.closing.hold(conn, engine.disconnect(conn, now, hold=True), now)
        else:
            engine.disconnect(conn, now)

    def reset(self, origin: int, now: int) -> None:
        """Serving process `origin` restarted (RESET): its held requests and holds end, its
        connections are forgotten."""
        if self.settling is not None:
            self.settling.drop_origin(origin)
        self.closing.reset(self.engine, origin, now)
        forget_origin(self.engine, origin, now)


def forget_origin(engine: Engine, origin: int, now: int) -> None:
    """The connections of serving process `origin` are gone: their jobs, waiters and
    tube references with them."""

    def belongs(conn_id: int) -> bool:
        return origin_of(conn_id) == origin

    engine.forget_connections(now, origin, belongs)
