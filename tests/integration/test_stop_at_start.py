"""A server told to stop while it is still starting stops cleanly: every child leaves on
its own SIGTERM handler (none has to be killed after the grace period) and none outlives it.

Two races were behind stops that took 1–3 s (greenstalk's suite starts and stops a server
per test): a SIGTERM sent to a child right after its fork ran the supervisor's handler in
the child and was lost; and a signal that came just before a loop's poll started did not
end the poll (the handler waited for its timeout). See `forked.fork_child` and
`processes/common/wakeup.py`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from helpers import REPO_ROOT

#: when SIGTERM is sent: seconds after launch (None: as soon as the first child exists,
#: while the supervisor is still forking the others — where both races were)
DELAYS = (None, None, None, None, None, None, 0.0, 0.05, 0.1, 0.15, 0.2, 0.3)
EXIT_WITHIN_S = 20.0  #: far above the supervisor's 3 s grace: a hang, not a slow stop


def children_of(pid: int) -> set[int]:
    found: set[int] = set()
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found.update(int(c) for c in f.read().split())
    except OSError:
        pass
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("delay", DELAYS)
def test_sigterm_during_start_up_stops_every_process_without_a_kill(delay: float | None) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "shardq.dropin", "-l", "127.0.0.1", "-p", "0", "--shards", "4"],
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    seen: set[int] = set()
    deadline = time.monotonic() + (EXIT_WITHIN_S if delay is None else delay)
    while time.monotonic() < deadline and not (delay is None and seen):
        seen |= children_of(proc.pid)
        if delay is not None:
            time.sleep(0.002)
    seen |= children_of(proc.pid)
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=EXIT_WITHIN_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    lines = err.decode(errors="replace").splitlines()
    assert proc.returncode in (0, -signal.SIGTERM), lines
    assert not [line for line in lines if "killed" in line or "Traceback" in line], lines
    assert not [pid for pid in seen if alive(pid)], "children outlived the supervisor"
