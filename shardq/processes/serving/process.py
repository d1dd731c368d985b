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
from types import FrameType
from typing import TYPE_CHECKING

from shardq.processes.common import live, wakeup
from shardq.processes.common.settings import ServingSettings
from shardq.processes.serving import handoff
from shardq.processes.serving.loop import ServingProcess
from shardq.processes.shard.core import ShardCore

if TYPE_CHECKING:
    import ssl


def main(settings: ServingSettings, hosted: ShardCore | None, tls: ssl.SSLContext | None) -> None:
    """Serve: `hosted`, the shard it runs (opened from `settings.hosted`); `tls`, the
    beanstalk port's TLS context (from `settings.door`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, wakeup.exit_on_sigterm)
    serving_proc = ServingProcess(settings, hosted, tls)
    if settings.private_fd >= 0:
        serving_proc.private = socket.socket(fileno=settings.private_fd)
        serving_proc.private.setblocking(False)
    live.on_change(serving_proc.take_limits)

    def drain(_signum: int, _frame: FrameType | None) -> None:
        serving_proc.draining = True  # SIGUSR1: accept no more, as beanstalkd

    signal.signal(signal.SIGUSR1, drain)
    serving_proc.sel.register(wakeup.install(), selectors.EVENT_READ, wakeup.SIGNALLED)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})  # blocked by the supervisor
    try:
        serving_proc.serve_forever()
    finally:
        serving_proc.close_links()
        serving_proc.listener.close()
        if serving_proc.private is not None:
            serving_proc.private.close()
        if settings.serving > 1:
            with contextlib.suppress(OSError):
                os.unlink(handoff.handoff_path(settings.common.run_dir, settings.index))
        if serving_proc.hosted is not None:
            serving_proc.hosted.core.close()
