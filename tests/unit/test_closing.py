"""A close that gives back jobs of several shards holds their tubes (processes/shard/closing.py).

Each shard hears of the close on its own. With hold, a shard makes the closed connection's
jobs ready at once but hands none of them (nor anything else of their tubes) out until the
serving process says UNHOLD, which it does once every shard has them back; these tests
drive one ShardCore as a serving process does, with no sockets.
"""

from __future__ import annotations

import time
from typing import Any

from shard_helpers import flat, req

from shardq.cluster.routing import tagged
from shardq.cluster.wire import Request
from shardq.engine.engine import CANCELLED
from shardq.processes.shard import ops
from shardq.processes.shard.closing import HOLD_NS
from shardq.processes.shard.core import Outbox, ShardCore

HOLDER = tagged(1, 0)  #: the closing connection, of serving process 0
OTHER = tagged(1, 1)  #: a client of serving process 1 that wants a job
A, B = b"serving-0", b"serving-1"
T0 = time.monotonic_ns()
RESERVED_5 = b"RESERVED 5 1\r\nx\r\n"


def run(core: ShardCore, peer: bytes, request: Request, now: int = T0) -> dict[bytes, Any]:
    """Its replies and the events it caused, as ``[rid, *payload]`` lists."""
    out: Outbox = {}
    core.handle_into(peer, request, now, out)
    core.take_events(now, out)
    return flat(out)


def reserve(
    rid: int, tubes: tuple[str, ...] = ("t",), timeout_at: int | None = None, conn: int = OTHER
) -> Request:
    return req(ops.RESERVE, rid, conn, list(tubes), timeout_at, None, False)


def holding() -> ShardCore:
    """Job 5 in tube t, reserved by HOLDER; job 6 ready in tube u."""
    core = ShardCore(0, owns_default=True)
    run(core, A, req(ops.PUT, 1, HOLDER, 5, 5, "t", 0, 0, 60, b"x"))
    run(core, A, req(ops.PUT, 2, HOLDER, 6, 6, "u", 0, 0, 60, b"y"))
    assert run(core, A, reserve(3, conn=HOLDER))[A][0][2] == RESERVED_5
    return core


def state(core: ShardCore, job_id: int) -> bytes:
    reply = run(core, B, req(ops.STATS_JOB, 99, OTHER, job_id))[B][0][1]
    return next(line for line in reply.split(b"\n") if line.startswith(b"state:"))


def test_the_jobs_are_ready_at_once_and_handed_out_only_after_unhold() -> None:
    core = holding()
    assert run(core, B, reserve(10)) == {}  # a waiter on t
    assert run(core, A, req(ops.DISCONNECT, 20, HOLDER, True, False)) == {A: [[20]]}  # answered
    assert state(core, 5) == b"state: ready"  # seen ready by anyone at once
    assert 10 in core.engine.waiters  # but not handed to the waiter yet
    got = run(core, A, req(ops.UNHOLD, 0, HOLDER))
    assert got[B][0][0] == 10 and got[B][0][2] == RESERVED_5


def test_a_plain_disconnect_serves_the_waiter_at_once() -> None:
    core = holding()
    run(core, B, reserve(10))
    got = run(core, A, req(ops.DISCONNECT, 0, HOLDER, False, False))
    assert got[B][0][0] == 10 and got[B][0][2] == RESERVED_5


def test_a_reserve_during_the_hold_waits_for_it_even_with_timeout_0() -> None:
    core = holding()
    run(core, A, req(ops.DISCONNECT, 20, HOLDER, True, False))
    assert run(core, B, reserve(10, timeout_at=T0)) == {}  # not TIMED_OUT: job 5 is ready
    got = run(core, A, req(ops.UNHOLD, 0, HOLDER), T0 + 1)
    assert got[B][0][0] == 10 and got[B][0][2] == RESERVED_5


def test_a_reserve_job_during_the_hold_waits_for_it() -> None:
    core = holding()
    run(core, A, req(ops.DISCONNECT, 20, HOLDER, True, False))
    assert run(core, B, req(ops.RESERVE_JOB, 10, OTHER, 5)) == {}
    got = run(core, A, req(ops.UNHOLD, 0, HOLDER))
    assert got[B][0][0] == 10 and got[B][0][2] == RESERVED_5


def test_other_tubes_are_not_held() -> None:
    core = holding()
    run(core, A, req(ops.DISCONNECT, 20, HOLDER, True, False))
    got = run(core, B, reserve(10, ("u",), timeout_at=T0))
    assert got[B][0][2] == b"RESERVED 6 1\r\ny\r\n"


def test_a_deferred_reserve_that_is_cancelled_or_whose_client_left_never_runs() -> None:
    core = holding()
    run(core, A, req(ops.DISCONNECT, 20, HOLDER, True, False))
    run(core, B, reserve(10))
    run(core, B, reserve(11, conn=tagged(2, 1)))
    assert run(core, B, req(ops.CANCEL, 10, OTHER)) == {B: [[10, CANCELLED]]}
    assert run(core, B, req(ops.DISCONNECT, 0, tagged(2, 1), False, False)) == {}
    assert run(core, A, req(ops.UNHOLD, 0, HOLDER)) == {}  # nothing deferred is left
    assert state(core, 5) == b"state: ready"


def test_a_hold_never_lifted_ends_after_hold_s() -> None:
    core = holding()
    run(core, A, req(ops.DISCONNECT, 20, HOLDER, True, False))
    run(core, B, reserve(10))
    wake, early = core.next_wakeup(), 0
    while wake is not None and wake < T0 + HOLD_NS:  # a fresh TTR timer joins the heap
        nothing: Outbox = {}
        core.take_events(wake, nothing)
        assert nothing == {}
        wake, early = core.next_wakeup(), early + 1
    assert wake == T0 + HOLD_NS and early <= 1  # the loop wakes for it
    assert run(core, B, req(ops.STATS_TUBE, 12, OTHER, "t"), T0 + HOLD_NS - 1)[B][0][0] == 12
    out: Outbox = {}
    core.take_events(T0 + HOLD_NS, out)
    assert flat(out)[B][0][0] == 10 and flat(out)[B][0][2] == RESERVED_5


def test_a_restarted_serving_process_ends_its_holds() -> None:
    core = holding()
    run(core, A, req(ops.DISCONNECT, 20, HOLDER, True, False))
    run(core, B, reserve(10))
    got = run(core, A, req(ops.RESET, 0, 0))  # serving process 0 (HOLDER's) restarted
    assert got[B][0][0] == 10 and got[B][0][2] == RESERVED_5
