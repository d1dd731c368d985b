"""Children forked from the supervisor, not executed: a server answers ≈ 0.1 s after launch.

A child started with ``python -m`` spends ≈ 0.1 s starting Python and importing what it
runs, and the processes of a server do that side by side on the same cores. The supervisor
imports every role once (`preload`) and forks: a child starts with everything imported and
goes straight to its role (`shardq.processes.supervision.child.run_and_exit`).

Forking is safe here because the supervisor has no thread (it never opens a link to
another process). What a fresh process would not have is undone in the child before
it runs anything: the supervisor's signal handlers go back to the defaults (the signals the
supervisor blocked stay blocked, as across an exec), every descriptor but stdio and
`pass_fds` is closed (as `subprocess` does), and the process is named after its role
(``/proc/PID/comm``, what ``ps -o comm``, ``top`` and ``pgrep`` show; the command line stays
the supervisor's). The child always leaves through ``os._exit``: the supervisor's exit
handlers and buffers are not its own.

`Forked` is the handle the supervisor keeps: `poll`, `wait`, `send_signal`, `kill` and
`returncode` as `subprocess.Popen` has them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence

from shardq.processes.common.procname import comm_name, set_name

WAIT_STEP_S = 0.005  #: how often `wait` with a timeout looks again
#: dispositions the supervisor sets that a child must not keep
RESET_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGCHLD)
#: held from before the fork until the child has reset its dispositions
HELD_ACROSS_FORK = {*RESET_SIGNALS, signal.SIGINT}


class TimeoutExpired(Exception):
    """`Forked.wait` ran out of time."""


def close_other_fds(keep: Sequence[int]) -> None:
    """Close every descriptor above stderr but those in `keep`."""
    low = 3
    for fd in sorted(set(keep)):
        if fd >= low:
            os.closerange(low, fd)
            low = fd + 1
    os.closerange(low, os.sysconf("SC_OPEN_MAX"))


class Forked:
    """A forked child as the supervisor sees it."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """The exit status (-N: killed by signal N) once it has ended, else None."""
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: gone all the same
                self.returncode = -1
                return self.returncode
            if pid == self.pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutExpired(self.pid)
            time.sleep(WAIT_STEP_S)
        return code

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:  # never signal a pid that may have been reused
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def fork_child(label: str, pass_fds: Sequence[int], run: Callable[[], object]) -> Forked:
    """Fork; the child becomes a fresh-looking process named after `label` and calls `run`
    (which should not return; if it does, or raises, the child exits 1)."""
    sys.stdout.flush()
    sys.stderr.flush()
    # A signal that reaches the child before its dispositions are reset would run the
    # supervisor's handler there and be lost (seen: a SIGTERM sent right after the fork left
    # a serving process running until SIGKILL). Held across the fork, it waits in the
    # child until the reset, then acts as on a fresh process.
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, HELD_ACROSS_FORK)
    pid = os.fork()
    if pid:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        return Forked(pid)
    try:
        for signum in RESET_SIGNALS:
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        close_other_fds(pass_fds)
        set_name(comm_name(label))
        run()
    finally:
        os._exit(1)
