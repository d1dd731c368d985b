"""A restarted shard settles before it hands out jobs (processes/shard/settling.py).

The log does not record reservations: after a crash every job that was reserved is ready
again, and each serving process re-reserves what its clients still hold (REASSERT, then
SETTLED). A reserve from another serving process that arrives first must not take such a
job; these tests drive a ShardCore as the serving processes do, with no sockets.
"""

from __future__ import annotations

import time
from typing import Any

from shard_helpers import flat, req

from shardq.cluster.routing import tagged
from shardq.cluster.wire import Request
from shardq.engine.engine import CANCELLED
from shardq.processes.shard import ops
from shardq.processes.shard.core import Outbox, ShardCore

HOLDER = tagged(1, 0)  #: a client of serving process 0 that held job 5 before the crash
OTHER = tagged(1, 1)  #: a client of serving process 1 that wants a job
A, B = b"serving-0", b"serving-1"  #: the two serving processes' peer identities
T0 = time.monotonic_ns()  #: the settling deadline counts from the real clock at start


def restarted() -> ShardCore:
    core = ShardCore(0, owns_default=True, settle_from={0, 1})
    out: Outbox = {}
    # the job the log replays: ready again (reserved by HOLDER before the crash)
    core.handle_into(A, req(ops.PUT, 1, HOLDER, 5, 5, "t", 0, 0, 60, b"x"), T0, out)
    assert flat(out) == {A: [[1, b"INSERTED 5\r\n"]]}
    return core


def reserve(rid: int, conn: int = OTHER) -> Request:
    return req(ops.RESERVE, rid, conn, ["t"], None, None, False)


def run(core: ShardCore, peer: bytes, request: Request, now: int = T0) -> dict[bytes, Any]:
    """Its replies and the events it caused, as ``[rid, *payload]`` lists."""
    out: Outbox = {}
    core.handle_into(peer, request, now, out)
    core.take_events(now, out)
    return flat(out)


def test_a_reserve_waits_until_every_serving_process_has_claimed_its_jobs() -> None:
    core = restarted()
    assert run(core, B, reserve(10)) == {}  # held: B's client must not get job 5 yet
    assert run(core, B, req(ops.SETTLED, 0, 1)) == {}  # B has nothing to claim; A is awaited
    assert run(core, A, req(ops.REASSERT, 0, HOLDER, 5, T0 + 60 * 10**9)) == {}
    assert run(core, A, req(ops.SETTLED, 0, 0)) == {}  # settled: job 5 is HOLDER's, so the
    assert core.settling is None  # reserve runs now and waits (no answer yet)
    assert 10 in core.engine.waiters
    assert run(core, A, req(ops.DELETE, 11, HOLDER, 5, False)) == {A: [[11, b"DELETED\r\n"]]}


def test_without_settling_the_reserve_would_take_the_held_job() -> None:
    """What the held reserve prevents (the double delivery the crash test saw)."""
    core = ShardCore(0, owns_default=True)
    run(core, A, req(ops.PUT, 1, HOLDER, 5, 5, "t", 0, 0, 60, b"x"))
    got = run(core, B, reserve(10))
    assert got[B][0][2] == b"RESERVED 5 1\r\nx\r\n"


def test_a_silent_serving_process_is_waited_for_at_most_settle_s() -> None:
    core = restarted()
    run(core, B, reserve(10))
    run(core, B, req(ops.SETTLED, 0, 1))
    assert core.settling is not None
    until = core.settling.until
    assert run(core, B, req(ops.STATS_TUBE, 12, OTHER, "t"), until - 1)[B][0][0] == 12  # not yet
    assert core.next_wakeup() == until  # the loop wakes for it
    out: Outbox = {}
    core.take_events(until, out)
    assert flat(out)[B][0][2] == b"RESERVED 5 1\r\nx\r\n"  # process 0 never claimed it


def test_a_held_reserve_that_is_cancelled_or_whose_client_left_never_runs() -> None:
    core = restarted()
    run(core, B, reserve(10))
    run(core, B, reserve(20, conn=tagged(2, 1)))
    assert run(core, B, req(ops.CANCEL, 10, OTHER)) == {B: [[10, CANCELLED]]}
    assert run(core, B, req(ops.DISCONNECT, 0, tagged(2, 1), False, False)) == {}
    run(core, A, req(ops.SETTLED, 0, 0))
    assert run(core, B, req(ops.SETTLED, 0, 1)) == {}  # nothing held is left to answer
    peek = run(core, B, req(ops.PEEK_READY, 30, OTHER, "t"))
    assert peek[B][0][1].startswith(b"FOUND 5")  # the job is still ready for anyone


def test_a_restarted_serving_process_is_not_waited_for() -> None:
    core = restarted()
    run(core, B, reserve(10))
    run(core, A, req(ops.RESET, 0, 0))  # serving process 0 restarted too: it holds nothing
    assert run(core, B, req(ops.SETTLED, 0, 1))[B][0][2] == b"RESERVED 5 1\r\nx\r\n"
