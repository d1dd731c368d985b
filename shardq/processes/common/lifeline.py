"""A child process's link to its supervisor: it must never outlive it.

PR_SET_PDEATHSIG (set in child.py) normally delivers SIGTERM when the supervisor dies;
this check is the fallback every process loop runs at least once a second.
"""

from __future__ import annotations

import os
import selectors
import sys
import time
from collections.abc import Callable

from shardq.processes.common import live, outofmemory, wakeup

CHECK_EVERY_S = 1.0  #: process loops wake at least this often to look
_SUPERVISOR = int(os.environ.get("SHARDQ_SUPERVISOR_PID", "0") or 0) or os.getppid()


_next_check = 0.0


def check() -> None:
    """Exit (cleanly: finally blocks run) if the supervisor is gone. Loops call this every
    turn; it asks the kernel at most once per CHECK_EVERY_S / 4 (a busy loop turns over
    tens of thousands of times a second, and the clock read is no system call)."""
    global _next_check
    if live._pending:
        live.apply_pending()
    now = time.monotonic()
    if now < _next_check:
        return
    _next_check = now + CHECK_EVERY_S / 4
    if os.getppid() != _SUPERVISOR:
        sys.exit(0)


def run(sel: selectors.BaseSelector, turn: Callable[[], None]) -> None:
    """A selector loop's life: the signal pipe polled in `sel` (a stop signal ends a wait at
    once), then `turn` after each `check`, until the supervisor goes or a signal ends it."""
    sel.register(wakeup.install(), selectors.EVENT_READ, wakeup.SIGNALLED)
    while True:
        check()
        outofmemory.guard(turn)  # out of memory, the next turn goes on
