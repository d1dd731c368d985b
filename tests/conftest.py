"""Shared fixtures: a real beanstalkd 1.12 (the oracle) and a shardq server.

Every fixture starts a fresh server per test on a free loopback port, so the
suite is parallel-safe under ``pytest -n auto``.

Set ``SHARDQ_DIFF_SELFTEST=1`` to make every "shardq" server another
beanstalkd. The differential suite then compares the oracle with itself, which
proves the harness and the sessions independently of the shardq code.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TESTS_DIR.parent
if str(TESTS_DIR) not in sys.path:  # make `import helpers` work from every test package
    sys.path.insert(0, str(TESTS_DIR))

from helpers import drain_stream, read_line, selftest_mode  # noqa: E402

BEANSTALKD_HINT = "beanstalkd 1.12 is required under CI: apt-get install -y beanstalkd"
#: Seconds to wait for shardq's "listening" line.
SHARDQ_START_TIMEOUT = 20.0
#: Seconds to wait for a server to exit after SIGTERM.
STOP_TIMEOUT = 10.0
_LISTENING = re.compile(rb"^shardq listening on 127\.0\.0\.1:(\d+)\r?\n$")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _is_listening(port: int) -> bool:
    """True if some socket listens on 127.0.0.1:port.

    Reads /proc/net/tcp instead of connecting, so the probe does not show up in
    the server's ``total-connections``.
    """
    want_local = f"0100007F:{port:04X}"
    try:
        with open("/proc/net/tcp") as f:
            next(f)
            for line in f:
                fields = line.split()
                if fields[1] == want_local and fields[3] == "0A":
                    return True
    except OSError:
        return False
    return False


def _beanstalkd_binary() -> str:
    path = shutil.which("beanstalkd")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(BEANSTALKD_HINT)
        pytest.skip(BEANSTALKD_HINT)
    return path


def _stop(proc: subprocess.Popen[bytes], name: str, own_session: bool = False) -> None:
    """SIGTERM the process (by its own pid), SIGKILL it after STOP_TIMEOUT."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_TIMEOUT)
        return
    except subprocess.TimeoutExpired:
        pass
    proc.kill()
    if own_session:
        # The server was started in a session of its own: also kill helpers it left behind.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=STOP_TIMEOUT)
    pytest.fail(f"{name} (pid {proc.pid}) did not exit within {STOP_TIMEOUT} s of SIGTERM")


def _start_beanstalkd(procs: list[subprocess.Popen[bytes]]) -> int:
    binary = _beanstalkd_binary()
    last_error = ""
    for _attempt in range(5):
        port = _free_port()
        with tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(
                [binary, "-l", "127.0.0.1", "-p", str(port)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
            deadline = time.monotonic() + 10.0
            while proc.poll() is None and time.monotonic() < deadline:
                if _is_listening(port):
                    procs.append(proc)
                    return port
                time.sleep(0.005)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            err.seek(0)
            last_error = err.read().decode(errors="replace")
    raise RuntimeError(f"could not start beanstalkd on a free port: {last_error}")


def _start_shardq(shards: int, procs: list[subprocess.Popen[bytes]]) -> int:
    if selftest_mode():
        return _start_beanstalkd(procs)
    cmd = [sys.executable, "-m", "shardq", "serve", "-l", "127.0.0.1", "-p", "0"]
    cmd += ["--shards", str(shards)]
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            cmd,
            cwd=REPO_ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            start_new_session=True,
        )
        procs.append(proc)
        data = read_line(proc, SHARDQ_START_TIMEOUT)
        match = _LISTENING.match(data.partition(b"\n")[0] + b"\n")
        if match is None:
            if proc.poll() is None:
                proc.kill()
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            err.seek(0)
            stderr = err.read().decode(errors="replace")
            pytest.fail(
                f"shardq --shards {shards} did not print 'shardq listening on 127.0.0.1:<port>' "
                f"within {SHARDQ_START_TIMEOUT} s (exit status {proc.poll()}); "
                f"stdout: {data[:500]!r}\nstderr:\n{stderr[-4000:]}"
            )
    threading.Thread(target=drain_stream, args=(proc.stdout,), daemon=True).start()
    return int(match.group(1))


@pytest.fixture
def start_beanstalkd() -> Iterator[Callable[[], int]]:
    """Factory: start a fresh beanstalkd on a free port and return the port."""
    procs: list[subprocess.Popen[bytes]] = []
    yield lambda: _start_beanstalkd(procs)
    for proc in procs:
        _stop(proc, "beanstalkd")


@pytest.fixture
def beanstalkd_port(start_beanstalkd: Callable[[], int]) -> int:
    """Port of a fresh beanstalkd 1.12 listening on 127.0.0.1."""
    return start_beanstalkd()


@pytest.fixture
def start_shardq() -> Iterator[Callable[[int], int]]:
    """Factory: ``start_shardq(shards) -> port`` for a fresh shardq server."""
    procs: list[subprocess.Popen[bytes]] = []
    yield lambda shards=1: _start_shardq(shards, procs)
    for proc in procs:
        _stop(proc, "shardq", own_session=True)
        assert proc.returncode is not None, "shardq did not exit"


@pytest.fixture
def shardq_port(request: pytest.FixtureRequest, start_shardq: Callable[[int], int]) -> int:
    """Port of a fresh shardq; the shard count comes from an indirect param (default 1)."""
    shards = getattr(request, "param", 1)
    return start_shardq(shards)
