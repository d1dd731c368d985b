"""Fixtures for the process-level integration tests: a shardq server we can signal.

``tests/conftest.py`` gives a port; the supervisor tests also need the
supervisor's pid, its run directory, its stderr and its children. The
``shardq_server`` factory starts ``python -m shardq serve`` in a session of its
own with ``--run-dir`` under ``tmp_path`` and ``TMPDIR`` pointed at an empty
directory, so anything the server leaves behind is visible to the test.

Children are found by scanning ``/proc`` with ``shardq.bench.procs`` (the
bench's and tools' code too).

The greenstalk client tests (test_greenstalk*.py) get a shardq port, with 1 and with 4
shards, and greenstalk clients on it: ``port``, ``connect`` and ``client``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import greenstalk
import pytest
from helpers import REPO_ROOT

from shardq.bench.procs import (
    is_alive,
    kill_group,
    kill_pids,
    role_pids,
    session_members,
    terminate,
    wait_listening,
)

#: Seconds to wait for the "listening" line.
START_TIMEOUT = 20.0
#: Seconds the teardown gives a server to exit on SIGTERM before it kills what is left.
TEARDOWN_TIMEOUT = 10.0


@dataclass
class Server:
    """A running ``shardq serve`` started by :func:`shardq_server`."""

    proc: subprocess.Popen[bytes]
    port: int
    run_dir: Path
    tmp_dir: Path
    stderr_path: Path
    shards: int
    colocate: bool = True  # the serving process hosts shard 0 (no `shard 0` process)

    is_alive = staticmethod(is_alive)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def roles(self) -> dict[str, int]:
        """Role -> pid of the supervisor's live children."""
        return role_pids(self.pid)

    def expected_roles(self) -> set[str]:
        serving = self.serving()
        hosted = range(serving) if self.colocate else range(0)
        shards = {f"shard {i}" for i in range(self.shards) if i not in hosted}
        if serving == 1:
            return {"coordinator", "serving"} | shards
        return {"coordinator"} | {f"serving {i}" for i in range(serving)} | shards

    def serving(self) -> int:
        """The serving processes asked for on the command line (launch's default: 1)."""
        args = self.proc.args
        assert isinstance(args, list)
        return int(args[args.index("--serving") + 1])

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
        """Live processes that belong to this server (started in a session of its own)."""
        return session_members(self.proc.pid)

    def socket_files(self) -> list[Path]:
        found = []
        for root in (self.run_dir, self.tmp_dir):
            if root.exists():
                found += [p for p in root.rglob("*") if p.is_socket()]
        return found


def _kill_leftovers(server: Server) -> None:
    """SIGKILL, by pid, whatever this server left running (never a broad match)."""
    if server.proc.poll() is None:
        kill_group(server.proc)
    kill_pids(server.leftovers())


#: What :func:`launch` returns: (proc, run_dir, tmp_dir, stderr_path).
Launched = tuple[subprocess.Popen[bytes], Path, Path, Path]


def launch(tmp_path: Path, shards: int, extra: tuple[str, ...] = (), port: int = 0) -> Launched:
    """Start ``shardq serve`` (not waiting for it); return (proc, run_dir, tmp_dir, stderr)."""
    base = tmp_path / f"srv{time.monotonic_ns()}"
    run_dir, tmp_dir = base / "run", base / "tmp"
    tmp_dir.mkdir(parents=True)
    stderr_path = base / "stderr.log"
    cmd = [sys.executable, "-m", "shardq", "serve", "-l", "127.0.0.1", "-p", str(port)]
    cmd += ["--shards", str(shards), "--run-dir", str(run_dir), *extra]
    if "--serving" not in extra:
        cmd += ["--serving", "1"]  # a test that wants several says so
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
        port, data = wait_listening(proc, START_TIMEOUT)
        colocate = "--no-colocate" not in extra
        server = Server(proc, 0, run_dir, tmp_dir, stderr_path, shards, colocate)
        servers.append(server)
        if port is None:
            _kill_leftovers(server)
            pytest.fail(
                f"shardq did not report its port within {START_TIMEOUT} s "
                f"(exit {proc.poll()}); stdout {data[:300]!r}\nstderr:\n{server.stderr()[-3000:]}"
            )
        server.port = port
        return server

    yield start
    for server in servers:
        terminate(server.proc, TEARDOWN_TIMEOUT, group=True)
        _kill_leftovers(server)
        if server.proc.stdout is not None:
            server.proc.stdout.close()


@pytest.fixture
def shardq_launch(tmp_path: Path) -> Callable[..., Launched]:
    """``shardq_launch(shards, extra=(), port=0)``: :func:`launch` under this test's tmp_path."""

    def start(shards: int, extra: tuple[str, ...] = (), port: int = 0) -> Launched:
        return launch(tmp_path, shards, extra, port)

    return start


# --------------------------------------------------------------------------- greenstalk


@pytest.fixture(params=[1, 4], ids=["1shard", "4shards"])
def port(request, start_shardq) -> int:
    return start_shardq(request.param)


@pytest.fixture
def connect(port):
    """Factory of greenstalk clients (bytes bodies), all closed at teardown."""
    clients: list[greenstalk.Client] = []

    def make(**kwargs) -> greenstalk.Client:
        kwargs.setdefault("encoding", None)
        client = greenstalk.Client(("127.0.0.1", port), **kwargs)
        client._sock.settimeout(10)  # a hung server fails the test instead of hanging it
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def client(connect) -> greenstalk.Client:
    return connect()
