"""The serving process's entry: its signals, its settings, its loop, and its clean exit.

SIGTERM leaves through `sys.exit` (the `finally` below closes the sockets and syncs the
hosted shard's log); SIGUSR1 drains; a signal ends the loop's wait at once
(`processes/common/wakeup.py`).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import socket
import ssl
from types import FrameType

from shardq.cluster.routing import SPREAD, TubeShards
from shardq.processes.common import live, wakeup
from shardq.processes.common.listener import parse_networks
from shardq.processes.serving import handoff
from shardq.processes.serving.loop import ServingProcess
from shardq.processes.shard.core import ShardCore


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
    serving_proc = ServingProcess(
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
    serving_proc.spin_s = poll_us / 1e6
    serving_proc.tube_shards = TubeShards(shards, routing)  # tube -> shard, as the log says
    serving_proc.allow = parse_networks(allow)
    serving_proc.tls = tls
    serving_proc.handshake_s = handshake_s
    serving_proc.home_ok = hosted is not None and tls is None  # TLS reads go the general way
    if private_fd >= 0:
        serving_proc.private = socket.socket(fileno=private_fd)
        serving_proc.private.setblocking(False)
    live.on_change(serving_proc.take_limits)
    serving_proc.draining = draining
    serving_proc.ready_fd = ready_fd

    def drain(_signum: int, _frame: FrameType | None) -> None:
        serving_proc.draining = True  # SIGUSR1: accept no more, as beanstalkd

    signal.signal(signal.SIGUSR1, drain)
    serving_proc.sel.register(wakeup.install(), selectors.EVENT_READ, wakeup.SIGNALLED)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})  # blocked by the supervisor
    try:
        serving_proc.serve_forever()
    finally:
        for s in serving_proc.socks.values():
            s.close(0)
        serving_proc.listener.close()
        if serving_proc.private is not None:
            serving_proc.private.close()
        if serving > 1:
            with contextlib.suppress(OSError):
                os.unlink(handoff.handoff_path(run_dir, index))
        if serving_proc.hosted is not None:
            serving_proc.hosted.sock.close(0)
            serving_proc.hosted.core.close()
