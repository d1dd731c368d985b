"""A shard whose log cannot be written: it goes on serving, refuses puts, and retries.

An I/O error while writing or syncing the log (a failing disk, a full one, a file system
gone read-only), or memory running out while the turn's records are packed, used to end
the shard's process, and the supervisor restarted it into the
same error: with shard 0 inside a serving process, every client was dropped each time. Now:

* the fault is logged once, when it starts, and once when it is over;
* puts answer OUT_OF_MEMORY (`ShardCore.admit`), as beanstalkd does when its log is full;
  everything else (reserve, delete, release, bury, kick, stats…) goes on in memory, and
  the records it makes are dropped: the snapshot that ends the fault holds their effect;
* every 1, 2, 4… (at most 10) s the shard writes a snapshot of every live job to a new
  segment, syncs it and the directory, and drops the older segments (`Wal.rewrite`): after
  a failed fsync the older segments cannot be trusted to hold what was written to them,
  so only a fresh copy makes the jobs acknowledged before the fault durable again.

The turn in which the fault happens has replies already decided. With `-f MS` (or `-F`)
they go out: those jobs are as durable as any reply of the MS window before its fsync (the
snapshot tried at once, and then every retry, writes them). With `-f 0` a reply promises a
synced log, so when the snapshot tried at once fails too the process ends before any reply
of the turn leaves (the supervisor restarts it and it replays its log, as before).
"""

from __future__ import annotations

import errno
import logging
import time
from typing import TYPE_CHECKING

from shardq.storage.wal import HEADROOM

if TYPE_CHECKING:
    from shardq.processes.shard.core import ShardCore

log = logging.getLogger(__name__)

FIRST_RETRY_S = 1.0
MAX_RETRY_S = 10.0


class LogFault:
    """The log of `core` failed with `error`: one attempt now, then retries with back-off."""

    def __init__(
        self, core: ShardCore, error: OSError | MemoryError, starting: bool = False
    ) -> None:
        """`starting`: no segment could be opened at start-up (no reply is in flight)."""
        self.core = core
        self.delay = FIRST_RETRY_S
        self.next_try = 0.0
        self.since = time.monotonic()
        self.over = False  #: the log is written again
        wal = core.wal
        log.error(
            "shard %d: cannot write its log in %s: %s (a fresh segment needs about %d "
            "bytes for its live jobs); puts answer OUT_OF_MEMORY until it can (everything "
            "else goes on); trying a fresh segment every %.0f-%.0f s",
            core.index,
            wal.dir if wal is not None else "?",
            "out of memory" if isinstance(error, MemoryError) else error.strerror or error,
            core.engine.live_bytes + HEADROOM,
            FIRST_RETRY_S,
            MAX_RETRY_S,
        )
        if core.engine.wal_out is not None:
            core.engine.wal_out.clear()
        synced_replies = not starting and wal is not None and wal.fsync_ms == 0
        if not self.retry(time.monotonic()) and synced_replies:
            # -f 0: this turn's replies may not claim a synced log (an OSError ends the
            # process; a MemoryError would only end the turn, its replies sent the next)
            raise error if isinstance(error, OSError) else OSError(errno.ENOMEM, "out of memory")

    def retry(self, now: float) -> bool:
        """Try to end the fault (due or not yet): True when the log is written again."""
        core, wal = self.core, self.core.wal
        if now < self.next_try or wal is None:
            return False
        try:
            snapshot = core.engine.snapshot()
            wal.rewrite(snapshot)
        except (OSError, MemoryError):
            self.next_try = now + self.delay
            self.delay = min(self.delay * 2, MAX_RETRY_S)
            return False
        core.engine.log_stats = wal.stats()
        self.over = True
        if core.log_fault is self:
            core.log_fault = None
        log.warning(
            "shard %d: its log is written again (%d live jobs rewritten after %.1f s)",
            core.index,
            len(snapshot),
            now - self.since,
        )
        return True
