"""The shard's operations, each declared once: its number, the shape of its arguments, the
named function that applies it and its properties (`declare`). Everything else is derived
from these declarations: the dispatch (`ShardCore.apply` looks the op up in `OPS`), what
is fire-and-forget (`NO_REPLY`), what a connection may pipeline (`PIPELINED`) and what
a settling shard or a close's hold keeps back (`Op.held`).

A request is `wire.Request` (op, rid, conn, args); its `args` are read with the op's
shape (``PutArgs._make(req.args)``, done once by `Op.apply`). A handler gets what it
needs: most ops only the engine (`engine=`: engine, conn, args, now); the ops that
change what the shard remembers besides the engine — its waiting reserves' peers, held
requests, settling, a close's hold — the whole core (`core=`: core, peer, rid, conn,
args, now; shard/special.py). A handler returns the reply payload (a sequence the serving
process reads by name: `wire.Answer`, engine.Reserved/Offer/Final, `Touched`...), or None
for no reply (yet).

How to add an op: docs/ARCHITECTURE.md, "How to add a shard op".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from shardq.cluster.routing import origin_of
from shardq.engine.engine import FINAL, Engine
from shardq.processes.shard import special
from shardq.processes.shard.special import DisconnectArgs, NoArgs, Payload, PutArgs, ReserveArgs
from shardq.protocol.replies import kicked

if TYPE_CHECKING:
    from shardq.processes.shard.core import ShardCore

EngineHandler = Callable[[Engine, int, Any, int], Payload | None]
CoreHandler = Callable[["ShardCore", bytes, int, int, Any, int], Payload | None]


def answer(reply: bytes) -> Payload:
    """The payload of a failed request of most ops: the client's reply (`wire.Answer`)."""
    return [reply]


def final(reply: bytes) -> Payload:
    """A failed reserve's payload: FINAL and the client's reply (engine `Final`)."""
    return [FINAL, reply]


class Op:
    """One shard op, as `declare` made it (a plain slotted class: a dataclass would bring
    `dataclasses` into every start, docs/BENCHMARKS.md "Start-up")."""

    __slots__ = (
        "number",
        "name",
        "shape",
        "make",
        "engine",
        "core",
        "replies",
        "pipelined",
        "held",
        "fail",
    )

    def __init__(
        self,
        number: int,
        name: str,
        shape: type,
        engine: EngineHandler | None,
        core: CoreHandler | None,
        properties: tuple[bool, bool, bool],
        fail: Callable[[bytes], Payload],
    ) -> None:
        self.number = number
        self.name = name
        self.shape = shape  #: the shape of its arguments (a NamedTuple class)
        #: the shape's _make (from a list off the wire)
        self.make: Callable[[Sequence[Any]], Any] = shape._make  # type: ignore[attr-defined]
        self.engine = engine  #: applies it to the engine alone, or
        self.core = core  #: applies it to the whole core
        #: answered (False: fire-and-forget); answered at once and in order (a connection
        #: may pipeline it); hands out a job (held while a restarted shard settles,
        #: settling.py, and while a close holds the tube it would take from, closing.py)
        self.replies, self.pipelined, self.held = properties
        self.fail = fail  #: its payload when it raised (INTERNAL_ERROR...)

    def __repr__(self) -> str:
        return f"Op({self.number}, {self.name!r})"

    def apply(
        self, core: ShardCore, peer: bytes, rid: int, conn: int, args: Sequence[Any], now: int
    ) -> Payload | None:
        """Apply the request `rid` of `conn` from `peer`; `args` in its shape already (the
        hosting serving process's direct call) or as a list off the wire."""
        if type(args) is not self.shape:
            args = self.make(args)
        if self.core is not None:
            return self.core(core, peer, rid, conn, args, now)
        assert self.engine is not None
        return self.engine(core.engine, conn, args, now)


OPS: dict[int, Op] = {}  #: op number -> its declaration


def declare(
    number: int,
    name: str,
    args: type,
    engine: EngineHandler | None = None,
    core: CoreHandler | None = None,
    replies: bool = True,
    pipelined: bool = False,
    held: bool = False,
    fail: Callable[[bytes], Payload] = answer,
) -> int:
    """Declare an op (one handler: `engine` or `core`); its number, for the senders."""
    assert number not in OPS and (engine is None) != (core is None), name
    OPS[number] = Op(number, name, args, engine, core, (replies, pipelined, held), fail)
    return number


class JobArg(NamedTuple):
    job_id: int


class TubeArg(NamedTuple):
    tube: str


class Touched(NamedTuple):
    """TOUCH's reply: the client's reply and the job's new TTR deadline (0: not touched)."""

    reply: bytes
    deadline: int


PUT = declare(1, "PUT", PutArgs, core=special.put, pipelined=True)


#: reserve payload (engine.Reserved, Offer, Final; WAITING), or nothing yet (a waiter)
RESERVE = declare(2, "RESERVE", ReserveArgs, core=special.reserve, held=True, fail=final)
#: withdraws the waiter of this rid: [CANCELLED] (no offer for it can follow)
CANCEL = declare(3, "CANCEL", NoArgs, core=special.cancel)


def op_accept(e: Engine, conn: int, a: JobArg, now: int) -> None:
    e.accept(conn, a.job_id, now)


ACCEPT = declare(4, "ACCEPT", JobArg, op_accept, replies=False)


def op_decline(e: Engine, conn: int, a: JobArg, now: int) -> None:
    e.decline(conn, a.job_id, now)


DECLINE = declare(5, "DECLINE", JobArg, op_decline, replies=False)


def op_reserve_job(e: Engine, conn: int, a: JobArg, now: int) -> Payload:
    return e.reserve_job(conn, a.job_id, now)


RESERVE_JOB = declare(6, "RESERVE_JOB", JobArg, op_reserve_job, held=True, fail=final)


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


#: no reply, but with `hold`: [] once its jobs are ready and their tubes held
DISCONNECT = declare(21, "DISCONNECT", DisconnectArgs, core=special.disconnect, replies=False)
#: [counts dict, utime, stime] and, from a hosted shard, the serving process's stats fields
COUNTS = declare(22, "COUNTS", NoArgs, core=special.counts)


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
#: a restarted serving process (`conn`: its index): forget its connections
RESET = declare(25, "RESET", NoArgs, core=special.reset, replies=False)


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
#: a serving process (`conn`: its index) has claimed its jobs again (settling.py)
SETTLED = declare(27, "SETTLED", NoArgs, core=special.settled, replies=False)


class Metrics(NamedTuple):
    """METRICS's reply (the metrics process; engine/timing.py)."""

    tubes: Sequence[Sequence[Any]]  #: the stats-tube values of every tube
    timing: dict[str, Any] | None  #: the histograms, with metrics on


def op_metrics(e: Engine, conn: int, a: NoArgs, now: int) -> Payload:
    return Metrics(e.tube_table(now), None if e.timing is None else e.timing.snapshot())


METRICS = declare(28, "METRICS", NoArgs, op_metrics)
#: a held close's other shards have its jobs back: its tubes open (closing.py)
UNHOLD = declare(29, "UNHOLD", NoArgs, core=special.unhold, replies=False)


NO_REPLY = frozenset(n for n, op in OPS.items() if not op.replies)  #: fire-and-forget
PIPELINED = frozenset(n for n, op in OPS.items() if op.pipelined)
