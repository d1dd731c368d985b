"""A forked child looks like a fresh process: default signal handlers, only the descriptors
it is given, named after its role; `Forked` reports its end as `subprocess.Popen` does."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator

import pytest

from shardq.bench.procs import role_pids
from shardq.processes.common.procname import comm_name, label_of_comm
from shardq.processes.supervision.forked import Forked, TimeoutExpired, fork_child


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    r, w = os.pipe()
    yield r, w
    for fd in (r, w):
        with contextlib.suppress(OSError):
            os.close(fd)


def read_all(fd: int) -> bytes:
    out = b""
    while chunk := os.read(fd, 4096):
        out += chunk
    return out


def report_state(w: int, other: int) -> None:
    """In the child: what it sees, written to `w`, then exit 7."""
    with open("/proc/self/comm") as f:
        comm = f.read().strip()
    try:
        os.fstat(other)
        other_open = "open"
    except OSError:
        other_open = "closed"
    handler = signal.getsignal(signal.SIGTERM)
    os.write(w, f"{comm}|{other_open}|{handler == signal.SIG_DFL}".encode())
    os._exit(7)


def test_child_is_named_closes_other_fds_and_resets_handlers(pipe: tuple[int, int]) -> None:
    r, w = pipe
    other_r, other_w = os.pipe()
    previous = signal.signal(signal.SIGTERM, lambda *_: None)
    try:
        child = fork_child("shard 3", (w,), lambda: report_state(w, other_r))
    finally:
        signal.signal(signal.SIGTERM, previous)
        os.close(other_w)
    os.close(w)
    seen = read_all(r).decode()
    assert child.wait(5) == 7
    assert child.returncode == 7
    assert seen == "sq shard 3|closed|True"
    os.close(other_r)


def test_a_child_that_returns_or_raises_exits_1() -> None:
    assert fork_child("x", (), lambda: None).wait(5) == 1
    assert fork_child("x", (), lambda: 1 / 0).wait(5) == 1


def test_poll_wait_timeout_and_kill() -> None:
    child = fork_child("sleeper", (), lambda: time.sleep(30))
    assert child.poll() is None
    with pytest.raises(TimeoutExpired):
        child.wait(0.05)
    child.kill()
    assert child.wait(5) == -signal.SIGKILL
    child.send_signal(signal.SIGTERM)  # ended: nothing is sent, nothing raised
    assert child.poll() == -signal.SIGKILL


def test_a_child_reaped_elsewhere_counts_as_gone() -> None:
    child = fork_child("quick", (), lambda: os._exit(0))
    os.waitpid(child.pid, 0)
    assert child.poll() == -1
    assert Forked(child.pid).poll() == -1


def test_names_fit_the_kernel_and_read_back() -> None:
    assert comm_name("coordinator") == "sq coordinator"
    assert len(comm_name("serving 12345678")) == 15
    assert label_of_comm("sq shard 12") == "shard 12"
    assert label_of_comm("python3") is None


def test_role_pids_finds_forked_children() -> None:
    child = fork_child("shard 5", (), lambda: time.sleep(30))
    try:
        deadline = time.monotonic() + 5
        while role_pids(os.getpid()).get("shard 5") != child.pid:
            assert time.monotonic() < deadline, role_pids(os.getpid())
            time.sleep(0.01)
    finally:
        child.kill()
        child.wait(5)
