"""The shard's operations: each op's number, its arguments, and the named function that
applies it to the engine, declared together (adding an op touches this file only, plus the
engine method it calls and the serving process handler that sends it).

A request is ``[op, rid, conn, *args]`` (cluster/wire.py encodes it); the handler gets the
engine, the connection id, ``args`` and ``now`` and returns the reply payload (a list), or
None for a fire-and-forget op.

Shard ops (serving process or coordinator -> shard):

=============  =====================================  ==============================
op             args                                   reply payload
=============  =====================================  ==============================
PUT            id, seq, tube, pri, delay, ttr, body   [reply]
RESERVE        tubes, timeout_at, soon_at, offer      reserve payload (engine.py), or
                                                      nothing yet (a waiter)
CANCEL         target rid                             no reply
ACCEPT         job id                                 no reply
DECLINE        job id                                 no reply
RESERVE_JOB    job id                                 reserve payload
DELETE         job id                                 [reply]
RELEASE        job id, pri, delay                     [reply]
BURY           job id, pri                            [reply]
TOUCH          job id                                 [reply, new deadline]
PEEK           job id                                 [reply]
KICK_JOB       job id                                 [reply]
STATS_JOB      job id                                 [reply]
PEEK_READY     tube                                   [reply]
PEEK_DELAYED   tube                                   [reply]
PEEK_BURIED    tube                                   [reply]
KICK           tube, bound                            [reply]
STATS_TUBE     tube                                   [reply]
PAUSE_TUBE     tube, delay                            [reply]
REF            tube, d_using, d_watching              [] (an acknowledgement; counted
                                                      per origin of `conn`)
MOVE_REF       tube, d_using, d_watching, old origin  no reply (a connection handed over:
                                                      its references move to conn's origin)
DISCONNECT     (none), or [True]: hold                no reply; with hold [] (its tubes
                                                      stay closed to reserves until
                                                      UNHOLD: processes/shard/closing.py)
UNHOLD         (none)                                 no reply (the held tubes open)
COUNTS         (none)                                 [counts dict, utime, stime] and,
                                                      from a hosted shard, the serving
                                                      process's stats fields
LIST           (none)                                 [[order, name], ...]
REASSERT       job id, TTR deadline                   no reply (re-reserve after restart)
RESET          (none; conn = the process's index)     no reply (a restarted serving
                                                      process: forget its connections)
METRICS        (none)                                 [[stats-tube values of every tube],
                                                      timing snapshot or None] (the
                                                      metrics process; engine/timing.py)
SETTLED        (none; conn = the process's index)     no reply (after its REASSERTs to a
                                                      restarted shard: processes/shard/settling.py)
=============  =====================================  ==============================
"""

from __future__ import annotations

import resource
from collections.abc import Callable
from typing import Any

from shardq.cluster.routing import origin_of
from shardq.engine.engine import Engine

Handler = Callable[[Engine, int, list[Any], int], list[Any] | None]

# One named handler per op: handler(engine, conn, args, now) -> reply payload (a list), or
# None for an op with no reply. `args` is the request's tail as wire.py documents it.


PUT = 1
RESERVE = 2  # handled by ShardCore.apply: a waiter needs the peer that sent it
CANCEL = 3  # handled by ShardCore.apply: withdraws a waiter


def op_put(e: Engine, conn: int, a: list[Any], now: int) -> list[Any]:
    job_id, seq, tube, pri, delay, ttr, body = a
    return [e.put(job_id, seq, tube, pri, delay, ttr, body, now)]


RESERVE_JOB = 6


def op_reserve_job(e: Engine, conn: int, a: list[Any], now: int) -> list[Any]:
    return e.reserve_job(conn, a[0], now)


DELETE = 7


def op_delete(e: Engine, conn: int, a: list[Any], now: int) -> list[Any]:
    job_id, *resent = a  # resent: the serving process's "held before the restart" mark
    return [e.delete(conn, job_id, now, *resent)]


RELEASE = 8


def op_release(e: Engine, conn: int, a: list[Any], now: int) -> list[Any]:
    job_id, pri, delay = a
    return [e.release(conn, job_id, pri, delay, now)]


BURY = 9


def op_bury(e: Engine, conn: int, a: list[Any], now: int) -> list[Any]:
    job_id, pri, *resent = a
    return [e.bury(conn, job_id, pri, now, *resent)]


TOUCH = 10


def op_touch(e: Engine, conn: int, a: list[Any], now: int) -> list[Any]:
    return e.touch(conn, a[0], now)


PEEK = 11


def op_peek(e: Engine, conn: int, a: list[Any], now: int) -> list[Any]:
    return [e.peek(a[0])]


KICK_JOB = 12


def op_kick_job(e: Engine, conn: int, a: list[Any], now: int) -> list[Any]:
    return [e.kick_job(a[0], now)]


STATS_JOB = 13


def op_stats_job(e: Engine, conn: int, a: list[Any], now: int) -> list[Any]:
    return [e.stats_job(a[0], now)]


PEEK_READY = 14


def op_peek_ready(e: Engine, conn: int, a: list[Any], now: int) -> list[Any]:
    return [e.peek_ready(a[0])]


PEEK_DELAYED = 15


def op_peek_delayed(e: Engine, conn: int, a: list[Any], now: int) -> list[Any]:
    return [e.peek_delayed(a[0])]


PEEK_BURIED = 16


def op_peek_buried(e: Engine, conn: int, a: list[Any], now: int) -> list[Any]:
    return [e.peek_buried(a[0])]


KICK = 17


def op_kick(e: Engine, conn: int, a: list[Any], now: int) -> list[Any]:
    tube, bound = a
    return [e.kick(tube, bound, now)]


STATS_TUBE = 18


def op_stats_tube(e: Engine, conn: int, a: list[Any], now: int) -> list[Any]:
    return [e.stats_tube(a[0], now)]


PAUSE_TUBE = 19


def op_pause_tube(e: Engine, conn: int, a: list[Any], now: int) -> list[Any]:
    tube, delay = a
    return [e.pause_tube(tube, delay, now)]


REF = 20


def op_ref(e: Engine, conn: int, a: list[Any], now: int) -> list[Any]:
    tube, d_using, d_watching = a
    e.ref(tube, d_using, d_watching, now, origin_of(conn))
    return []  # an acknowledgement


MOVE_REF = 26


def op_move_ref(e: Engine, conn: int, a: list[Any], now: int) -> None:
    """A connection handed over to the serving process of `conn`: its references to a
    tube move there from its old one."""
    tube, using, watching, old = a
    e.move_refs(tube, using, watching, old, origin_of(conn))


ACCEPT = 4


def op_accept(e: Engine, conn: int, a: list[Any], now: int) -> None:
    e.accept(conn, a[0], now)


DECLINE = 5


def op_decline(e: Engine, conn: int, a: list[Any], now: int) -> None:
    e.decline(conn, a[0], now)


DISCONNECT = 21


def op_disconnect(e: Engine, conn: int, a: list[Any], now: int) -> None:
    e.disconnect(conn, now)


COUNTS = 22


def op_counts(e: Engine, conn: int, a: list[Any], now: int) -> list[Any]:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return [{**e.counts(), **e.log_stats}, usage.ru_utime, usage.ru_stime]


REASSERT = 24


def op_reassert(e: Engine, conn: int, a: list[Any], now: int) -> None:
    job_id, deadline = a
    e.reassert(conn, job_id, deadline, now)


RESET = 25


def op_reset(e: Engine, conn: int, a: list[Any], now: int) -> None:
    """`conn` is the restarted serving process's index (its connection ids' origin)."""
    origin = origin_of(conn)

    def belongs(conn_id: int) -> bool:
        return origin_of(conn_id) == origin

    e.forget_connections(now, origin, belongs)


SETTLED = 27  # handled by ShardCore.apply: a serving process has claimed its jobs again
UNHOLD = 29  # handled by ShardCore.apply: a held close's other shards have its jobs back

LIST = 23


def op_list(e: Engine, conn: int, a: list[Any], now: int) -> list[Any]:
    return [e.list_tubes()]


METRICS = 28


def op_metrics(e: Engine, conn: int, a: list[Any], now: int) -> list[Any]:
    """Every tube's stats-tube values and, with metrics on, the shard's histograms."""
    return [e.tube_table(now), None if e.timing is None else e.timing.snapshot()]


#: op -> its handler
HANDLERS: dict[int, Handler] = {
    PUT: op_put,
    RESERVE_JOB: op_reserve_job,
    DELETE: op_delete,
    RELEASE: op_release,
    BURY: op_bury,
    TOUCH: op_touch,
    PEEK: op_peek,
    KICK_JOB: op_kick_job,
    STATS_JOB: op_stats_job,
    PEEK_READY: op_peek_ready,
    PEEK_DELAYED: op_peek_delayed,
    PEEK_BURIED: op_peek_buried,
    KICK: op_kick,
    STATS_TUBE: op_stats_tube,
    PAUSE_TUBE: op_pause_tube,
    REF: op_ref,
    MOVE_REF: op_move_ref,
    ACCEPT: op_accept,
    DECLINE: op_decline,
    DISCONNECT: op_disconnect,
    COUNTS: op_counts,
    REASSERT: op_reassert,
    RESET: op_reset,
    LIST: op_list,
    METRICS: op_metrics,
}
