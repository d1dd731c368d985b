"""Fixtures for the process-level integration tests: a shardq server we can signal.

``tests/conftest.py`` gives a port; the supervisor tests also need the
supervisor's pid, its run directory, its stderr and its children. The
``shardq_server`` factory starts ``python -m shardq serve`` in a session of its
own with ``--run-dir`` under ``tmp_path`` and ``TMPDIR`` pointed at an empty
directory, so anything the server leaves behind is visible to the test.

Children are found by scanning ``/proc`` (``/proc/<pid>/task/*/children``
needs CONFIG_PROC_CHILDREN, which not every kernel has).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from helpers import drain_stream, read_line

REPO_ROOT = Path(__file__).resolve().parents[2]
#: Seconds to wait for the "listening" line.
START_TIMEOUT = 20.0
#: Seconds a stopping server may take (the issue's limit).
STOP_LIMIT = 5.0
_LISTENING = re.compile(rb"^shardq listening on 127\.0\.0\.1:(\d+)\n$")


def proc_state(pid: int) -> str | None:
    """The one-letter state of ``pid`` from /proc, or None if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return stat[stat.rindex(b")") + 2 :].split()[0].decode()


def is_alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    state = proc_state(pid)
    return state is not None and state not in ("Z", "X")


def cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except (FileNotFoundError, ProcessLookupError):
        return []


def _ppid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return int(stat[stat.rindex(b")") + 2 :].split()[1])


def live_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def child_pids(parent: int) -> list[int]:
    """Live (non-zombie) direct children of ``parent``."""
    return [pid for pid in live_pids() if _ppid(pid) == parent and is_alive(pid)]


def pids_mentioning(text: str) -> list[int]:
    """Live processes whose command line mentions ``text`` (e.g. a unique run dir)."""
    me = os.getpid()
    return [
        pid
        for pid in live_pids()
        if pid != me and is_alive(pid) and any(text in arg for arg in cmdline(pid))
    ]


def child_role(pid: int) -> str | None:
    """'coordinator', 'acceptor' or 'shard <i>' for a `python -m shardq.processes.child` process."""
    args = cmdline(pid)
    if "shardq.processes.child" not in args:
        return None
    rest = args[args.index("shardq.processes.child") + 1 :]
    if not rest:
        return None
    return f"shard {rest[1]}" if rest[0] == "shard" else rest[0]


@dataclass
class Server:
    """A running ``shardq serve`` started by :func:`shardq_server`."""

    proc: subprocess.Popen[bytes]
    port: int
    run_dir: Path
    tmp_dir: Path
    stderr_path: Path
    shards: int
    colocate: bool = True  # the acceptor hosts shard 0 (no `shard 0` process)
    _stdout_rest: list[bytes] = field(default_factory=list)

    is_alive = staticmethod(is_alive)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def roles(self) -> dict[str, int]:
        """Role -> pid of the supervisor's live children."""
        out: dict[str, int] = {}
        for pid in child_pids(self.pid):
            role = child_role(pid)
            if role is not None:
                out[role] = pid
        return out

    def expected_roles(self) -> set[str]:
        hosted = 0 if self.colocate else None
        shards = {f"shard {i}" for i in range(self.shards) if i != hosted}
        return {"coordinator", "acceptor"} | shards

    def wait_all_children(self, timeout: float = 10.0) -> dict[str, int]:
        """Poll until every expected child runs; return role -> pid."""
        deadline = time.monotonic() + timeout
        while True:
            roles = self.roles()
            if set(roles) >= self.expected_roles():
                return roles
            if time.monotonic() >= deadline:
                raise AssertionError(
                    f"children {sorted(roles)} != expected {sorted(self.expected_roles())}"
                    f"\nstderr:\n{self.stderr()[-3000:]}"
                )
            time.sleep(0.02)

    def leftovers(self) -> list[int]:
        """Live processes that belong to this server (its run dir is in their argv)."""
        return pids_mentioning(str(self.run_dir))

    def socket_files(self) -> list[Path]:
        found = []
        for root in (self.run_dir, self.tmp_dir):
            if root.exists():
                found += [p for p in root.rglob("*") if p.is_socket()]
        return found


def _kill_leftovers(server: Server) -> None:
    """SIGKILL, by pid, whatever this server left running (never a broad match)."""
    if server.proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(server.proc.pid, signal.SIGKILL)
        server.proc.wait(timeout=10)
    for pid in server.leftovers():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def launch(
    tmp_path: Path, shards: int, extra: tuple[str, ...] = (), port: int = 0
) -> tuple[subprocess.Popen[bytes], Path, Path, Path]:
    """Start ``shardq serve`` (not waiting for it); return (proc, run_dir, tmp_dir, stderr)."""
    base = tmp_path / f"srv{time.monotonic_ns()}"
    run_dir, tmp_dir = base / "run", base / "tmp"
    tmp_dir.mkdir(parents=True)
    stderr_path = base / "stderr.log"
    cmd = [sys.executable, "-m", "shardq", "serve", "-l", "127.0.0.1", "-p", str(port)]
    cmd += ["--shards", str(shards), "--run-dir", str(run_dir), *extra]
    env = dict(os.environ, TMPDIR=str(tmp_dir))
    with open(stderr_path, "wb") as err:
        proc = subprocess.Popen(
            cmd,
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            start_new_session=True,
        )
    return proc, run_dir, tmp_dir, stderr_path


@pytest.fixture
def shardq_server(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """Factory: ``shardq_server(shards=1, extra=()) -> Server``, always cleaned up."""
    servers: list[Server] = []

    def start(shards: int = 1, extra: tuple[str, ...] = ()) -> Server:
        proc, run_dir, tmp_dir, stderr_path = launch(tmp_path, shards, extra)
        data = read_line(proc, START_TIMEOUT)
        match = _LISTENING.match(data.partition(b"\n")[0] + b"\n")
        colocate = "--no-colocate" not in extra
        server = Server(proc, 0, run_dir, tmp_dir, stderr_path, shards, colocate)
        servers.append(server)
        if match is None:
            _kill_leftovers(server)
            pytest.fail(
                f"shardq did not report its port within {START_TIMEOUT} s "
                f"(exit {proc.poll()}); stdout {data[:300]!r}\nstderr:\n{server.stderr()[-3000:]}"
            )
        server.port = int(match.group(1))
        threading.Thread(target=drain_stream, args=(proc.stdout,), daemon=True).start()
        return server

    yield start
    for server in servers:
        if server.proc.poll() is None:
            server.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                server.proc.wait(timeout=10)
        _kill_leftovers(server)
        if server.proc.stdout is not None:
            server.proc.stdout.close()


@pytest.fixture
def shardq_launch(tmp_path: Path) -> Callable[..., tuple]:
    """``shardq_launch(shards, extra=(), port=0)``: :func:`launch` under this test's tmp_path."""
    return lambda shards, extra=(), port=0: launch(tmp_path, shards, extra, port)
