"""Busy neighbours: processes that each keep one core busy while a cell of `shardq bench
compare` runs, to show a server's behaviour on a loaded machine (the loaded rows of the
standard matrix: one client, one core taken by something else).

A neighbour is this interpreter spinning in a loop at normal priority, as a compile or a
test suite would; it is started before the cell's server and killed (by its pid) after.
"""

from __future__ import annotations

import subprocess
import sys
from types import TracebackType

#: What each neighbour runs: a pure-Python busy loop (no system calls, no memory), at normal
#: priority even when the bench itself runs under a real-time policy (`chrt`).
SPIN = (
    "import os\n"
    "os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))\n"
    "while True:\n"
    "    pass\n"
)


class Busy:
    """`with Busy(n):` n processes spinning for the duration of the block (n = 0: none)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.procs: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> Busy:
        for _ in range(self.n):
            self.procs.append(subprocess.Popen([sys.executable, "-c", SPIN]))
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        for p in self.procs:
            p.kill()
            p.wait(timeout=10)
        self.procs.clear()
