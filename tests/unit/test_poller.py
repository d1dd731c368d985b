"""The serving loop's selector (processes/common/poller.py) against `selectors`' own epoll:
the same keys, masks and errors for the same descriptors."""

from __future__ import annotations

import selectors
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
