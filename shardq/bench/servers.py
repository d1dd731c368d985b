"""Start a server command on a free port, wait until it answers, and read the CPU time and
memory of its whole process tree from /proc (shardq is a supervisor plus children).

The /proc reading and the stopping are `shardq.bench.procs`'s, shared with the tests and
tools/."""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from shardq.bench.procs import cmdline, free_port, is_alive, kill_pids, terminate, tree
from shardq.processes.supervision.child import role_of_pid
from shardq.processes.supervision.spawn import python_m

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
STOP_TIMEOUT_S = 10.0  #: how long a server may take to exit on SIGTERM before SIGKILL


def command_argv(template: str, port: int) -> list[str]:
    """`{port}` filled in; a bare `shardq` runs this interpreter's shardq (no PATH needed)."""
    argv = shlex.split(template.replace("{port}", str(port)))
    if argv and argv[0] == "shardq" and shutil.which("shardq") is None:
        argv = python_m("shardq", *argv[1:])
    return argv


def role(pid: int) -> str:
    """A short name: the shardq child role (serving process, shard, coordinator) or the program."""
    child = role_of_pid(pid)
    if child is not None:
        return child.split()[0]
    args = cmdline(pid)
    if not args:
        return "?"
    shardqd = any(Path(a).name == "shardqd" for a in args[:2])  # run as a script
    if "shardq.processes.supervision.supervisor" in args or "serve" in args or shardqd:
        return "supervisor"
    if "shardq.bench.stub" in args:
        return "stub"
    return Path(args[0]).name


def process_clock(pid: int) -> int:
    """The clock id of `pid`'s CPU time, all its threads (clock_getcpuclockid: Linux's
    MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)); any process may read another's."""
    return (~pid << 3) | 2


def cpu_ns(pids: list[int]) -> dict[int, int]:
    """CPU time per pid in nanoseconds, to the nanosecond. Not utime+stime of /proc/PID/stat:
    those are whole clock ticks (10 ms) per process, so a server of four processes that used
    6 ms in a 0.3 s cell read as 0.0 (seen in tests/integration/test_bench.py)."""
    out = {}
    for pid in pids:
        try:
            out[pid] = time.clock_gettime_ns(process_clock(pid))
        except OSError:  # gone meanwhile
            continue
    return out


def cpu_delta(before: dict[int, int], after: dict[int, int]) -> dict[int, float]:
    """CPU seconds per pid between two `cpu_ns` snapshots (a pid new in `after` counts from
    zero)."""
    return {pid: (t - before.get(pid, 0)) / 1e9 for pid, t in after.items()}


def busy_ticks() -> int:
    """Non-idle CPU ticks of the whole machine (/proc/stat), to see other processes' load."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return sum(fields) - fields[3] - (fields[4] if len(fields) > 4 else 0)


class CpuWindow:
    """CPU seconds of some processes, and of the whole machine, between `start` and `stop`:
    the server's CPU over exactly the measured seconds of a load (no set-up, no pre-fill)."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self.t0 = 0.0
        self.cpu_ns: dict[int, int] = {}
        self.busy = 0

    def start(self) -> None:
        self.cpu_ns = cpu_ns(self.pids)
        self.busy = busy_ticks()
        self.t0 = time.monotonic()

    def stop(self) -> dict[str, Any]:
        """wall_s, cpu_s (all the pids), per_pid (CPU seconds) and machine_s (every CPU)."""
        wall = time.monotonic() - self.t0
        per_pid = cpu_delta(self.cpu_ns, cpu_ns(self.pids))
        return {
            "wall_s": wall,
            "cpu_s": sum(per_pid.values()),
            "per_pid": per_pid,
            "machine_s": (busy_ticks() - self.busy) / CLK_TCK,
        }


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


def wait_answering(proc: subprocess.Popen[bytes], port: int, timeout: float) -> bool:
    """Until the server `proc` started answers on `port` (a server that replays a log binds
    its port first); False if it exited or `timeout` s passed."""
    deadline = time.monotonic() + timeout
    while not answers(port, timeout=max(0.1, min(1.0, deadline - time.monotonic()))):
        if proc.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


class Server:
    """One server command running on a free port, stopped by its pid (SIGTERM, then SIGKILL).

    Its output goes to a temporary file removed at `stop`, or is appended to `log_path`
    (kept). `new_session` starts it in a session of its own, so its whole process group can
    be killed at once (tools/crash_test.py). A server that does not come up raises
    RuntimeError naming it (`label`), its command, how it ended and the end of its own
    output (read before the temporary file is removed)."""

    def __init__(
        self,
        template: str,
        start_timeout: float = 30.0,
        *,
        log_path: Path | None = None,
        new_session: bool = False,
        cwd: Path | None = None,
        label: str = "server",
    ) -> None:
        self.template = template
        self.label = label
        self.port = free_port()
        self.argv = command_argv(template, self.port)
        self.keep_log = log_path is not None
        if log_path is None:
            fd, name = tempfile.mkstemp(prefix="shardq-bench-", suffix=".log")
            os.close(fd)
            log_path = Path(name)
        self.log_path = log_path
        try:
            with open(log_path, "ab") as log:
                self.proc = subprocess.Popen(
                    self.argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    start_new_session=new_session,
                    cwd=cwd,
                )
        except OSError as e:  # no such program, not executable, bad cwd
            self._remove_log()
            reason = e.strerror or str(e)
            raise RuntimeError(f"{label}: cannot run {shlex.join(self.argv)}: {reason}") from None
        if not wait_answering(self.proc, self.port, start_timeout):
            output = self.output_tail()
            status = self.proc.poll()
            self.stop()
            how = (
                f"exited with status {status}"
                if status is not None
                else f"did not answer within {start_timeout:g} s"
            )
            raise RuntimeError(
                f"{label} did not start: {shlex.join(self.argv)} {how} before answering on"
                f" 127.0.0.1:{self.port}; {output}"
            )

    def output_tail(self, limit: int = 2000) -> str:
        """The end of what the server printed, as a phrase for an error message."""
        try:
            text = self.log_path.read_text(errors="replace")[-limit:].strip()
        except OSError as e:
            return f"its output could not be read ({e.strerror or e})"
        if not text:
            return "it printed nothing"
        return "its output:\n" + "\n".join("  " + line for line in text.splitlines())

    def _remove_log(self) -> None:
        if not self.keep_log:
            self.log_path.unlink(missing_ok=True)

    @property
    def pids(self) -> list[int]:
        return tree(self.proc.pid)

    def stop(self) -> None:
        """SIGTERM the command we started; SIGKILL it and any child it left behind."""
        children = [p for p in self.pids if p != self.proc.pid]
        terminate(self.proc, STOP_TIMEOUT_S)
        kill_pids([pid for pid in children if is_alive(pid)])
        self._remove_log()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
