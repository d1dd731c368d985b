"""What a serving process holds, built from its settings: its sockets (the listener, the
dealers to the shards and the coordinator, the hosted shard's Router: common/links.py),
its connections, the requests in flight, its id blocks (`ids`, an IdLeases), its
limits and counters.

`ServingState` is the state part of `ServingProcess` (loop.py), which adds the rooms'
methods and the loop; the state is plain instance attributes, so reading it costs the
same wherever it was set up.
"""

from __future__ import annotations

import functools
import resource
import selectors
import socket
import time
from typing import TYPE_CHECKING, Any

from shardq.cluster.routing import MAX_SERVING, TubeShards, tagged
from shardq.cluster.wire import Request
from shardq.processes.common import links, live
from shardq.processes.common.clock import wall
from shardq.processes.common.heads import PeerHeads
from shardq.processes.common.links import Dealer, Router
from shardq.processes.common.listener import Network, parse_networks
from shardq.processes.common.poller import Poller
from shardq.processes.common.settings import ServingSettings
from shardq.processes.common.sockpath import link_path
from shardq.processes.serving import clients, handoff, tls
from shardq.processes.serving.conn import COORDINATOR, Conn, CrossReserve, Done
from shardq.processes.serving.ids import IdLeases
from shardq.processes.serving.outgoing import Outgoing
from shardq.processes.shard.core import ShardCore
from shardq.processes.shard.holding import Outbox
from shardq.processes.shard.server import ShardServer
from shardq.protocol.stats_keys import CMD_KEYS

if TYPE_CHECKING:
    import ssl


class ServingState:
    """A serving process's state (its methods: `ServingProcess`, loop.py)."""

    if TYPE_CHECKING:  # rooms' functions it calls once set up (methods of ServingProcess)

        def connection_fields(self) -> dict[str, Any]: ...

        def open_handoff(self, run_dir: str) -> None: ...

        def ask_lease(self, shard: int) -> None: ...

        def internal_error(
            self, conn: Conn | None, what: str, error: Exception | None = None
        ) -> None: ...

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
        #: the other shards' published heads: a reserve over several shards settled here
        #: when the hosted shard's job comes first (cross.py); None with one shard
        self.peer_heads = PeerHeads(run_dir) if shards > 1 else None
        self.max_job_size = max_job_size = settings.max_job_size
        self.socks: dict[int, Dealer] = {}  # target -> the link to it
        paths = {i: link_path(run_dir, f"shard-{i}") for i in range(shards)}
        paths[COORDINATOR] = link_path(run_dir, "coordinator")
        self.sel: selectors.BaseSelector = Poller()  # selectors' epoll, compiled
        self.hosted: ShardServer | None = None
        self.hosted_core: ShardCore | None = hosted  #: the hosted shard (`hosted.core`)
        self.hosted_index = -2  # no shard index
        self.hosted_out: Outbox = {}  # peer -> replies of the hosted shard
        if hosted is not None:
            self.hosted_index = hosted.index
            self.hosted = ShardServer(hosted, paths.pop(hosted.index))
            hosted.host_fields = self.connection_fields  # its part of `stats` (COUNTS)
            router = self.hosted.router
            self.sel.register(router.fd, selectors.EVENT_READ, router)
        for target, path in paths.items():
            dealer = self.socks[target] = Dealer(path, links.name())
            self.sel.register(dealer.fd, selectors.EVENT_READ, dealer)
        self.target_of = {dealer: target for target, dealer in self.socks.items()}
        self.up: dict[int, bool] = {}  # target -> connected now
        self.seen_up: set[int] = set()  # targets that were connected at least once
        self.inflight: dict[int, tuple[int, Request]] = {}  # rid -> (target, request)
        #: links that are down: connected again when due (peers.retry_links; the first turn
        #: makes the first connects)
        self.retrying: set[Dealer] = set(self.socks.values())
        #: ends whose descriptor fired: read to their end by the turn (an end that a turn
        #: out of memory left unread stays here, so the loop does not sleep on it)
        self.touched: set[Dealer | Router] = set()
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
        self.dirty = Outgoing()  #: the connections to write this turn
        self.backlog: set[Conn] = set()  # connections with commands left for the next turn
        self.timers: list[tuple[int, int, CrossReserve]] = []
        # the id blocks (ids.py), leases asked for through the coordinator
        self.ids = IdLeases(shards, self.ask_lease, functools.partial(self.internal_error, None))
        self.tube_shards = TubeShards(shards, settings.routing)  # tube -> shard, as the log says
        self.stats = dict.fromkeys(CMD_KEYS, 0)
        # the fast path's counts (home.py), C integers in the compiled build (a dict's
        # += costs more than the rest of a delete): `command_stats` adds them
        self.home_puts = 0
        self.home_reserves = 0
        self.home_timed_reserves = 0
        self.home_deletes = 0
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
        self.accepting = False  # accepting clients: only once the id-block table is loaded
        self.accept_paused_until = 0.0  # monotonic s; out of descriptors (pause_accepting)
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        self.max_clients = max(1, soft - clients.FD_RESERVE) if soft > 0 else 1 << 30
        self.run_dir = run_dir
        self.handovers = handoff.Handovers()  # connections moving between serving processes
        if serving > 1:
            self.open_handoff(run_dir)

    def close_links(self) -> None:
        """Close the links to the peers and the hosted shard's Router."""
        for dealer in self.socks.values():
            dealer.close()
        if self.hosted is not None:
            self.hosted.close()

    def take_limits(self, settings: live.Live) -> None:
        """New limits from a SIGHUP: they hold for what comes next (a connection already
        in is not closed for a lower max_connections)."""
        self.max_connections = settings.max_connections
        self.conn_limit = -(-settings.max_connections // self.serving)
        self.max_output = settings.max_output_bytes
        self.allow = parse_networks(settings.allow)

    def put_stamp(self) -> int:
        """A strictly increasing put-order stamp (wall-clock ns: it orders across restarts)."""
        stamp = wall()  # (compiled: the C library's clock)
        if stamp <= self.last_stamp:
            stamp = self.last_stamp + 1
        self.last_stamp = stamp
        return stamp

    def new_rid(self) -> int:
        """A request id unique across serving processes (its low bits: this one's index)."""
        rid = self.next_rid
        self.next_rid += MAX_SERVING
        return rid

    def command_stats(self) -> dict[str, int]:
        """The `cmd-*` counters of `stats`: the general path's and the fast path's."""
        counts = dict(self.stats)
        counts["cmd-put"] += self.home_puts
        counts["cmd-reserve"] += self.home_reserves
        counts["cmd-reserve-with-timeout"] += self.home_timed_reserves
        counts["cmd-delete"] += self.home_deletes
        return counts
