"""Reserves: one shard's, at once or as a waiter there; a reserve over tubes on several shards,
settled here from the shards' offers (docs/ARCHITECTURE.md, "Offers"); and a closed
connection's reservations, given back by every shard together (processes/shard/closing.py)."""

from __future__ import annotations

import functools
import heapq
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from shardq.cluster.wire import Request
from shardq.engine.engine import CANCELLED, OFFER, WAITING
from shardq.engine.job import NS
from shardq.engine.reserve import Final, Offer, Reserved
from shardq.processes.serving.conn import CLOSED, Conn, CrossReserve
from shardq.processes.shard import ops
from shardq.processes.shard.ops import (
    BetterArgs,
    DeclineArgs,
    DisconnectArgs,
    JobArg,
    ReserveArgs,
)
from shardq.protocol import proto

if TYPE_CHECKING:
    from shardq.processes.serving.loop import ServingProcess


def do_reserve(self: ServingProcess, conn: Conn, timeout: int | None) -> None:
    if not conn.worker:
        conn.worker = True
        conn.away = None  # a worker's home is where its watched tubes are (handoff.py)
    now = time.monotonic_ns()
    soon_at = conn.soon_at(now)
    timeout_at = None if timeout is None else now + timeout * NS
    by_shard: dict[int, list[str]] = {}
    for tube in conn.watch:
        by_shard.setdefault(self.shard_of(tube), []).append(tube)
    conn.step("call")
    conn.shards.update(by_shard)
    if len(by_shard) == 1:
        ((shard, tubes),) = by_shard.items()
        args = ReserveArgs(tubes, timeout_at, soon_at, False)
        if shard == self.hosted_index and not self.outq.get(shard):
            self.reserve_hosted(conn, args, now)
            return
        conn.waiting = self.request(shard, ops.RESERVE, conn, args, self.on_reserved)
        return
    if self.reserve_against_home(conn, by_shard, now):
        return
    cross = CrossReserve(conn)
    cross.expire_at, cross.reply = timeout_at, proto.TIMED_OUT
    if soon_at is not None and (timeout_at is None or soon_at <= timeout_at):
        cross.expire_at, cross.reply = soon_at, proto.DEADLINE_SOON
    conn.waiting = cross
    for shard, tubes in by_shard.items():
        rid = self.request(shard, ops.RESERVE, conn, ReserveArgs(tubes, None, None, True), None)
        cross.rids[rid] = shard
        cross.tubes[rid] = tubes
        cross.live.add(rid)
        self.cross[rid] = cross


def reserve_against_home(
    self: ServingProcess, conn: Conn, by_shard: dict[int, list[str]], now: int
) -> bool:
    """A reserve over the hosted shard and others, when the hosted one has a job ready:
    that job is offered here at once. When no other shard's published heads come before it
    (processes/common/heads.py), it is taken: no other shard is asked. Else, with one other
    shard, that shard is asked to reserve its best only if it comes first (RESERVE_BETTER)
    — one request and its answer, where the offer protocol takes an offer from each shard
    and an accept or decline (docs/ARCHITECTURE.md, "Offers"). False: no job ready at home
    (or its shard holds reserves back), so the reserve may have to wait, or several other
    shards may hold a better job: the offer protocol settles it."""
    home = self.hosted_index
    if home not in by_shard:
        return False
    heads = self.peer_heads
    if heads is not None:  # the other shards publish while their tables are wanted: now,
        heads.want(by_shard, home, now)  # also when this reserve takes the offer protocol
    if self.outq.get(home):
        return False
    assert self.hosted is not None
    core = self.hosted.core
    offer = core.offer_local(conn.id, tuple(by_shard[home]), now)
    if offer is None:
        return False
    offered = Offer._make(offer)
    others = [(shard, t) for shard, t in by_shard.items() if shard != home]
    if heads is not None and not heads.beaten(others, offered.pri, offered.seq, now):
        core.settle_local(conn.id, offered.job_id, True, now)  # the best there is: taken
        conn.hold(offered.job_id, now + offered.ttr)
        self.reply(conn, offered.reply)
        return True
    if len(others) > 1:
        core.settle_local(conn.id, offered.job_id, False, now)  # back: every shard is asked
        return False
    conn.offered = offered
    ((other, tubes),) = others
    args = BetterArgs(tubes, offered.pri, offered.seq)
    conn.waiting = self.request(other, ops.RESERVE_BETTER, conn, args, self.on_better)
    return True


def on_better(self: ServingProcess, conn: Conn, payload: Sequence[Any]) -> None:
    """RESERVE_BETTER's answer: engine.Reserved (the other shard's job came first: the
    hosted offer goes back), or [NONE_BETTER] or a failure (the hosted offer is taken)."""
    offer, conn.offered, conn.waiting = conn.offered, None, None
    assert offer is not None and self.hosted is not None
    now = time.monotonic_ns()
    taken = len(payload) != len(Reserved._fields)
    self.hosted.core.settle_local(conn.id, offer.job_id, taken, now)
    if taken:
        conn.hold(offer.job_id, now + offer.ttr)  # TTR starts now
        self.reply(conn, offer.reply)
    else:
        self.on_reserved(conn, payload)  # the other shard's job, reserved there


def reserve_hosted(self: ServingProcess, conn: Conn, args: ReserveArgs, now: int) -> None:
    """A reserve on the hosted shard, at once: answered now, or a waiter the engine
    answers later (take_events in run_hosted) under this rid."""
    assert self.hosted is not None
    rid = self.new_rid()
    tubes, timeout_at, soon_at = tuple(args.tubes), args.timeout_at, args.soon_at
    payload = self.hosted.core.reserve_local(conn.id, rid, tubes, now, timeout_at, soon_at)
    if payload is None:
        self.pending[rid] = (conn, self.on_reserved)
        conn.waiting = rid
    else:
        self.on_reserved(conn, payload)


def reserve_at_eof(self: ServingProcess, conn: Conn) -> None:
    """The client ended its input while a reserve waits: the reserve's timeout becomes
    now. A job ready (or offered) by then is still reserved; otherwise TIMED_OUT. Either
    way the commands read after it are answered next (reply -> pump)."""
    waiting = conn.waiting
    if isinstance(waiting, CrossReserve):
        if waiting.done:
            return  # settled: its reply waits only for its cancels' answers
        waiting.expire_at, waiting.reply = time.monotonic_ns(), proto.TIMED_OUT
        if len(waiting.answered) == len(waiting.rids):  # settled with no offer: waits
            self.finish_cross(waiting, proto.TIMED_OUT)
        return  # still collecting first answers: settle_cross decides
    if waiting is not None and conn.offered is None:  # (RESERVE_BETTER: answered at once)
        # withdraw the waiter; requests to a shard are ordered, so its answer comes
        # first if it served the reserve, else CANCELLED (on_reserved: TIMED_OUT)
        target = self.inflight[waiting][0] if waiting in self.inflight else self.hosted_index
        self.cancel(target, waiting, conn)


def on_reserved(self: ServingProcess, conn: Conn, payload: Sequence[Any]) -> None:
    """A reserve's answer: engine.Reserved, Final, or [CANCELLED]."""
    conn.waiting = None
    if len(payload) == len(Reserved._fields):
        _kind, reply, job_id, deadline = payload  # the fields of `Reserved`
        conn.hold(job_id, deadline)
        self.reply(conn, reply)
    elif len(payload) == len(Final._fields):
        self.reply(conn, Final._make(payload).reply)
    else:  # [CANCELLED]: withdrawn at end of input (reserve_at_eof)
        self.reply(conn, proto.TIMED_OUT)


def on_cross(self: ServingProcess, rid: int, cross: CrossReserve, payload: Sequence[Any]) -> None:
    """An offer-mode reserve's answer: engine.Offer, [WAITING] or [CANCELLED]."""
    kind, *_fields = payload
    if kind in (CANCELLED, OFFER):
        cross.live.discard(rid)
    if kind == OFFER:
        offer = Offer._make(payload)
        if cross.done:
            self.decline(cross.rids[rid], cross.conn, offer.job_id)
        else:
            cross.offers.append((rid, offer))
    if kind in (OFFER, WAITING):
        cross.answered.add(rid)
    if not cross.done and len(cross.answered) == len(cross.rids):
        self.settle_cross(cross)
    if rid not in cross.live:
        self.inflight.pop(rid, None)
    if cross.done and not cross.live:
        self.end_cross(cross)


def offer_order(entry: tuple[int, Offer]) -> tuple[int, int]:
    """Offers compare by (priority, put order): the most urgent, then the oldest."""
    return entry[1].pri, entry[1].seq


def settle_cross(self: ServingProcess, cross: CrossReserve) -> None:
    """Every shard has answered once: take the best offer, or decide to wait or stop."""
    if cross.offers:
        best_rid, best = min(cross.offers, key=offer_order)
        cross.offers.remove((best_rid, best))
        self.request(cross.rids[best_rid], ops.ACCEPT, cross.conn, JobArg(best.job_id), None)
        cross.conn.hold(best.job_id, time.monotonic_ns() + best.ttr)  # TTR starts now
        self.finish_cross(cross, best.reply)
        return
    now = time.monotonic_ns()
    if cross.expire_at is not None and now >= cross.expire_at:
        self.finish_cross(cross, cross.reply)
    elif cross.expire_at is not None:
        heapq.heappush(self.timers, (cross.expire_at, id(cross), cross))


def finish_cross(self: ServingProcess, cross: CrossReserve, reply: bytes | None) -> None:
    """Settle the reserve with `reply` (None: its connection went). The shards that still
    hold a waiter for it are told to drop it, and the reply waits for their answers: a
    client that sees RESERVED (or TIMED_OUT) and then asks `stats-tube` must not find this
    connection still waiting there, as beanstalkd never shows it."""
    if not cross.done:
        cross.done = True
        for rid, offer in cross.offers:  # collected, never settled: each goes back
            self.decline(cross.rids[rid], cross.conn, offer.job_id)
        cross.offers.clear()
        for rid in cross.live:
            if rid in self.cross:
                self.cancel(cross.rids[rid], rid, cross.conn)
    cross.answer = reply
    if not cross.live or reply is None or cross.conn.phase is CLOSED:
        self.end_cross(cross)


def decline(self: ServingProcess, shard: int, conn: Conn, job_id: int) -> None:
    """Give back a job `shard` offered to `conn`. Until the shard has taken it back, its
    published heads do not show the job (an offered job is not ready), though the client
    may know it is there (it was offered for a reserve this one settled with a better
    job): reserves here ask the shard until it answers (`doubt_heads`)."""
    if self.peer_heads is None or shard == self.hosted_index:
        self.request(shard, ops.DECLINE, conn, DeclineArgs(job_id, False), None)
    else:
        self.doubt_heads(shard, ops.DECLINE, conn, DeclineArgs(job_id, True))


def end_cross(self: ServingProcess, cross: CrossReserve) -> None:
    """The settled reserve's shards have all answered: forget it, and send its reply."""
    if not cross.live:
        for r in cross.rids:
            self.cross.pop(r, None)
    conn, reply = cross.conn, cross.answer
    cross.answer = None
    if conn.waiting is cross:
        conn.waiting = None
        if reply is not None and conn.phase is not CLOSED:
            self.reply(conn, reply)


def run_timers(self: ServingProcess, now: int) -> None:
    while self.timers and self.timers[0][0] <= now:
        _, _, cross = heapq.heappop(self.timers)
        if not cross.done:
            self.finish_cross(cross, cross.reply)


def reask_offers(self: ServingProcess, target: int) -> None:
    """Offers from the target that a cross-shard reserve collected and has not settled yet
    died with the process (the restarted shard has the jobs ready again): ask again, so
    an ACCEPT never goes out for a job the shard no longer holds for the connection."""
    for cross in {id(x): x for x in self.cross.values()}.values():
        if cross.done:
            continue
        for rid, offer in [(r, o) for r, o in cross.offers if cross.rids[r] == target]:
            cross.offers.remove((rid, offer))
            cross.answered.discard(rid)
            cross.live.add(rid)
            args = ReserveArgs(cross.tubes[rid], None, None, True)
            req = Request(ops.RESERVE, rid, cross.conn.id, args)
            self.inflight[rid] = (target, req)  # resent below with the other requests


def disconnect(self: ServingProcess, conn: Conn) -> None:
    """The connection closed: every shard it used forgets it. When it held jobs of several
    shards, those shards hold the jobs' tubes closed to reserves until all of them have
    made the jobs ready (their answers to DISCONNECT with hold), then UNHOLD opens them:
    nobody can take one of the jobs and then see another still reserved."""
    holding = {self.ids.job_shard(job_id) for job_id in conn.reserved}
    # another shard that gets jobs back has better heads than it has published until it
    # has taken the DISCONNECT: reserves ask it until its answer (processes/common/heads.py)
    doubted = holding - {self.hosted_index} if self.peer_heads is not None else set()
    if len(holding) < 2:
        holding = set()
    for shard in conn.shards - holding:
        if shard in doubted:
            self.doubt_heads(shard, ops.DISCONNECT, conn, DisconnectArgs(False, True))
        else:
            self.request(shard, ops.DISCONNECT, conn, DisconnectArgs(False, False), None)
    if not holding:
        return
    unanswered = set(holding)

    def answered(shard: int, _conn: Conn | None, _payload: Sequence[Any]) -> None:
        """A shard has the jobs ready and their tubes held: once all have, UNHOLD."""
        unanswered.discard(shard)
        if not unanswered:
            for target in holding:
                self.request(target, ops.UNHOLD, conn, (), None)

    hold = DisconnectArgs(True, False)
    for shard in holding:
        # forgotten, not resent, if the shard restarts (resync: its connection is gone);
        # the other shards' holds then end by themselves (closing.HOLD_S)
        if shard in doubted:
            self.doubt_heads(shard, ops.DISCONNECT, conn, hold, answered)
        else:
            rid = self.request(shard, ops.DISCONNECT, conn, hold, None)
            self.pending[rid] = (None, functools.partial(answered, shard))
            self.inflight[rid] = (shard, Request(ops.DISCONNECT, rid, conn.id, hold))


def doubt_heads(
    self: ServingProcess,
    shard: int,
    op: int,
    conn: Conn,
    args: Sequence[Any],
    then: Callable[[int, Conn | None, Sequence[Any]], None] | None = None,
) -> None:
    """Send `op`, a request that gives jobs back to `shard` and is answered once it has (a
    DISCONNECT or DECLINE with `answer`). The shard's published heads may be worse than its
    jobs until that answer: reserves ask it meanwhile; the answer goes on to `then`. Kept
    in flight as the requests that must be answered are: if the shard restarts, it is sent
    again, or dropped with its closed connection (peers.resync), so no entry waits for an
    answer that cannot come."""
    assert self.peer_heads is not None
    rid = self.request(shard, op, conn, args, None)
    self.inflight[rid] = (shard, Request(op, rid, conn.id, args))
    self.peer_heads.doubt(shard)
    self.pending[rid] = (None, functools.partial(trusted_then, self, shard, then))


def trusted_then(
    self: ServingProcess,
    shard: int,
    then: Callable[[int, Conn | None, Sequence[Any]], None] | None,
    conn: Conn | None,
    payload: Sequence[Any],
) -> None:
    """The shard answered the DISCONNECT: its heads hold the jobs given back (and `then`)."""
    assert self.peer_heads is not None
    self.peer_heads.trust(shard)
    if then is not None:
        then(shard, conn, payload)
