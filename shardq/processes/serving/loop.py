"""The serving process: client TCP connections in, batched requests out to the shards.

One epoll loop owns every client socket and the links (common/links.py) to the shards and
the coordinator. Each connection runs one command at a time, like beanstalkd: its next
command is parsed only once the reply to the current one is written, so replies are
always in order. Requests produced in one turn of the loop go to each shard as one
message, and the shard answers them with one message.

The serving process may *host* a shard (`hosted`): that shard's ShardCore runs in this
process, so commands for its tubes are applied in the same turn with no hop; its Router
still answers the coordinator and the other serving processes. Its log is committed before
any output of the turn leaves, so a reply is never sent for a change the log does not hold.

A reserve whose watched tubes all live on one shard goes to that shard, which keeps the
waiter, its timeout and its DEADLINE_SOON. A reserve that spans shards is run here: each
shard is asked to *offer* a job; the serving process accepts the best (priority, put order) one,
declines the rest (they go back to their place) and cancels the other waiters. Every
offer is answered, so a job is never lost to a reserver that went away.

The serving process is one class made of rooms, one concern each: peers.py (requests to the
other processes), clients.py (client sockets), handlers.py (the commands), cross.py
(reserves), ids.py (job ids), waiting.py (how a turn waits for input); state.py holds
its state; this module makes the class of them and runs its loop.
"""

from __future__ import annotations

import functools
import selectors
from selectors import EVENT_READ, EVENT_WRITE
from typing import TYPE_CHECKING

from shardq.cluster import wire
from shardq.engine.core import EngineCore
from shardq.processes.common import collector, lifeline, wakeup
from shardq.processes.common.clock import monotonic
from shardq.processes.common.links import Dealer
from shardq.processes.common.poller import item
from shardq.processes.serving import (
    clients,
    cross,
    handlers,
    handoff,
    ids,
    peers,
    tls,
    waiting,
)
from shardq.processes.serving.clients import PRIVATE
from shardq.processes.serving.clients import read as read_client
from shardq.processes.serving.conn import CLOSED, LOCAL, Conn
from shardq.processes.serving.state import ServingState
from shardq.processes.shard.direct import Direct
from shardq.processes.shard.ops import COUNTS
from shardq.processes.shard.server import ShardServer

if TYPE_CHECKING or __file__.endswith(".py"):  # the pure build: no-op decorators
    from shardq.nocython import cython
else:  # compiled: Cython reads the decorators (and imports nothing at run time)
    import cython

#: what a descriptor is ready for, as the events a turn reads test it (compiled: C
#: integers, loop.pxd; as module globals, each test made two Python ints)
READABLE, WRITABLE = EVENT_READ, EVENT_WRITE


class ServingProcess(ServingState):
    # the rooms' functions, as methods (each room: a module of functions taking the process)
    request = peers.request
    cancel = peers.cancel
    call = peers.call
    flush_requests = peers.flush_requests
    retry_links = peers.retry_links
    on_monitor = peers.on_monitor
    on_blocks = peers.on_blocks
    got_blocks = peers.got_blocks
    maybe_ready = peers.maybe_ready
    resent = peers.resent
    resync = peers.resync
    drop_request = peers.drop_request
    on_replies = peers.on_replies
    decline_stray = peers.decline_stray
    do_reserve = cross.do_reserve
    reserve_hosted = cross.reserve_hosted
    reserve_against_home = cross.reserve_against_home
    on_better = cross.on_better
    on_reserved = cross.on_reserved
    on_cross = cross.on_cross
    settle_cross = cross.settle_cross
    finish_cross = cross.finish_cross
    end_cross = cross.end_cross
    run_timers = cross.run_timers
    reask_offers = cross.reask_offers
    reserve_at_eof = cross.reserve_at_eof
    disconnect = cross.disconnect
    doubt_heads = cross.doubt_heads
    decline = cross.decline
    reply = clients.reply
    flush_output = clients.flush_output
    finish = clients.finish
    write = clients.write
    accept = clients.accept
    job_limit = clients.job_limit
    is_private = clients.is_private
    pause_accepting = clients.pause_accepting
    resume_accepting = clients.resume_accepting
    read = clients.read
    handshake = tls.handshake
    read_pending = tls.read_pending
    admit_handshake = tls.admit_handshake
    start_handshake = tls.start_handshake
    expire_handshakes = tls.expire_handshakes
    pump = clients.pump
    run_backlog = clients.run_backlog
    close = clients.close
    unlist = clients.unlist
    interest = clients.interest
    overflow = clients.overflow
    pause_input = clients.pause_input
    dispatch = clients.dispatch
    internal_error = clients.internal_error
    out_of_memory = clients.out_of_memory
    shard_of = ids.shard_of
    ask_lease = ids.ask_lease
    leased = ids.leased
    joins_pipe = handlers.joins_pipe
    forward = handlers.forward
    reply_first = handlers.reply_first
    by_id = handlers.by_id
    do_put = handlers.do_put
    put_with_id = handlers.put_with_id
    forget = handlers.forget
    do_reserve_job = handlers.do_reserve_job
    on_reserved_job = handlers.on_reserved_job
    on_touched = handlers.on_touched
    quit = handlers.quit
    do_use = handlers.do_use
    reply_using = handlers.reply_using
    reply_watching = handlers.reply_watching
    do_watch = handlers.do_watch
    do_ignore = handlers.do_ignore
    do_stats = handlers.do_stats
    connection_fields = handlers.connection_fields
    open_handoff = handoff.open_handoff
    home_owner = handoff.home_owner
    should_move = handoff.should_move
    hand_off = handoff.hand_off
    adopt = handoff.adopt
    move_home = handoff.move_home
    leaves_now = staticmethod(handoff.leaves_now)
    wait = waiting.wait
    sleep_s = waiting.sleep_s
    poll_briefly = waiting.poll_briefly

    @cython.locals(self=ServingState, core=Direct, engine=EngineCore)  # (compiled: C structs)
    def turn(self) -> None:
        """One turn of the loop: wait for input, run due timers, the clients' commands, the
        peers' replies and the hosted shard's requests, commit the log, send. With one
        client waiting for each answer every command is a turn of its own, so each step is
        skipped when it has nothing to do (measured: tools/serving_cycle.py --conns 1)."""
        events = self.wait()
        self.worked = bool(events)
        hosted, core = self.hosted, self.hosted_core  # (core: hosted.core, typed)
        if core is not None:  # timers before new commands
            engine = core.engine
            now = monotonic()
            if engine.due(now):
                engine.tick(now)
        if self.backlog:
            self.run_backlog()  # what the last turn left, before anything new is read
        if events:
            self.handle_events(events)
        if self.touched:
            self.drain_links()
        if self.retrying:
            self.retry_links()
        if self.timers:
            self.run_timers(monotonic())
        if hosted is not None:
            self.run_hosted(hosted)
        if self.outq or self.retry_soon or self.handovers.answers:
            self.flush_requests()  # (which also ends a retry_soon)
        if self.dirty:
            self.flush_output()

    @cython.locals(self=ServingState, conn=Conn, mask=cython.long)
    def handle_events(self, events: list[tuple[selectors.SelectorKey, int]]) -> None:
        inbox = None
        for key, mask in events:
            data = item(key, 3)  # key.data (compiled: a C read, poller.pxd)
            if type(data) is Conn:  # the most of them: first
                conn = data  # (compiled: its fields read as a C struct's)
                if mask & WRITABLE:
                    self.dirty.add(conn)  # written by flush_output, which also moves it home
                if mask & READABLE and conn.phase is not CLOSED:
                    read_client(self, conn)  # (compiled: a C call, loop.pxd)
            elif data is None:
                self.accept()
            elif data is PRIVATE:
                self.accept(private=True)
            elif type(data) is handoff.HandoffInbox:
                inbox = data
            elif data is wakeup.SIGNALLED:
                wakeup.drain(key.fd)
            else:
                self.touched.add(data)  # a link's end
        if inbox is not None:  # after the clients: a close they sent is seen before
            self.adopt(inbox)  # the commands of a connection that arrived with it

    @cython.locals(self=ServingState, server=ShardServer, core=Direct, engine=EngineCore)
    def run_hosted(self, server: ShardServer) -> None:
        """Apply the requests for the hosted shard, and whatever their answers lead to, until
        nothing is left; commit its log; only then may this turn's replies go out. Replies
        and engine events reach on_replies in the order they happened (see
        ShardCore.handle_into), events of commands applied directly (call) included."""
        core, index, out = self.hosted_core, self.hosted_index, self.hosted_out
        assert core is not None  # server.core, typed
        engine = core.engine
        now = monotonic()  # turn() ran the timers before reading the clients
        router = server.router
        if router in self.touched or server.held():
            self.touched.discard(router)  # what receive leaves, held() says
            batches = server.receive()  # from the coordinator, or another serving process
            if any(wire.op_of(raw) == COUNTS for _peer, batch in batches for raw in batch):
                # a `stats` counts what happened before it: take in what the clients sent
                # before the question reached us (a close on another connection, say)
                self.handle_events(self.sel.select(0))
                now = monotonic()
            server.handle(batches, now, out)
        handle_into = core.handle_into
        while True:
            if engine.events:
                core.route_events(out)  # from direct runs, before anything queued after them
            batch = self.outq.get(index)
            if batch:
                self.outq[index] = []
                for req in batch:
                    handle_into(LOCAL, req, now, out)
            else:
                core.take_events(now, out)
            local = out.pop(LOCAL, None)
            if local:
                self.on_replies(local)  # may run more commands for the hosted shard
            elif not batch:
                break
            now = monotonic()
        core.commit()
        if out:
            server.send_replies(out)
            out.clear()

    def drain_links(self) -> None:
        """Read each dealer whose descriptor fired to its end: its changes (up, down) and
        its replies, in order. (The hosted shard's Router is run_hosted's.) A reply leaves
        its end only once decoded; an end read to its end leaves `touched`, and its
        descriptor fires again for anything new."""
        for end in list(self.touched):
            if not isinstance(end, Dealer):
                continue  # the hosted shard's Router
            on_change = functools.partial(self.on_monitor, self.target_of[end])
            while (data := end.next_message(on_change)) is not None:
                batch = wire.unpack(data)
                end.taken()
                self.on_replies(batch)
            self.touched.discard(end)

    def serve_forever(self) -> None:
        while True:
            lifeline.check()
            try:
                collector.settle()  # no collection pause that grows with the jobs held
                self.turn()
            except MemoryError:  # ending the process would drop every client (and, without
                self.out_of_memory()  # -b, the hosted shard's jobs): go on with the next turn
