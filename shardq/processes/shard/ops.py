"""The shard's operations, each declared once, here: its number, the shape of its
arguments, the named function that applies it and its properties (`declare`, into the
table of optable.py). Everything else is derived from these declarations: the dispatch
(`ShardCore.apply` looks the op up in `OPS`), what is fire-and-forget (`NO_REPLY`), what a
connection may pipeline (`PIPELINED`) and what a settling shard or a close's hold keeps
back (`Op.held`: the tubes it would take a job from).

A request is `wire.Request` (op, rid, conn, args); its `args` are read with the op's
shape (``PutArgs._make(req.args)``, done once by `Op.apply`). A handler is a thin call
into what it changes: most ops into the engine (`engine=`: engine, conn, args, now); the
ops that change what the shard remembers besides the engine — its waiting reserves'
peers, held requests, settling, a close's hold — into the core (`core=`: core, peer, rid,
conn, args, now; the core's methods are in core.py and holding.py). A handler returns the
reply payload (a sequence the serving process reads by name: `wire.Answer`,
engine.Reserved/Offer/Final, `Touched`...), or None for no reply (yet).

How to add an op: docs/ARCHITECTURE.md, "How to add a shard op".
"""

from __future__ import annotations

import resource
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from shardq.cluster.routing import origin_of
from shardq.engine.engine import CANCELLED, WAITING, Engine
from shardq.processes.shard.optable import OPS, Payload, declare, final
from shardq.protocol import proto
from shardq.protocol.replies import kicked, put_reply

if TYPE_CHECKING:
    from shardq.processes.shard.core import ShardCore


class NoArgs(NamedTuple):
    """An op with no arguments (`conn` may name a serving process: RESET, SETTLED)."""


class JobArg(NamedTuple):
    job_id: int


class TubeArg(NamedTuple):
    tube: str


class Touched(NamedTuple):
    """TOUCH's reply: the client's reply and the job's new TTR deadline (0: not touched)."""

    reply: bytes
    deadline: int


class PutArgs(NamedTuple):
    job_id: int
    seq: int  #: put order (wall-clock ns, strictly increasing)
    tube: str
    pri: int
    delay: int
    ttr: int
    body: bytes


def op_put(c: ShardCore, peer: bytes, rid: int, conn: int, a: PutArgs, now: int) -> Payload:
    """Admitted (`ShardCore.admit`): the engine's answer; else OUT_OF_MEMORY, not taken."""
    if not c.admit(a.tube, len(a.body)):
        return [proto.OUT_OF_MEMORY]
    taken = c.engine.put(a.job_id, a.seq, a.tube, a.pri, a.delay, a.ttr, a.body, now)
    return [put_reply(a.job_id, taken)]


PUT = declare(1, "PUT", PutArgs, core=op_put, pipelined=True)


class ReserveArgs(NamedTuple):
    tubes: list[str]
    timeout_at: int | None
    soon_at: int | None
    offer: bool  #: offer mode: a reserve across shards (docs/ARCHITECTURE.md, "Offers")


def op_reserve(
    c: ShardCore, peer: bytes, rid: int, conn: int, a: ReserveArgs, now: int
) -> Payload | None:
    """The engine's answer now (engine.Reserved, Offer, Final; WAITING), or None: a
    waiter, answered later as an event to `peer`."""
    payload = c.engine.reserve(conn, rid, tuple(a.tubes), now, a.timeout_at, a.soon_at, a.offer)
    if payload is None or payload == [WAITING]:  #: answered later as an event
        c.waiting_peer[rid] = peer
    return payload


def reserve_takes(e: Engine, a: ReserveArgs | BetterArgs) -> Sequence[str]:
    """The tubes a reserve would take from: its watch list."""
    return a.tubes


RESERVE = declare(2, "RESERVE", ReserveArgs, core=op_reserve, held=reserve_takes, fail=final)


def op_cancel(c: ShardCore, peer: bytes, rid: int, conn: int, a: NoArgs, now: int) -> Payload:
    """Withdraws the waiter of this rid: [CANCELLED] (no offer for it can follow)."""
    c.cancel(rid)
    return [CANCELLED]


CANCEL = declare(3, "CANCEL", NoArgs, core=op_cancel)


def op_accept(e: Engine, conn: int, a: JobArg, now: int) -> None:
    e.accept(conn, a.job_id, now)


ACCEPT = declare(4, "ACCEPT", JobArg, op_accept, replies=False)


class DeclineArgs(NamedTuple):
    job_id: int
    answer: bool  #: answered [] once the job is ready (the sender doubts our heads until)


def op_decline(e: Engine, conn: int, a: DeclineArgs, now: int) -> Payload | None:
    """No reply, but with `answer`: [] once the job is back in its place."""
    e.decline(conn, a.job_id, now)
    return [] if a.answer else None


DECLINE = declare(5, "DECLINE", DeclineArgs, op_decline, replies=False)


def op_reserve_job(e: Engine, conn: int, a: JobArg, now: int) -> Payload:
    return e.reserve_job(conn, a.job_id, now)


def job_takes(e: Engine, a: JobArg) -> Sequence[str]:
    """The tube a request for one job would take it from: the job's (none: no such job)."""
    job = e.jobs.get(a.job_id)
    return () if job is None else (job.tube,)


RESERVE_JOB = declare(6, "RESERVE_JOB", JobArg, op_reserve_job, held=job_takes, fail=final)


class BetterArgs(NamedTuple):
    """A reserve over this shard and the asking serving process's hosted one, which has
    offered it a job of priority `pri` put at `seq` (serving/cross.py)."""

    tubes: list[str]
    pri: int
    seq: int


def op_reserve_better(e: Engine, conn: int, a: BetterArgs, now: int) -> Payload:
    """engine.Reserved if a job here comes first, else [NONE_BETTER]; never a waiter."""
    return e.reserve_better(conn, tuple(a.tubes), now, a.pri, a.seq)


RESERVE_BETTER = declare(
    30, "RESERVE_BETTER", BetterArgs, op_reserve_better, held=reserve_takes, fail=final
)


class DeleteArgs(NamedTuple):
    job_id: int
    resent: bool  #: sent again to a restarted shard, of a job the connection held


def op_delete(e: Engine, conn: int, a: DeleteArgs, now: int) -> Payload:
    return [e.delete(conn, a.job_id, now, a.resent)]


DELETE = declare(7, "DELETE", DeleteArgs, op_delete, pipelined=True)


class ReleaseArgs(NamedTuple):
    job_id: int
    pri: int
    delay: int


def op_release(e: Engine, conn: int, a: ReleaseArgs, now: int) -> Payload:
    return [e.release(conn, a.job_id, a.pri, a.delay, now)]


RELEASE = declare(8, "RELEASE", ReleaseArgs, op_release, pipelined=True)


class BuryArgs(NamedTuple):
    job_id: int
    pri: int
    resent: bool  #: as DeleteArgs.resent


def op_bury(e: Engine, conn: int, a: BuryArgs, now: int) -> Payload:
    return [e.bury(conn, a.job_id, a.pri, now, a.resent)]


BURY = declare(9, "BURY", BuryArgs, op_bury, pipelined=True)


def op_touch(e: Engine, conn: int, a: JobArg, now: int) -> Payload:
    return e.touch(conn, a.job_id, now)


def touch_failed(reply: bytes) -> Payload:
    return Touched(reply, 0)


TOUCH = declare(10, "TOUCH", JobArg, op_touch, pipelined=True, fail=touch_failed)


def op_peek(e: Engine, conn: int, a: JobArg, now: int) -> Payload:
    return [e.peek(a.job_id)]


PEEK = declare(11, "PEEK", JobArg, op_peek, pipelined=True)


def op_kick_job(e: Engine, conn: int, a: JobArg, now: int) -> Payload:
    return [e.kick_job(a.job_id, now)]


KICK_JOB = declare(12, "KICK_JOB", JobArg, op_kick_job, pipelined=True)


def op_stats_job(e: Engine, conn: int, a: JobArg, now: int) -> Payload:
    return [e.stats_job(a.job_id, now)]


STATS_JOB = declare(13, "STATS_JOB", JobArg, op_stats_job, pipelined=True)


def op_peek_ready(e: Engine, conn: int, a: TubeArg, now: int) -> Payload:
    return [e.peek_ready(a.tube)]


PEEK_READY = declare(14, "PEEK_READY", TubeArg, op_peek_ready, pipelined=True)


def op_peek_delayed(e: Engine, conn: int, a: TubeArg, now: int) -> Payload:
    return [e.peek_delayed(a.tube)]


PEEK_DELAYED = declare(15, "PEEK_DELAYED", TubeArg, op_peek_delayed, pipelined=True)


def op_peek_buried(e: Engine, conn: int, a: TubeArg, now: int) -> Payload:
    return [e.peek_buried(a.tube)]


PEEK_BURIED = declare(16, "PEEK_BURIED", TubeArg, op_peek_buried, pipelined=True)


class KickArgs(NamedTuple):
    tube: str
    bound: int


def op_kick(e: Engine, conn: int, a: KickArgs, now: int) -> Payload:
    return [kicked(e.kick(a.tube, a.bound, now))]


KICK = declare(17, "KICK", KickArgs, op_kick, pipelined=True)


def op_stats_tube(e: Engine, conn: int, a: TubeArg, now: int) -> Payload:
    return [e.stats_tube(a.tube, now)]


STATS_TUBE = declare(18, "STATS_TUBE", TubeArg, op_stats_tube, pipelined=True)


class PauseArgs(NamedTuple):
    tube: str
    delay: int


def op_pause_tube(e: Engine, conn: int, a: PauseArgs, now: int) -> Payload:
    return [e.pause_tube(a.tube, a.delay, now)]


PAUSE_TUBE = declare(19, "PAUSE_TUBE", PauseArgs, op_pause_tube, pipelined=True)


class RefArgs(NamedTuple):
    tube: str
    d_using: int
    d_watching: int


def op_ref(e: Engine, conn: int, a: RefArgs, now: int) -> Payload:
    """Counted per origin of `conn`; answered [] (an acknowledgement)."""
    e.ref(a.tube, a.d_using, a.d_watching, now, origin_of(conn))
    return []


REF = declare(20, "REF", RefArgs, op_ref)


class DisconnectArgs(NamedTuple):
    hold: bool  #: its tubes stay closed to reserves until UNHOLD (closing.py); answered []
    answer: bool  #: answered [] once its jobs are ready (the sender doubts our heads until)


def op_disconnect(
    c: ShardCore, peer: bytes, rid: int, conn: int, a: DisconnectArgs, now: int
) -> Payload | None:
    """No reply, but with `hold` or `answer`: [] once its jobs are ready (and with `hold`
    their tubes held)."""
    c.disconnect(conn, a.hold, now)
    return [] if a.hold or a.answer else None


DISCONNECT = declare(21, "DISCONNECT", DisconnectArgs, core=op_disconnect, replies=False)


class Counts(NamedTuple):
    """COUNTS's reply."""

    counts: dict[str, Any]
    utime: float
    stime: float
    host: dict[str, Any] | None  #: a hosting serving process's part of `stats`


def op_counts(c: ShardCore, peer: bytes, rid: int, conn: int, a: NoArgs, now: int) -> Counts:
    """The shard's counts and, from a hosted shard, the serving process's stats fields."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    host = None if c.host_fields is None else c.host_fields()
    counts = {**c.engine.counts(), **c.engine.log_stats}
    return Counts(counts, usage.ru_utime, usage.ru_stime, host)


COUNTS = declare(22, "COUNTS", NoArgs, core=op_counts)


def op_list(e: Engine, conn: int, a: NoArgs, now: int) -> Payload:
    """[[[order, name], ...]]: the shard's tubes."""
    return [e.list_tubes()]


LIST = declare(23, "LIST", NoArgs, op_list)


class ReassertArgs(NamedTuple):
    job_id: int
    deadline: int  #: its TTR deadline before the shard restarted


def op_reassert(e: Engine, conn: int, a: ReassertArgs, now: int) -> None:
    e.reassert(conn, a.job_id, a.deadline, now)


REASSERT = declare(24, "REASSERT", ReassertArgs, op_reassert, replies=False)


def op_reset(c: ShardCore, peer: bytes, rid: int, conn: int, a: NoArgs, now: int) -> None:
    """A restarted serving process (`conn`: its index): forget its connections."""
    c.reset(origin_of(conn), now)


RESET = declare(25, "RESET", NoArgs, core=op_reset, replies=False)


class MoveRefArgs(NamedTuple):
    tube: str
    using: int
    watching: int
    old: int  #: the serving process it comes from


def op_move_ref(e: Engine, conn: int, a: MoveRefArgs, now: int) -> None:
    """A connection handed over to the serving process of `conn`: its references to a
    tube move there from its old one."""
    e.move_refs(a.tube, a.using, a.watching, a.old, origin_of(conn))


MOVE_REF = declare(26, "MOVE_REF", MoveRefArgs, op_move_ref, replies=False)


def op_settled(c: ShardCore, peer: bytes, rid: int, conn: int, a: NoArgs, now: int) -> None:
    """A serving process (`conn`: its index) has claimed its jobs again; nothing to do
    when not settling (a first start, or settled already; settling.py)."""
    if c.settling is not None:
        c.settling.settled(conn)


SETTLED = declare(27, "SETTLED", NoArgs, core=op_settled, replies=False)


class Metrics(NamedTuple):
    """METRICS's reply (the metrics process; engine/timing.py)."""

    tubes: Sequence[Sequence[Any]]  #: the stats-tube values of every tube
    timing: dict[str, Any] | None  #: the histograms, with metrics on


def op_metrics(e: Engine, conn: int, a: NoArgs, now: int) -> Payload:
    return Metrics(e.tube_table(now), None if e.timing is None else e.timing.snapshot())


METRICS = declare(28, "METRICS", NoArgs, op_metrics)


def op_unhold(c: ShardCore, peer: bytes, rid: int, conn: int, a: NoArgs, now: int) -> None:
    """A held close's other shards have its jobs back: its tubes open (closing.py)."""
    c.closing.unhold(c.engine, conn, now)


UNHOLD = declare(29, "UNHOLD", NoArgs, core=op_unhold, replies=False)


NO_REPLY = frozenset(n for n, op in OPS.items() if not op.replies)  #: fire-and-forget
PIPELINED = frozenset(n for n, op in OPS.items() if op.pipelined)
