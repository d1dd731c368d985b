"""A stop signal wakes a process loop that is about to sleep (the self-pipe trick).

Python runs a signal's handler between bytecodes of the main thread. A signal that arrives
after the loop's last bytecode and before its poll system call starts does not interrupt
the poll: the handler (SIGTERM's `sys.exit`) waits until the poll times out (seen: a shard
told to stop right after start-up stopped a second late, its poll's longest sleep). With a
wakeup fd, the C-level handler also writes a byte to a pipe the loop polls, so the poll
returns at once and the handler runs.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from types import FrameType

READ_CHUNK = 512
#: selector data that marks the signal pipe in a loop's selector
SIGNALLED = object()


def exit_on_sigterm(_signum: int, _frame: FrameType | None) -> None:
    """SIGTERM: leave through `sys.exit`, so the loop's `finally` closes its sockets and
    syncs its log."""
    sys.exit(0)


def install() -> int:
    """Make every signal with a Python handler write to a pipe; the pipe's read end, for
    the loop to poll (read it empty with `drain`)."""
    r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    return r


def drain(fd: int) -> None:
    """Empty the pipe (the handlers themselves run at the next bytecode)."""
    with contextlib.suppress(BlockingIOError):
        while os.read(fd, READ_CHUNK):
            pass
