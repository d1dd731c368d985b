"""The serving process: client TCP connections in, batched requests out to the shards.

One epoll loop owns every client socket and the ZeroMQ sockets to the shards and the
coordinator. Each connection runs one command at a time, like beanstalkd: its next
command is parsed only once the reply to the current one is written, so replies are
always in order. Requests produced in one turn of the loop go to each shard as one
message, and the shard answers them with one message.

The serving process may *host* a shard (`hosted`): that shard's ShardCore runs in this process,
so commands for its tubes are applied in the same turn with no ZeroMQ hop; its ROUTER
socket still answers the coordinator. Its log is committed before any output of the turn
leaves, so a reply is never sent for a change the log does not hold.

A reserve whose watched tubes all live on one shard goes to that shard, which keeps the
waiter, its timeout and its DEADLINE_SOON. A reserve that spans shards is run here: each
shard is asked to *offer* a job; the serving process accepts the best (priority, put order) one,
declines the rest (they go back to their place) and cancels the other waiters. Every
offer is answered, so a job is never lost to a reserver that went away.

The serving process is one class made of rooms, one concern each: peers.py (requests to the
other processes), clients.py (client sockets), handlers.py (the commands), cross.py
(reserves), ids.py (job ids), waiting.py (how a turn waits for input); this module holds
its state and its loop.
"""

from __future__ import annotations

import resource
import selectors
import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

import zmq

from shardq.cluster import wire
from shardq.cluster.routing import TubeShards, tagged
from shardq.cluster.wire import Request
from shardq.processes.common import lifeline, live, wakeup
from shardq.processes.common.listener import Network, parse_networks
from shardq.processes.common.settings import ServingSettings
from shardq.processes.common.sockpath import ipc_endpoint
from shardq.processes.common.zmqctx import context
from shardq.processes.serving import (
    clients,
    cross,
    handlers,
    handoff,
    home,
    ids,
    peers,
    tls,
    waiting,
)
from shardq.processes.serving.conn import CLOSED, COORDINATOR, LOCAL, Conn, CrossReserve, Done
from shardq.processes.serving.waiting import POLLIN, ZMQ_EVENTS
from shardq.processes.shard.core import ShardCore
from shardq.processes.shard.holding import Outbox
from shardq.processes.shard.ops import COUNTS
from shardq.processes.shard.server import ShardServer
from shardq.protocol.stats_keys import CMD_KEYS

if TYPE_CHECKING:
    import ssl


class ServingProcess:
    # the rooms' functions, as methods (each room: a module of functions taking the process)
    _dealer = peers._dealer
    new_rid = peers.new_rid
    request = peers.request
    cancel = peers.cancel
    call = peers.call
    flush_requests = peers.flush_requests
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
    on_reserved = cross.on_reserved
    on_cross = cross.on_cross
    settle_cross = cross.settle_cross
    finish_cross = cross.finish_cross
    end_cross = cross.end_cross
    run_timers = cross.run_timers
    reask_offers = cross.reask_offers
    reserve_at_eof = cross.reserve_at_eof
    disconnect = cross.disconnect
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
    take_id = ids.take_id
    alloc_id = ids.alloc_id
    lease = ids.lease
    on_lease = ids.on_lease
    leased = ids.leased
    job_shard = ids.job_shard
    joins_pipe = handlers.joins_pipe
    forward = handlers.forward
    reply_first = handlers.reply_first
    by_id = handlers.by_id
    do_put = handlers.do_put
    put_with_id = handlers.put_with_id
    put_stamp = handlers.put_stamp
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
    can_serve_home = home.can_serve_home
    serve_home = home.serve_home
    open_handoff = handoff.open_handoff
    home_owner = handoff.home_owner
    should_move = handoff.should_move
    hand_off = handoff.hand_off
    adopt = handoff.adopt
    move_home = handoff.move_home
    wait = waiting.wait
    sleep_s = waiting.sleep_s
    poll_briefly = waiting.poll_briefly

    def __init__(
        self,
        settings: ServingSettings,
        hosted: ShardCore | None = None,
        tls_context: ssl.SSLContext | None = None,
    ) -> None:
        """`hosted`: the shard it runs (`settings.hosted`, opened); `tls_context`: TLS on
        the beanstalk port (tls.cert, tls.key)."""
        index = settings.index  # this serving process among `serving` (the origin of its ids)
        self.index = index
        self.serving = serving = settings.serving
        run_dir, shards = settings.common.run_dir, settings.common.shards
        max_connections = settings.door.max_connections
        self.listener = socket.socket(fileno=settings.listen_fd)
        self.listener.setblocking(False)
        # the run directory's unix socket, for the server's own front-ends (Kestrel): no TLS,
        # no allow-list (only the server's user can open the run directory)
        self.private: socket.socket | None = None
        self.shard_count = shards
        self.max_job_size = max_job_size = settings.max_job_size
        self.ctx = context()
        self.socks: dict[int, zmq.Socket] = {}
        endpoints = {i: ipc_endpoint(run_dir, f"shard-{i}") for i in range(shards)}
        endpoints[COORDINATOR] = ipc_endpoint(run_dir, "coordinator")
        self.sel = selectors.DefaultSelector()
        self.hosted: ShardServer | None = None
        self.hosted_index = -2  # no shard index
        self.hosted_out: Outbox = {}  # peer -> replies of the hosted shard
        if hosted is not None:
            self.hosted_index = hosted.index
            self.hosted = ShardServer(hosted, endpoints.pop(hosted.index))
            hosted.host_fields = self.connection_fields
            hosted_sock = self.hosted.sock
            self.sel.register(
                cast(int, hosted_sock.getsockopt(zmq.FD)), selectors.EVENT_READ, hosted_sock
            )
        for target in endpoints:
            self.socks[target] = self._dealer()
        self.dealers = list(self.socks.values())
        self.monitors: dict[int, zmq.Socket] = {}
        self.monitor_target: dict[zmq.Socket, int] = {}
        self.up: dict[int, bool] = {}  # target -> connected now
        self.seen_up: set[int] = set()  # targets that were connected at least once
        self.inflight: dict[int, tuple[int, Request]] = {}  # rid -> (target, request)
        for target, s in self.socks.items():
            self.sel.register(cast(int, s.getsockopt(zmq.FD)), selectors.EVENT_READ, s)
            mon = s.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED)
            self.monitors[target] = mon
            self.monitor_target[mon] = target
            self.sel.register(cast(int, mon.getsockopt(zmq.FD)), selectors.EVENT_READ, mon)
            s.connect(endpoints[target])  # after the monitor, so no CONNECTED event is missed
        zsocks = self.dealers + list(self.monitors.values())
        if self.hosted is not None:
            zsocks.append(self.hosted.sock)
        # ZeroMQ sockets whose state may have changed (their fd fired, or we sent on them):
        # only these need asking for input before the loop sleeps (each ask is 2 syscalls).
        self.touched: set[zmq.Socket] = set(zsocks)
        self.conns: dict[int, Conn] = {}
        self.rbuf = bytearray(clients.RECV_BYTES)  # every client read lands here first
        self.rview = memoryview(self.rbuf)
        # connection ids and rids carry this process's index (routing.origin_of); connection
        # ids start at the clock so they are unique across restarts too
        self.next_conn = tagged(time.time_ns() // 1000, index)
        self.next_rid = tagged(1, index)
        self.pending: dict[int, tuple[Conn | None, Done]] = {}
        self.cross: dict[int, CrossReserve] = {}
        self.outq: dict[int, list[Request]] = {}
        self.dirty: set[Conn] = set()
        self.backlog: set[Conn] = set()  # connections with commands left for the next turn
        self.timers: list[tuple[int, int, CrossReserve]] = []
        self.blocks: dict[int, int] = {}  # id block -> shard
        self.next_id: dict[int, int] = {}  # shard -> the next id of its current block
        self.end_id: dict[int, int] = {}  # shard -> the first id past its current block
        self.tube_shards = TubeShards(shards, settings.routing)  # tube -> shard, as the log says
        self.spare: dict[int, list[range]] = {}  # shard -> the next blocks, leased ahead
        self.leasing: dict[int, int] = {}  # shard -> leases asked for and not answered
        self.lease_waiters: dict[int, list[Callable[[], None]]] = {}
        self.stats = dict.fromkeys(CMD_KEYS, 0)
        self.total_connections = 0
        # limits: max_connections is the server's, each serving process takes its share
        self.max_connections = max_connections
        self.conn_limit = -(-max_connections // serving)  # 0: no limit
        self.connections_refused = 0
        self.allow: tuple[Network, ...] = parse_networks(settings.door.allow)  # () = any
        self.connections_denied = 0
        self.tls = tls_context
        #: the fast path (home.py) is on: a hosted shard, no TLS (set_fast_path)
        self.home_ok = hosted is not None and tls_context is None  # TLS reads: general path
        self.tls_failed = 0
        self.handshakes: dict[Conn, float] = {}  # TLS handshakes under way -> deadline (tls.py)
        self.handshake_s = settings.door.tls_handshake_timeout
        self.max_handshakes = tls.MAX_HANDSHAKES
        self.max_output = settings.door.max_output_bytes
        self.output_closed = 0
        job_max = max(max_job_size, clients.FRONT_MAX_JOB)
        self.max_input = max(clients.INPUT_BYTES, job_max + 1024)  # + a put line
        self.draining = settings.draining
        self.last_stamp = 0
        self.retry_soon = False
        self.worked = False  # the last turn had something to do (see poll_briefly)
        self.oom_logged_at = 0.0  # when running out of memory was last logged
        self.spin_s = settings.poll_us / 1e6  # how long poll_briefly polls (0: never)
        self.spin_skip = 0  # busy turns poll_briefly still sits out after a miss
        self.spin_backoff = 1  # how many turns the next miss makes it sit out
        self.ready_fd = settings.ready_fd  # the start-up pipe, written once all peers are up
        self.blocks_loaded = False
        self.accepting = False  # accepting clients: only once the id-block table is loaded
        self.accept_paused_until = 0.0  # monotonic s; out of descriptors (pause_accepting)
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        self.max_clients = max(1, soft - clients.FD_RESERVE) if soft > 0 else 1 << 30
        self.run_dir = run_dir
        self.handovers = handoff.Handovers()  # connections moving between serving processes
        if serving > 1:
            self.open_handoff(run_dir)

    def turn(self) -> None:
        """One turn of the loop: wait for input, run due timers, the clients' commands, the
        ZeroMQ replies and the hosted shard's requests, commit the log, send. With one
        client waiting for each answer every command is a turn of its own, so each step is
        skipped when it has nothing to do (measured: tools/serving_cycle.py --conns 1)."""
        events = self.wait()
        self.worked = bool(events)
        hosted = self.hosted
        if hosted is not None:
            hosted.core.engine.tick(time.monotonic_ns())  # timers before new commands
        if self.backlog:
            self.run_backlog()  # what the last turn left, before anything new is read
        if events:
            self.handle_events(events)
        if self.touched:
            self.drain_zmq()
        if self.timers:
            self.run_timers(time.monotonic_ns())
        if hosted is not None:
            self.run_hosted(hosted)
        if self.outq or self.retry_soon or self.handovers.answers:
            self.flush_requests()  # (which also ends a retry_soon)
        if self.dirty:
            self.flush_output()

    def handle_events(self, events: list[tuple[selectors.SelectorKey, int]]) -> None:
        inbox = None
        for key, mask in events:
            data = key.data
            if data is None:
                self.accept()
            elif data is clients.PRIVATE:
                self.accept(private=True)
            elif type(data) is Conn:
                if mask & selectors.EVENT_WRITE:
                    self.write(data)
                if mask & selectors.EVENT_READ and data.phase is not CLOSED:
                    self.read(data)
            elif type(data) is handoff.Inbox:
                inbox = data
            elif data is wakeup.SIGNALLED:
                wakeup.drain(key.fd)
            else:
                self.touched.add(data)  # a ZeroMQ socket
        if inbox is not None:  # after the clients: a close they sent is seen before
            self.adopt(inbox)  # the commands of a connection that arrived with it

    def take_limits(self, settings: live.Live) -> None:
        """New limits from a SIGHUP: they hold for what comes next (a connection already
        in is not closed for a lower max_connections)."""
        self.max_connections = settings.max_connections
        self.conn_limit = -(-settings.max_connections // self.serving)
        self.max_output = settings.max_output_bytes
        self.allow = parse_networks(settings.allow)

    def run_hosted(self, server: ShardServer) -> None:
        """Apply the requests for the hosted shard, and whatever their answers lead to, until
        nothing is left; commit its log; only then may this turn's replies go out. Replies
        and engine events reach on_replies in the order they happened (see
        ShardCore.handle_into), events of commands applied directly (call) included."""
        core, index, out = server.core, self.hosted_index, self.hosted_out
        now = time.monotonic_ns()  # turn() ran the timers before reading the clients
        if server.sock in self.touched and cast(int, server.sock.getsockopt(ZMQ_EVENTS)) & POLLIN:
            batches = server.receive()  # from the coordinator, or another serving process
            if any(Request._make(r).op == COUNTS for _peer, batch in batches for r in batch):
                # a `stats` counts what happened before it: take in what the clients sent
                # before the question reached us (a close on another connection, say)
                self.handle_events(self.sel.select(0))
                now = time.monotonic_ns()
            server.handle(batches, now, out)
        handle_into = core.handle_into
        while True:
            if core.engine.events:
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
            now = time.monotonic_ns()
        core.commit()
        if out:
            server.send_replies(out)
            out.clear()
            self.touched.add(server.sock)

    def drain_zmq(self) -> None:
        if not self.touched:
            return
        hosted = self.hosted.sock if self.hosted is not None else None
        for s in list(self.touched):
            target = self.monitor_target.get(s)
            if target is not None:
                while cast(int, s.getsockopt(ZMQ_EVENTS)) & POLLIN:
                    self.on_monitor(target, peers.monitor_event(s.recv_multipart()))
            elif s is not hosted:
                while cast(int, s.getsockopt(ZMQ_EVENTS)) & POLLIN:
                    self.on_replies(wire.unpack(s.recv()))

    def serve_forever(self) -> None:
        while True:
            lifeline.check()
            try:
                self.turn()
            except MemoryError:  # ending the process would drop every client (and, without
                self.out_of_memory()  # -b, the hosted shard's jobs): go on with the next turn
