"""The serving process's entry: its signals, its settings, its loop, and its clean exit.

SIGTERM leaves through `sys.exit` (the `finally` below closes the sockets and syncs the
hosted shard's log); SIGUSR1 drains; a signal ends the loop's wait at once
(`processes/wakeup.py`).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import socket
from types import FrameType
from typing import TYPE_CHECKING

from shardq.cluster.routing import SPREAD, TubeShards
from shardq.processes import live, wakeup
from shardq.processes.acceptor import handoff
from shardq.processes.acceptor.loop import Acceptor
from shardq.processes.listener import parse_networks
from shardq.processes.shard import ShardCore

if TYPE_CHECKING:
    import ssl


def main(
    listen_fd: int,
    run_dir: str,
    shards: int,
    max_job_size: int,
    ready_fd: int,
    draining: bool,
    hosted: ShardCore | None = None,
    poll_us: int = 100,
    index: int = 0,
    serving: int = 1,
    max_connections: int = 0,
    max_output_bytes: int = 4 << 20,
    allow: tuple[str, ...] = (),
    tls: ssl.SSLContext | None = None,
    private_fd: int = -1,
    routing: str = SPREAD,
    handshake_s: float = 5.0,
) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, wakeup.exit_on_sigterm)
    acceptor = Acceptor(
        listen_fd,
        run_dir,
        shards,
        max_job_size,
        hosted,
        index,
        serving,
        max_connections,
        max_output_bytes,
    )
    acceptor.spin_s = poll_us / 1e6
    acceptor.tube_shards = TubeShards(shards, routing)  # tube -> shard, as the log says
    acceptor.allow = parse_networks(allow)
    acceptor.tls = tls
    acceptor.handshake_s = handshake_s
    acceptor.home_ok = hosted is not None and tls is None  # TLS reads go the general way
    if private_fd >= 0:
        acceptor.private = socket.socket(fileno=private_fd)
        acceptor.private.setblocking(False)
    live.on_change(acceptor.take_limits)
    acceptor.draining = draining
    acceptor.ready_fd = ready_fd

    def drain(_signum: int, _frame: FrameType | None) -> None:
        acceptor.draining = True  # SIGUSR1: accept no more, as beanstalkd

    signal.signal(signal.SIGUSR1, drain)
    acceptor.sel.register(wakeup.install(), selectors.EVENT_READ, wakeup.SIGNALLED)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})  # blocked by the supervisor
    try:
        acceptor.serve_forever()
    finally:
        for s in acceptor.socks.values():
            s.close(0)
        acceptor.listener.close()
        if acceptor.private is not None:
            acceptor.private.close()
        if serving > 1:
            with contextlib.suppress(OSError):
                os.unlink(handoff.handoff_path(run_dir, index))
        if acceptor.hosted is not None:
            acceptor.hosted.sock.close(0)
            acceptor.hosted.core.close()
