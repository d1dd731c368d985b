"""Starting a shardq server with its Kestrel front-end for the Kestrel tests: both ports
from the two listening lines, and a raw Kestrel client with deadlines on every read."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest
from helpers import REPO_ROOT

from shardq.bench.procs import (
    bunqueue_port,
    drain_stream,
    kestrel_port,
    kill_group,
    kill_pids,
    listening_port,
    read_lines,
    session_members,
    terminate,
    workq_port,
)

T = TypeVar("T")
READ_DEADLINE = 5.0
START_TIMEOUT = 20.0
TEARDOWN_TIMEOUT = 10.0


def launch(
    tmp_path: Path, shards: int, extra: tuple[str, ...]
) -> tuple[subprocess.Popen[bytes], Path, Path]:
    """``shardq serve`` with the Kestrel front-end on a free port: (proc, run dir, stderr)."""
    base = tmp_path / f"k{time.monotonic_ns()}"
    base.mkdir(parents=True)
    run_dir, stderr_path = base / "run", base / "stderr.log"
    cmd = [sys.executable, "-m", "shardq", "serve", "-l", "127.0.0.1", "-p", "0"]
    cmd += ["--shards", str(shards), "--run-dir", str(run_dir), *extra]
    if "--serving" not in extra:
        cmd += ["--serving", "1"]
    with open(stderr_path, "wb") as err:
        proc = subprocess.Popen(
            cmd,
            cwd=REPO_ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            start_new_session=True,
        )
    return proc, run_dir, stderr_path


@dataclass
class KestrelServer:
    proc: subprocess.Popen[bytes]
    port: int  # beanstalk
    kestrel: int
    run_dir: Path
    stderr_path: Path

    def stop(self) -> int | None:
        return terminate(self.proc, TEARDOWN_TIMEOUT, group=True)


def start_front(
    tmp_path: Path, shards: int, extra: tuple[str, ...], front: str
) -> tuple[subprocess.Popen[bytes], int, int, Path, Path]:
    """``shardq serve`` with the `front` front-end (kestrel, workq) on a free port: (proc,
    beanstalk port, front-end port, run dir, stderr), read from the listening lines."""
    proc, run_dir, stderr_path = launch(tmp_path, shards, (f"--{front}-port", "0", *extra))
    data = read_lines(proc, 2, START_TIMEOUT)
    port = listening_port(data.partition(b"\n")[0] + b"\n")
    fport = {"kestrel": kestrel_port, "workq": workq_port, "bunqueue": bunqueue_port}[front](data)
    if port is None or fport is None:
        kill_group(proc)
        pytest.fail(f"no listening lines: {data!r}\n{stderr_path.read_text()[-3000:]}")
    threading.Thread(target=drain_stream, args=(proc.stdout,), daemon=True).start()
    return proc, port, fport, run_dir, stderr_path


def start(tmp_path: Path, shards: int, extra: tuple[str, ...] = ()) -> KestrelServer:
    return KestrelServer(*start_front(tmp_path, shards, extra, "kestrel"))


def front_servers(tmp_path: Path, front: str, wrap: Callable[..., T]) -> Iterator[Callable[..., T]]:
    """A fixture's factory: ``make(shards, extra=())`` starts a server with the `front`
    front-end and gives it as `wrap` (its fields: start_front's answer); every server it
    made is stopped at the end, whatever the test did."""
    procs: list[subprocess.Popen[bytes]] = []

    def make(shards: int = 1, extra: tuple[str, ...] = ()) -> T:
        started = start_front(tmp_path, shards, extra, front)
        procs.append(started[0])
        return wrap(*started)

    yield make
    for proc in procs:
        terminate(proc, TEARDOWN_TIMEOUT, group=True)
        if proc.poll() is None:
            kill_group(proc)
        kill_pids(session_members(proc.pid))


@pytest.fixture(name="kestrel_server")
def kestrel_server_fixture(tmp_path: Path) -> Iterator[Callable[..., KestrelServer]]:
    """Factory: ``kestrel_server(shards, extra=()) -> KestrelServer``, always stopped."""
    yield from front_servers(tmp_path, "kestrel", KestrelServer)


class Raw:
    """A raw Kestrel connection: send bytes, read exactly what is expected."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=READ_DEADLINE)
        self.buf = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_until(self, end: bytes, timeout: float = READ_DEADLINE) -> bytes:
        """Bytes up to and including the first `end`."""
        deadline = time.monotonic() + timeout
        while end not in self.buf:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = self.sock.recv(65536)
            if not chunk:
                raise AssertionError(f"EOF waiting for {end!r}; got {self.buf!r}")
            self.buf += chunk
        cut = self.buf.index(end) + len(end)
        out, self.buf = self.buf[:cut], self.buf[cut:]
        return out

    def ask(self, data: bytes, end: bytes = b"\r\n") -> bytes:
        self.send(data)
        return self.read_until(end)

    def get(self, key: str) -> bytes:
        """A get's whole answer: VALUE ... END, or END."""
        self.send(f"get {key}\r\n".encode())
        return self.read_until(b"END\r\n")

    def eof(self, timeout: float = READ_DEADLINE) -> bool:
        self.sock.settimeout(timeout)
        return self.buf == b"" and self.sock.recv(1) == b""

    def close(self) -> None:
        self.sock.close()
