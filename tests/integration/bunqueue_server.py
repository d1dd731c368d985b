"""The two servers of the bunqueue tests: shardq with its bunqueue front-end (both ports
from the listening lines), and the real bunqueue 2.9.5 (npm, pinned by
tests/bunqueue/sdk/package-lock.json: ``make test`` installs it) started on free ports and
stopped by its PID — the oracle of the differential tests."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import REPO_ROOT, poll_for, skip_or_fail
from kestrel_server import TEARDOWN_TIMEOUT, front_servers

from shardq.bench.procs import free_port, terminate

SDK_DIR = REPO_ROOT / "tests" / "bunqueue" / "sdk"
BIN_DIR = SDK_DIR / "node_modules" / ".bin"
#: seconds the real server may take to listen (Bun starts slowly on a busy machine)
REAL_START_TIMEOUT = 60.0
INSTALL_HINT = "the real bunqueue needs `npm ci` in tests/bunqueue/sdk (make test does it)"


@dataclass
class BunqueueServer:
    proc: object
    port: int  # beanstalk
    bunqueue: int
    run_dir: Path
    stderr_path: Path

    def stop(self) -> int | None:
        return terminate(self.proc, TEARDOWN_TIMEOUT, group=True)  # type: ignore[arg-type]


@pytest.fixture(name="bunqueue_server")
def bunqueue_server_fixture(tmp_path: Path) -> Iterator[Callable[..., BunqueueServer]]:
    """Factory: ``bunqueue_server(shards, extra=()) -> BunqueueServer``, always stopped."""
    yield from front_servers(tmp_path, "bunqueue", BunqueueServer)


def accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def sdk_env() -> dict[str, str]:
    """Bun and bunqueue from the pinned install first on PATH (never an auto-installed
    latest: scripts run from SDK_DIR resolve its node_modules)."""
    return {**os.environ, "PATH": f"{BIN_DIR}{os.pathsep}{os.environ.get('PATH', '')}"}


def bun() -> str:
    path = shutil.which("bun", path=str(BIN_DIR))
    if path is None:
        skip_or_fail(INSTALL_HINT)
    return path


@pytest.fixture(name="real_bunqueue")
def real_bunqueue_fixture(tmp_path: Path) -> Iterator[Callable[..., int]]:
    """Factory: ``real_bunqueue() -> its TCP port``; every one started is stopped by PID."""
    if not (BIN_DIR / "bunqueue").exists():
        skip_or_fail(INSTALL_HINT)
    procs: list[subprocess.Popen[bytes]] = []

    def start(*extra: str, env: dict[str, str] | None = None) -> int:
        port, http = free_port(), free_port()
        argv = [str(BIN_DIR / "bunqueue"), "start", "--host", "127.0.0.1"]
        argv += ["--tcp-port", str(port), "--http-port", str(http), *extra]
        log = open(tmp_path / f"bunqueue-{port}.log", "wb")  # noqa: SIM115 (the process's)
        environ = {**sdk_env(), **(env or {})}
        proc = subprocess.Popen(argv, cwd=SDK_DIR, env=environ, stdout=log, stderr=log)
        log.close()
        procs.append(proc)

        def up() -> bool:
            return proc.poll() is not None or accepts(port)

        poll_for(up, REAL_START_TIMEOUT, 0.05)
        assert proc.poll() is None, (tmp_path / f"bunqueue-{port}.log").read_text()
        return port

    yield start
    for proc in procs:
        terminate(proc, TEARDOWN_TIMEOUT)
