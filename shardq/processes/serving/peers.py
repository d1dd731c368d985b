"""Requests to the other processes: batching per peer, rids, replies routed back, and what a
restarted peer is sent again."""

from __future__ import annotations

import os
import selectors
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from shardq.cluster import wire
from shardq.cluster.wire import Reply, Request
from shardq.engine.engine import CANCELLED, OFFER
from shardq.engine.reserve import Offer
from shardq.processes.common import links
from shardq.processes.common.links import Again
from shardq.processes.serving import handoff
from shardq.processes.serving.clients import PRIVATE
from shardq.processes.serving.conn import CLOSED, COORDINATOR, IDLE, Conn, Done
from shardq.processes.shard import ops
from shardq.processes.shard.ops import (
    NO_REPLY,
    PIPELINED,
    BuryArgs,
    DeclineArgs,
    DeleteArgs,
)

if TYPE_CHECKING:
    from shardq.processes.serving.loop import ServingProcess


def request(
    self: ServingProcess,
    target: int,
    op: int,
    conn: Conn | None,
    args: Sequence[Any],
    done: Done | None,
) -> int:
    """Queue a request for `target` (its `args` in the op's shape); its rid."""
    rid = self.new_rid()
    if done is not None and conn is not None:
        self.pending[rid] = (conn, done)
    req = Request(op, rid, conn.id if conn else 0, args)
    if op not in NO_REPLY and (op != ops.REF or done is not None):
        self.inflight[rid] = (target, req)  # resent if the target restarts
    self.outq.setdefault(target, []).append(req)
    return rid


def cancel(self: ServingProcess, target: int, rid: int, conn: Conn) -> None:
    """Withdraw a cross-shard waiter; the CANCELLED answer says no offer can follow."""
    req = Request(ops.CANCEL, rid, conn.id, ())
    self.inflight[rid] = (target, req)
    self.outq.setdefault(target, []).append(req)


def call(
    self: ServingProcess, conn: Conn, target: int, op: int, args: Sequence[Any], done: Done
) -> None:
    """Send a command for a connection. A plain request/reply op to a shard is pipelined:
    the connection may send more to the same shard before the answer, since that shard
    answers in order; anything else makes the connection wait for its answer. For the
    hosted shard a plain op is applied at once, when nothing for that shard waits ahead
    of it (its reply still leaves only after the turn's log commit)."""
    if op in PIPELINED:
        if conn.phase is IDLE and target == self.hosted_index and not self.outq.get(target):
            # at once only with nothing of this connection in flight: replies in order
            assert self.hosted is not None
            done(conn, self.hosted.core.run(op, conn.id, args, time.monotonic_ns()))
            return
        conn.step("pipe")
        conn.piped += 1
        conn.pipe_target = target

        def piped_done(k: Conn, payload: Sequence[Any]) -> None:
            k.piped -= 1
            if not k.piped:
                k.step("drained")
            done(k, payload)

        self.request(target, op, conn, args, piped_done)
        return
    conn.step("call")
    self.request(target, op, conn, args, done)


def flush_requests(self: ServingProcess) -> None:
    self.retry_soon = False
    for target, batch in self.outq.items():
        if batch and self.up.get(target):
            try:
                self.socks[target].send(wire.pack(batch))
            except Again:
                self.retry_soon = True  # down, or too much queued for it; try next turn
                continue
            batch.clear()
    if self.handovers.answers:
        handoff.send_answers(self)  # those its peers' full inboxes did not take yet


def retry_links(self: ServingProcess) -> None:
    """Reach the peers that are down and due again; one reached says UP through its
    descriptor (on_monitor)."""
    links.retry_due(self.retrying, time.monotonic())
    for dealer in [d for d in self.retrying if d.stream is not None]:
        self.retrying.discard(dealer)


def on_monitor(self: ServingProcess, target: int, event: str) -> None:
    """A link's change: the peer went (DOWN) or is reached (UP, also after a restart)."""
    if event == links.DOWN:
        self.up[target] = False
        self.retrying.add(self.socks[target])
        handoff.take_back(self, target)  # a serving process (its shard's) gone mid-handover
        return
    self.up[target] = True
    if target in self.seen_up:
        self.resync(target)
    elif target != COORDINATOR:
        # first contact: drop what this process's previous life left there
        self.outq.setdefault(target, []).insert(0, Request(ops.RESET, 0, self.index, ()))
    else:
        rid = self.request(COORDINATOR, wire.BLOCKS, None, [], None)
        self.pending[rid] = (None, self.got_blocks)
    self.seen_up.add(target)
    self.maybe_ready()


def on_blocks(self: ServingProcess, table: list[list[int]]) -> None:
    """The id blocks leased before this serving process started (a restart, or a log replayed)."""
    self.ids.load(table)
    self.maybe_ready()


def maybe_ready(self: ServingProcess) -> None:
    """Once every process is reachable and every id routable, start taking connections
    (until then clients wait in the listen backlog) and tell the supervisor."""
    if self.accepting or not self.ids.loaded or len(self.seen_up) < len(self.socks):
        return
    self.accepting = True
    self.sel.register(self.listener, selectors.EVENT_READ, None)
    if self.private is not None:
        self.sel.register(self.private, selectors.EVENT_READ, PRIVATE)
    if self.ready_fd >= 0:
        os.write(self.ready_fd, b"ready\n")
        os.close(self.ready_fd)
        self.ready_fd = -1


def resent(self: ServingProcess, req: Request) -> Request:
    """A request as it is sent again to a restarted process (its first try may have
    reached the log): references are already restored, and a delete or bury of a job
    the connection held is marked so the shard can tell "done before" from "not found"."""
    op = req.op
    if op == ops.REF:
        return req._replace(args=ops.RefArgs(ops.RefArgs._make(req.args).tube, 0, 0))
    conn = self.conns.get(req.conn)
    if op == ops.DELETE or op == ops.BURY:
        args = (DeleteArgs if op == ops.DELETE else BuryArgs)._make(req.args)
        if conn is not None and args.job_id in conn.reserved:
            return req._replace(args=args._replace(resent=True))
    return req


def resync(self: ServingProcess, target: int) -> None:
    """The target restarted: restore tube references, then resend what it never answered."""
    refs: list[Request] = []
    if target != COORDINATOR:
        counts: dict[str, list[int]] = {}
        for conn in self.conns.values():
            counts.setdefault(conn.use, [0, 0])[0] += 1
            for tube in conn.watch:
                counts.setdefault(tube, [0, 0])[1] += 1
        for tube, (using, watching) in counts.items():
            if self.shard_of(tube) == target:
                refs.append(Request(ops.REF, 0, self.index, ops.RefArgs(tube, using, watching)))
        now = time.monotonic_ns()
        for conn in self.conns.values():
            for job_id, deadline in conn.reserved.items():
                if deadline >= now and self.ids.job_shard(job_id) == target:
                    reassert = ops.ReassertArgs(job_id, deadline)
                    refs.append(Request(ops.REASSERT, 0, conn.id, reassert))
        # a restarted shard may hand out jobs now
        refs.append(Request(ops.SETTLED, 0, self.index, ()))
    self.reask_offers(target)
    if self.peer_heads is not None:
        self.peer_heads.forget(target)  # restarted: its table is made again
    resend = []
    for rid, (t, req) in sorted(self.inflight.items()):
        if t != target:
            continue
        if req.conn == 0 or req.conn in self.conns:
            resend.append(self.resent(req))
        else:
            self.drop_request(rid)  # its connection is gone: nothing of it survives
    queued = [r for r in self.outq.get(target, []) if r.rid not in self.inflight]
    self.outq[target] = refs + resend + queued


def got_blocks(self: ServingProcess, _conn: Conn | None, payload: Sequence[Any]) -> None:
    """The coordinator's table of leased id blocks (asked for on first contact)."""
    (table,) = payload  # wire.Answer
    self.on_blocks(table)


def drop_request(self: ServingProcess, rid: int) -> None:
    """Forget an unanswered request of a closed connection instead of resending it to a
    restarted process (a reserve sent again would wait, or take a job, for nobody). A
    cross-shard reserve's part counts as cancelled: no offer can come from it."""
    self.inflight.pop(rid, None)
    self.pending.pop(rid, None)
    cross = self.cross.get(rid)
    if cross is not None:
        self.on_cross(rid, cross, [CANCELLED])


def on_replies(self: ServingProcess, batch: Sequence[Reply] | Sequence[Sequence[Any]]) -> None:
    """Replies from a peer (lists, as unpacked) or from the hosted shard (`Reply`s)."""
    for rid, payload in batch:
        if rid == 0:
            continue
        cross = self.cross.get(rid)
        if cross is not None:
            self.on_cross(rid, cross, payload)
            continue
        self.inflight.pop(rid, None)
        entry = self.pending.pop(rid, None)
        if entry is None:
            if len(payload) == len(Offer._fields):
                self.decline_stray(Offer._make(payload))
            continue
        conn, done = entry
        if conn is None or conn.phase is not CLOSED:
            try:
                done(conn, payload)  # type: ignore[arg-type]
            except Exception:  # a bug must cost one command, not every connection
                self.internal_error(conn, f"the answer {payload!r} to request {rid}")


def decline_stray(self: ServingProcess, offer: Offer) -> None:
    """An offer for a reserve this serving process no longer tracks: give the job back. Offers
    and cancels are ordered, so this should not happen; if it does, a job must not stay
    offered to a connection that is not waiting for it."""
    shard = self.ids.job_shard(offer.job_id)
    if offer.kind == OFFER and shard is not None:
        decline = Request(ops.DECLINE, 0, offer.conn, DeclineArgs(offer.job_id, False))
        self.outq.setdefault(shard, []).append(decline)
