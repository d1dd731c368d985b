"""The shard ops that need more than the engine, with the shapes of their arguments: each
handler takes the whole core (its waiting reserves' peers, held requests, settling, a
close's hold) and is declared in ops.py with ``core=``."""

from __future__ import annotations

import resource
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from shardq.cluster.routing import origin_of
from shardq.engine.engine import CANCELLED, WAITING, Engine
from shardq.protocol import proto, replies

if TYPE_CHECKING:
    from shardq.processes.shard.core import ShardCore

Payload = Sequence[Any]  #: a reply's payload, named by the op's reply shape


class NoArgs(NamedTuple):
    """An op with no arguments (`conn` may name a serving process: RESET, SETTLED)."""


class PutArgs(NamedTuple):
    job_id: int
    seq: int  #: put order (wall-clock ns, strictly increasing)
    tube: str
    pri: int
    delay: int
    ttr: int
    body: bytes


def put(core: ShardCore, peer: bytes, rid: int, conn: int, a: PutArgs, now: int) -> Payload:
    """Admitted (`ShardCore.admit`): the engine's answer; else OUT_OF_MEMORY, not taken."""
    if not core.admit(a.tube, len(a.body)):
        return [proto.OUT_OF_MEMORY]
    taken = core.engine.put(a.job_id, a.seq, a.tube, a.pri, a.delay, a.ttr, a.body, now)
    return [replies.put_reply(a.job_id, taken)]


class ReserveArgs(NamedTuple):
    tubes: list[str]
    timeout_at: int | None
    soon_at: int | None
    offer: bool  #: offer mode: a reserve across shards (docs/ARCHITECTURE.md, "Offers")


def reserve(
    core: ShardCore, peer: bytes, rid: int, conn: int, a: ReserveArgs, now: int
) -> Payload | None:
    """The engine's answer now, or None: a waiter, answered later as an event to `peer`."""
    engine = core.engine
    payload = engine.reserve(conn, rid, tuple(a.tubes), now, a.timeout_at, a.soon_at, a.offer)
    if payload is None or payload == [WAITING]:  #: answered later as an event
        core.waiting_peer[rid] = peer
    return payload


def cancel(core: ShardCore, peer: bytes, rid: int, conn: int, a: NoArgs, now: int) -> Payload:
    """The waiter `rid` withdrawn, held or not; [CANCELLED]: no offer of it follows."""
    if core.settling is not None and core.settling.held.drop_rid(rid):
        return [CANCELLED]
    if core.closing.deferred.drop_rid(rid):
        return [CANCELLED]
    if core.engine.cancel(rid):
        core.waiting_peer.pop(rid, None)
    # else the waiter was served: its event still needs the peer (route_events)
    return [CANCELLED]


class DisconnectArgs(NamedTuple):
    hold: bool  #: its tubes stay closed to reserves until UNHOLD (closing.py); answered []


def disconnect(
    core: ShardCore, peer: bytes, rid: int, conn: int, a: DisconnectArgs, now: int
) -> Payload | None:
    """Its held requests and waiters go quietly (forget whom they answered to), its jobs
    are ready again; with `hold`, their tubes closed until UNHOLD."""
    if core.settling is not None:
        core.settling.held.drop_conn(conn)
    engine = core.engine
    for rid in [r for r, w in engine.waiters.items() if w.conn == conn]:
        core.waiting_peer.pop(rid, None)
    core.closing.deferred.drop_conn(conn)
    if a.hold:
        core.closing.hold(conn, engine.disconnect(conn, now, hold=True), now)
        return []
    engine.disconnect(conn, now)
    return None


def reset(core: ShardCore, peer: bytes, rid: int, conn: int, a: NoArgs, now: int) -> None:
    """A restarted serving process (`conn`: its index): its held requests and holds end,
    its connections are forgotten."""
    origin = origin_of(conn)
    if core.settling is not None:
        core.settling.drop_origin(origin)
    core.closing.reset(core.engine, origin, now)
    forget_origin(core.engine, origin, now)


def forget_origin(engine: Engine, origin: int, now: int) -> None:
    """The connections of serving process `origin` are gone: their jobs, waiters and
    tube references with them."""

    def belongs(conn_id: int) -> bool:
        return origin_of(conn_id) == origin

    engine.forget_connections(now, origin, belongs)


def settled(core: ShardCore, peer: bytes, rid: int, conn: int, a: NoArgs, now: int) -> None:
    """A serving process (`conn`: its index) has claimed its jobs again; nothing to do
    when not settling (a first start, or settled already)."""
    if core.settling is not None:
        core.settling.settled(conn)


def unhold(core: ShardCore, peer: bytes, rid: int, conn: int, a: NoArgs, now: int) -> None:
    """The close of `conn` has its jobs back on every shard: its tubes open."""
    core.closing.unhold(core.engine, conn, now)


class Counts(NamedTuple):
    """COUNTS's reply."""

    counts: dict[str, Any]
    utime: float
    stime: float
    host: dict[str, Any] | None  #: a hosting serving process's part of `stats`


def shard_counts(engine: Engine, host: dict[str, Any] | None) -> Counts:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return Counts({**engine.counts(), **engine.log_stats}, usage.ru_utime, usage.ru_stime, host)


def counts(core: ShardCore, peer: bytes, rid: int, conn: int, a: NoArgs, now: int) -> Counts:
    """The shard's counts and, from a hosted shard, the serving process's stats fields."""
    host = core.host_fields
    return shard_counts(core.engine, None if host is None else host())
