"""Out of memory in a process loop: the turn is given up, the process goes on.

Ending a process on MemoryError drops every client it serves, and a shard process without
-b takes its jobs with it; the supervisor's restart starts it again into the same shortage
or (its limit gone) with nothing. So every loop (shard, coordinator, front-ends, metrics;
the serving process has its own, acceptor/clients.out_of_memory) runs each turn through
`guard`: a turn that raised MemoryError is logged at most once a second and the next turn
goes on with what it had not done. What a request could not get is answered by the
request's own handler (OUT_OF_MEMORY, or the door's own answer); `guard` is the last resort
for what fails between requests.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

LOG_EVERY_S = 1.0


class Throttle:
    """When running out of memory was last logged (at most once every LOG_EVERY_S)."""

    def __init__(self) -> None:
        self.logged_at = -LOG_EVERY_S

    def due(self) -> bool:
        now = time.monotonic()
        if now < self.logged_at + LOG_EVERY_S:
            return False
        self.logged_at = now
        return True


THROTTLE = Throttle()  #: this process's (one loop a process)


def note(what: str) -> None:
    """Memory ran out in `what`; logged without a traceback (formatting one needs memory)."""
    if THROTTLE.due():
        log.error("out of memory in %s; going on", what)


def guard(turn: Callable[[], None]) -> None:
    """Run one turn of a loop; out of memory, the next turn goes on."""
    try:
        turn()
    except MemoryError:
        note("a turn of the loop")
        import traceback

        traceback.print_exc()
