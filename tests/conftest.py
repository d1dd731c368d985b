"""Shared fixtures: a real beanstalkd 1.12 (the oracle) and a shardq server.

Every fixture starts a fresh server per test on a free loopback port, so the
suite is parallel-safe under ``pytest -n auto``.

Set ``SHARDQ_DIFF_SELFTEST=1`` to make every "shardq" server another
beanstalkd. The differential suite then compares the oracle with itself, which
proves the harness and the sessions independently of the shardq code.

Process plumbing (free ports, the listening line, /proc, stopping) is
``shardq.bench.procs``, shared with the bench and tools/; pure test helpers are
``tests/helpers.py``. tests/ and tools/ are put on ``sys.path`` here, so every test
package can ``import helpers`` and the tools' modules (``crash_test``, ``gen_events``).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TESTS_DIR.parent
for _path in (TESTS_DIR, REPO_ROOT / "tools"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from helpers import Layout, layout_of, selftest_mode, skip_or_fail  # noqa: E402

from shardq.bench.procs import free_port, is_listening, kill_group, terminate, wait_listening  # noqa: E402

BEANSTALKD_HINT = "beanstalkd 1.12 is required under CI: apt-get install -y beanstalkd"
#: Seconds to wait for shardq's "listening" line.
SHARDQ_START_TIMEOUT = 20.0
#: Seconds to wait for a server to exit after SIGTERM.
STOP_TIMEOUT = 10.0


def _beanstalkd_binary() -> str:
    path = shutil.which("beanstalkd")
    if path is None:
        skip_or_fail(BEANSTALKD_HINT)
    return path


def _stop(proc: subprocess.Popen[bytes], name: str, own_session: bool = False) -> None:
    """SIGTERM the process (by its own pid), SIGKILL it (and, started in a session of its own,
    the helpers it left behind) after STOP_TIMEOUT."""
    if terminate(proc, STOP_TIMEOUT, group=own_session) is None:
        pytest.fail(f"{name} (pid {proc.pid}) did not exit within {STOP_TIMEOUT} s of SIGTERM")


def _start_beanstalkd(procs: list[subprocess.Popen[bytes]]) -> int:
    binary = _beanstalkd_binary()
    last_error = ""
    for _attempt in range(5):
        port = free_port()
        with tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(
                [binary, "-l", "127.0.0.1", "-p", str(port)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
            deadline = time.monotonic() + 10.0
            while proc.poll() is None and time.monotonic() < deadline:
                if is_listening(port):
                    procs.append(proc)
                    return port
                time.sleep(0.005)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            err.seek(0)
            last_error = err.read().decode(errors="replace")
    raise RuntimeError(f"could not start beanstalkd on a free port: {last_error}")


def _start_shardq(layout: Layout, procs: list[subprocess.Popen[bytes]]) -> int:
    if selftest_mode():
        return _start_beanstalkd(procs)
    cmd = [sys.executable, "-m", "shardq", "serve", "-l", "127.0.0.1", "-p", "0"]
    cmd += layout.flags()
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
        port, data = wait_listening(proc, SHARDQ_START_TIMEOUT)
        if port is None:
            if proc.poll() is None:
                kill_group(proc)
            err.seek(0)
            stderr = err.read().decode(errors="replace")
            pytest.fail(
                f"shardq {' '.join(layout.flags())} did not print "
                "'shardq listening on 127.0.0.1:<port>' "
                f"within {SHARDQ_START_TIMEOUT} s (exit status {proc.poll()}); "
                f"stdout: {data[:500]!r}\nstderr:\n{stderr[-4000:]}"
            )
    return port


@pytest.fixture
def start_beanstalkd() -> Iterator[Callable[[], int]]:
    """Factory: start a fresh beanstalkd on a free port and return the port."""
    procs: list[subprocess.Popen[bytes]] = []

    def start() -> int:
        return _start_beanstalkd(procs)

    yield start
    for proc in procs:
        _stop(proc, "beanstalkd")


@pytest.fixture
def beanstalkd_port(start_beanstalkd: Callable[[], int]) -> int:
    """Port of a fresh beanstalkd 1.12 listening on 127.0.0.1."""
    return start_beanstalkd()


@pytest.fixture
def start_shardq() -> Iterator[Callable[[int | Layout], int]]:
    """Factory: ``start_shardq(shards or Layout) -> port`` for a fresh shardq server."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(shards: int | Layout = 1) -> int:
        return _start_shardq(layout_of(shards), procs)

    yield start
    for proc in procs:
        _stop(proc, "shardq", own_session=True)
        assert proc.returncode is not None, "shardq did not exit"


@pytest.fixture
def shardq_port(request: pytest.FixtureRequest, start_shardq: Callable[[int | Layout], int]) -> int:
    """Port of a fresh shardq; the shard count comes from an indirect param (default 1)."""
    shards = getattr(request, "param", 1)
    return start_shardq(shards)
