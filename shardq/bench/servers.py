"""Start a server command on a free port, wait until it answers, and read the CPU time and
memory of its whole process tree from /proc (shardq is a supervisor plus children)."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def command_argv(template: str, port: int) -> list[str]:
    """`{port}` filled in; a bare `shardq` runs this interpreter's shardq (no PATH needed)."""
    argv = shlex.split(template.replace("{port}", str(port)))
    if argv and argv[0] == "shardq" and shutil.which("shardq") is None:
        argv = [sys.executable, "-m", "shardq", *argv[1:]]
    return argv


def _stat(pid: int) -> list[bytes] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    return data[data.rindex(b")") + 2 :].split()


def tree(root: int) -> list[int]:
    """`root` and all its live descendants."""
    parent: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(int(name))
            if st is not None and st[0] not in (b"Z", b"X"):
                parent[int(name)] = int(st[1])
    out, frontier = [root], [root]
    while frontier:
        frontier = [p for p, pp in parent.items() if pp in frontier]
        out.extend(frontier)
    return [p for p in out if p in parent]


def role(pid: int) -> str:
    """A short name: the shardq child role (acceptor, shard, coordinator) or the program."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return "?"
    if "shardq.processes.child" in args:
        i = args.index("shardq.processes.child")
        return args[i + 1] if i + 1 < len(args) else "child"
    if "shardq.processes.supervisor" in args or "serve" in args:
        return "supervisor"
    return Path(args[0]).name if args else "?"


def cpu_ticks(pids: list[int]) -> dict[int, int]:
    """utime+stime per pid, in clock ticks."""
    out = {}
    for pid in pids:
        st = _stat(pid)
        if st is not None:
            out[pid] = int(st[11]) + int(st[12])
    return out


def cpu_delta(before: dict[int, int], after: dict[int, int]) -> dict[int, float]:
    """CPU seconds per pid between two snapshots (a pid new in `after` counts from zero)."""
    return {pid: (t - before.get(pid, 0)) / CLK_TCK for pid, t in after.items()}


def memory(pids: list[int]) -> dict[str, int]:
    """Sum of RSS and of PSS (shared pages split between the processes) in bytes."""
    rss = pss = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm") as f:
                rss += int(f.read().split()[1]) * PAGE
        except OSError:
            continue
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        pss += int(line.split()[1]) * 1024
                        break
        except OSError:
            pass
    return {"rss": rss, "pss": pss}


def answers(port: int, timeout: float = 1.0) -> bool:
    """True when the server at `port` answers a `use default` (accepting alone is not ready)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(b"use default\r\n")
            return s.recv(64).startswith(b"USING default")
    except OSError:
        return False


class Server:
    """One server command running on a free port, stopped by its pid (SIGTERM, then SIGKILL)."""

    def __init__(self, template: str, start_timeout: float = 30.0) -> None:
        self.template = template
        self.port = free_port()
        self.argv = command_argv(template, self.port)
        self.log = tempfile.NamedTemporaryFile(  # noqa: SIM115 (lives as long as the server)
            prefix="shardq-bench-", suffix=".log", delete=False
        )
        self.proc = subprocess.Popen(
            self.argv, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log
        )
        deadline = time.monotonic() + start_timeout
        while not answers(self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = Path(self.log.name).read_text(errors="replace")[-2000:]
                raise RuntimeError(f"server {self.argv} did not start:\n{tail}")
            time.sleep(0.05)

    @property
    def pids(self) -> list[int]:
        return tree(self.proc.pid)

    def stop(self) -> None:
        """SIGTERM the command we started; SIGKILL it and any child it left behind."""
        children = [p for p in self.pids if p != self.proc.pid]
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for pid in children:
            st = _stat(pid)
            if st is not None and st[0] not in (b"Z", b"X"):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        self.log.close()
        os.unlink(self.log.name)

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
