"""The serving loop's selector (processes/common/poller.py) against `selectors`' own epoll:
the same keys, masks and errors for the same descriptors."""

from __future__ import annotations

import os
import resource
import selectors
import signal
import socket
from collections.abc import Iterator

import pytest

from shardq.processes.common.poller import Poller

READ, WRITE = selectors.EVENT_READ, selectors.EVENT_WRITE


@pytest.fixture(params=["poller", "epoll"])
def sel(request: pytest.FixtureRequest) -> Iterator[selectors.BaseSelector]:
    """Each test runs against both: what it asserts, selectors' epoll does too."""
    made = Poller() if request.param == "poller" else selectors.EpollSelector()
    yield made
    made.close()


def ready(sel: selectors.BaseSelector, timeout: float | None = 0) -> dict[object, int]:
    return {key.data: mask for key, mask in sel.select(timeout)}


def test_read_and_write_readiness_with_the_registered_data(sel: selectors.BaseSelector) -> None:
    a, b = socket.socketpair()
    with a, b:
        key = sel.register(a, READ | WRITE, "a")
        assert (key.fileobj, key.fd, key.events, key.data) == (a, a.fileno(), READ | WRITE, "a")
        assert ready(sel) == {"a": WRITE}  # nothing to read yet
        b.send(b"x")
        assert ready(sel) == {"a": READ | WRITE}
        sel.modify(a, READ, "a2")
        assert ready(sel) == {"a2": READ}
        assert sel.get_map()[a].data == "a2"


def test_a_hang_up_is_reported_as_readable(sel: selectors.BaseSelector) -> None:
    a, b = socket.socketpair()
    with a:
        sel.register(a, READ, "a")
        b.close()
        assert ready(sel) == {"a": READ}


def test_registration_errors(sel: selectors.BaseSelector) -> None:
    a, b = socket.socketpair()
    with a, b:
        sel.register(a, READ)
        with pytest.raises(KeyError):
            sel.register(a, READ)
        with pytest.raises(ValueError):
            sel.register(b, 0)
        with pytest.raises(KeyError):
            sel.unregister(b)
        with pytest.raises(KeyError):
            sel.modify(b, READ)


def test_a_closed_socket_is_unregistered_by_the_object(sel: selectors.BaseSelector) -> None:
    a, b = socket.socketpair()
    with b:
        sel.register(a, READ, "a")
        a.close()  # its fileno is -1 now
        assert sel.unregister(a).data == "a"
        assert ready(sel) == {}


def test_a_timeout_waits_and_returns_nothing(sel: selectors.BaseSelector) -> None:
    a, b = socket.socketpair()
    with a, b:
        sel.register(a, READ)
        assert sel.select(0.001) == []


def test_more_ready_descriptors_than_one_wait_takes_all_come(
    sel: selectors.BaseSelector,
) -> None:
    """Compiled, one wait takes at most MAX_EVENTS (1,024) events; the others are still
    ready (level-triggered) and come with the next wait, none lost, none twice."""
    n = 1_100
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = 2 * n + 100
    assert hard >= need, f"this test needs {need} descriptors (hard limit {hard})"
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    pipes = [os.pipe() for _ in range(n)]
    try:
        for i, (r, w) in enumerate(pipes):
            sel.register(r, READ, i)
            os.write(w, b"x")
        first = ready(sel)
        assert 0 < len(first) <= n and set(first.values()) == {READ}
        second = ready(sel)  # the rest first: epoll hands out what it has not yet
        assert set(first) | set(second) == set(range(n))
    finally:
        for r, w in pipes:
            sel.unregister(r)
            os.close(r)
            os.close(w)
        if soft < need:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


class Interrupted(Exception):
    pass


@pytest.fixture
def wakeup_pipe() -> Iterator[int]:
    """A signal's wake-up descriptor, as the serving loop installs (common/wakeup.py)."""
    r, w = os.pipe2(os.O_NONBLOCK)
    old = signal.set_wakeup_fd(w)
    yield r
    signal.set_wakeup_fd(old)
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    os.close(r)
    os.close(w)


def test_a_signal_runs_its_handler_in_the_wait_and_wakes_it(
    sel: selectors.BaseSelector, wakeup_pipe: int
) -> None:
    a, b = socket.socketpair()
    with a, b:
        sel.register(a, READ, "client")  # never readable here
        sel.register(wakeup_pipe, READ, "wakeup")
        ran: list[int] = []
        signal.signal(signal.SIGALRM, lambda signum, _frame: ran.append(signum))
        signal.setitimer(signal.ITIMER_REAL, 0.01)
        assert ready(sel, 30) == {"wakeup": READ}  # not the 30 s: the signal woke it
        assert ran == [signal.SIGALRM]


def test_a_handler_that_raises_ends_the_wait_with_its_error(
    sel: selectors.BaseSelector, wakeup_pipe: int
) -> None:
    def stop(_signum: int, _frame: object) -> None:
        raise Interrupted

    signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, 0.01)
    with pytest.raises(Interrupted):
        sel.select(30)
