"""Server CPU for a client that thinks 1 ms between puts (4 s): no polling, this build's
adaptive polling, and optionally another checkout's build (its path as the argument).

    python tools/poll_cost.py [OTHER_CHECKOUT]
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from shardq.bench.procs import stat_fields, terminate, tree, wait_listening

HERE = str(Path(__file__).resolve().parents[1])
TCK = os.sysconf("SC_CLK_TCK")
SECONDS = 4.0
THINK_S = 0.001
log = logging.getLogger("poll_cost")


def ticks(pid: int) -> int:
    """User + system CPU ticks of a process and its descendants."""
    total = 0
    for p in tree(pid):
        fields = stat_fields(p)
        if fields:
            total += int(fields[11]) + int(fields[12])
    return total


def run(cwd: str, extra: list[str]) -> tuple[int, float]:
    """(puts done, server CPU in cores) for one thinking client against a fresh server."""
    cmd = [sys.executable, "-m", "shardq", "serve", "-l", "127.0.0.1", "-p", "0", *extra]
    proc = subprocess.Popen(
        cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        port, _ = wait_listening(proc, 30)
        assert port is not None, "the server did not start"
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        time.sleep(0.5)
        start_ticks, start = ticks(proc.pid), time.monotonic()
        puts = 0
        while time.monotonic() - start < SECONDS:
            sock.sendall(b"put 0 0 60 1\r\nx\r\n")
            sock.recv(100)
            puts += 1
            time.sleep(THINK_S)
        cpu = (ticks(proc.pid) - start_ticks) / TCK / (time.monotonic() - start)
        sock.close()
        return puts, cpu
    finally:
        terminate(proc, 10, group=True)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    cases = [("no polling (--poll-us 0)", HERE, ["--poll-us", "0"]), ("this build", HERE, [])]
    if len(sys.argv) > 1:
        cases.append((f"build in {sys.argv[1]}", sys.argv[1], []))
    for label, cwd, extra in cases:
        puts, cpu = run(cwd, extra)
        log.info("%-30s puts %5d  server CPU %5.1f %% of a core", label, puts, cpu * 100)


if __name__ == "__main__":
    main()
