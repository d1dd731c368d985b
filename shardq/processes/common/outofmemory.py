"""Out of memory in a process loop: the turn is given up, the process goes on.

Ending a process on MemoryError drops every client it serves, and a shard process without
-b takes its jobs with it; the supervisor's restart starts it again into the same shortage
or (its limit gone) with nothing. So every loop (shard, coordinator, front-ends, metrics;
the serving process has its own, serving/clients.out_of_memory) runs each turn through
`guard`: a turn that raised MemoryError is logged at most once a second and the next turn
goes on with what it had not done. What a request could not get is answered by the
request's own handler (OUT_OF_MEMORY, or the door's own answer); `guard` is the last resort
for what fails between requests.

Answering needs a little memory too (a reply appended to a client's output, a log line),
and when a request ran out there is none. So each process keeps a reserve of address space
(`Reserve`: an anonymous mapping, never touched, so no resident memory) that `note` gives
back before anything else: the handler that called it has room to answer and log, and
what the failed request had allocated is freed by the time the next turn takes the
reserve again.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

LOG_EVERY_S = 1.0
#: address space kept for answering once memory ran out: more than one of Python's
#: 1 MiB arenas (small objects) and a few replies
RESERVE_BYTES = 4 << 20


class Reserve:
    """Address space held back for answering out of memory, and when that was last logged."""

    def __init__(self) -> None:
        self.logged_at = -LOG_EVERY_S
        self.held: mmap.mmap | None = None

    def take(self) -> None:
        """Hold the reserve again if it was given back (nothing when memory is still short)."""
        if self.held is None:
            with contextlib.suppress(OSError, MemoryError):
                self.held = mmap.mmap(-1, RESERVE_BYTES)

    def give_back(self) -> None:
        if self.held is not None:
            self.held.close()
            self.held = None

    def log_due(self) -> bool:
        now = time.monotonic()
        if now < self.logged_at + LOG_EVERY_S:
            return False
        self.logged_at = now
        return True


RESERVE = Reserve()  #: this process's (one loop a process)


def note(what: str) -> None:
    """Memory ran out in `what`: the reserve is given back (room to answer), and it is
    logged at most once a second, without a traceback (formatting one needs memory)."""
    RESERVE.give_back()
    if RESERVE.log_due():
        log.error("out of memory in %s; going on", what)


def guard(turn: Callable[[], None]) -> None:
    """Run one turn of a loop; out of memory, the next turn goes on."""
    RESERVE.take()
    try:
        turn()
    except MemoryError:
        note("a turn of the loop")
