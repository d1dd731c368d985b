"""processes/common/links.py: messages over unix sockets between a Router and its Dealers,
in one process (both ends are non-blocking; `wait` polls an end's descriptor as a loop
would)."""

from __future__ import annotations

import select
import socket
from pathlib import Path

import pytest

from shardq.processes.common import links
from shardq.processes.common.links import DOWN, UP, Again, Dealer, Router

TOKEN = b"t" * 16


def wait(*fds: int, timeout_s: float = 5.0) -> None:
    """Until one of the ends' descriptors is readable (as the loop's epoll sees them)."""
    ready, _, _ = select.select(fds, [], [], timeout_s)
    assert ready, "no end became readable"


def router_message(router: Router) -> tuple[bytes, bytes]:
    while True:
        try:
            name, data = router.peek()
        except Again:
            wait(router.fd)
            continue
        got = (name, bytes(data))
        router.taken()
        return got


def dealer_message(dealer: Dealer) -> bytes:
    while True:
        try:
            data = dealer.peek()
        except Again:
            wait(dealer.fd)
            continue
        got = bytes(data)
        dealer.taken()
        return got


def settle(router: Router) -> None:
    """Let the router take in everything sent to it; none of it may be a message."""
    while select.select([router.fd], [], [], 0.2)[0]:
        with pytest.raises(Again):
            router.peek()


def reached_again(dealer: Dealer, path: str, data: bytes) -> None:
    """The peer restarted (it binds its path again): the dealer reaches it when due, says
    UP, and a message goes through; then both ends close."""
    router = Router(path, TOKEN)
    dealer.retry(dealer.retry_at)
    assert dealer.take_changes() == [UP]
    dealer.send(data)
    assert router_message(router)[1] == data
    dealer.close()
    router.close()


@pytest.fixture
def path(tmp_path: Path) -> str:
    return str(tmp_path / "shard-0")


def test_a_request_and_its_reply_go_by_name(path: str) -> None:
    router = Router(path, TOKEN)
    a, b = Dealer(path, TOKEN + b"a" * 8), Dealer(path, TOKEN + b"b" * 8)
    a.connect()
    b.connect()
    assert a.take_changes() == [UP] and b.take_changes() == [UP]
    a.send(b"from a")
    b.send(b"from b")
    got = {router_message(router), router_message(router)}
    assert got == {(TOKEN + b"a" * 8, b"from a"), (TOKEN + b"b" * 8, b"from b")}
    router.send(TOKEN + b"b" * 8, b"to b")
    router.send(TOKEN + b"a" * 8, b"to a")
    assert dealer_message(a) == b"to a"
    assert dealer_message(b) == b"to b"
    for end in (a, b, router):
        end.close()


def test_messages_keep_their_order_and_their_bounds(path: str) -> None:
    router = Router(path, TOKEN)
    dealer = Dealer(path, TOKEN + b"x" * 8)
    dealer.connect()
    sent = [bytes([i % 256]) * n for i, n in enumerate([0, 1, 3, 70_000, 5, 2_000_000, 9])]
    for data in sent:
        dealer.send(data)
    got: list[bytes] = []
    while len(got) < len(sent):
        dealer.collect()  # what the socket did not take at once goes as the peer reads
        try:
            _name, view = router.peek()
        except Again:
            wait(router.fd, dealer.fd)
            continue
        got.append(bytes(view))
        router.taken()
    assert got == sent
    dealer.close()
    router.close()


def test_a_message_stays_until_taken(path: str) -> None:
    router = Router(path, TOKEN)
    dealer = Dealer(path, TOKEN + b"x" * 8)
    dealer.connect()
    dealer.send(b"one")
    dealer.send(b"two")
    wait(router.fd)
    first = router_message(router)
    assert first[1] == b"one"
    _name, again = router.peek()
    assert bytes(again) == b"two"
    _name, still = router.peek()  # not taken: the same message
    assert bytes(still) == b"two"
    router.taken()
    with pytest.raises(Again):
        router.peek()
    dealer.close()
    router.close()


def test_a_stranger_is_dropped_at_its_first_message(path: str) -> None:
    router = Router(path, TOKEN)
    stranger = Dealer(path, b"s" * 24)
    stranger.connect()
    stranger.send(b"hello")
    settle(router)
    assert router.strangers == 1
    wait(stranger.fd)
    with pytest.raises(Again):
        stranger.peek()
    assert stranger.take_changes() == [UP, DOWN]
    stranger.close()
    router.close()


def test_a_dealer_goes_down_and_up_with_its_peer(path: str) -> None:
    dealer = Dealer(path, TOKEN + b"x" * 8)
    dealer.connect()  # nobody there yet
    assert dealer.take_changes() == [] and dealer.retry_at > 0
    with pytest.raises(Again):
        dealer.send(b"lost")  # nothing is queued for a peer that is not there
    router = Router(path, TOKEN)
    dealer.retry(dealer.retry_at)
    assert dealer.take_changes() == [UP]
    dealer.send(b"first life")
    assert router_message(router)[1] == b"first life"
    router.close()  # the peer dies
    wait(dealer.fd)
    with pytest.raises(Again):
        dealer.peek()
    assert dealer.take_changes() == [DOWN]
    assert dealer.retry_at > 0
    reached_again(dealer, path, b"second life")


def test_a_peer_killed_with_the_connect_in_its_backlog_is_tried_again(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restarted shard killed again before it accepts: the connect succeeded (the
    backlog took it) and the first write meets the kernel's EPIPE. The peer counts as
    not there yet, as for a refused connect, not as an error that ends the process."""
    router = Router(path, TOKEN)
    first_write = links.Stream.write

    def killed_before_the_write(stream: links.Stream, data: bytes) -> None:
        router.close()  # the listener goes with this connection not yet accepted
        first_write(stream, data)

    monkeypatch.setattr(links.Stream, "write", killed_before_the_write)
    dealer = Dealer(path, TOKEN + b"x" * 8)
    dealer.connect()
    assert dealer.stream is None and dealer.retry_at > 0 and dealer.take_changes() == []
    monkeypatch.setattr(links.Stream, "write", first_write)
    reached_again(dealer, path, b"after all")


def test_a_closed_dealer_is_read_to_its_end_and_then_forgotten(path: str) -> None:
    router = Router(path, TOKEN)
    dealer = Dealer(path, TOKEN + b"x" * 8)
    dealer.connect()
    dealer.send(b"last words")
    dealer.close()
    assert router_message(router)[1] == b"last words"
    with pytest.raises(Again):
        router.peek()
    assert router.streams == {}  # its socket closed here too
    router.send(TOKEN + b"x" * 8, b"to nobody")  # dropped, as a ROUTER drops it
    router.close()


def test_a_length_beyond_any_message_drops_the_link(path: str) -> None:
    router = Router(path, TOKEN)
    raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    raw.connect(path)
    raw.sendall(links.frame(TOKEN + b"r" * 8) + (links.MAX_MESSAGE + 1).to_bytes(4, "big"))
    settle(router)
    assert router.streams == {}
    assert raw.recv(1) == b""  # closed by the router
    raw.close()
    router.close()


def test_the_descriptor_stays_across_reconnects(path: str) -> None:
    router = Router(path, TOKEN)
    dealer = Dealer(path, TOKEN + b"x" * 8)
    fd = dealer.fd
    dealer.connect()
    router.close()
    wait(dealer.fd)
    with pytest.raises(Again):
        dealer.peek()
    router = Router(path, TOKEN)
    dealer.retry(dealer.retry_at)
    assert dealer.fd == fd and dealer.take_changes() == [UP, DOWN, UP]
    dealer.close()
    router.close()


def test_a_peer_gone_before_its_end_is_read_costs_no_error(path: str) -> None:
    router = Router(path, TOKEN)
    dealer = Dealer(path, TOKEN + b"x" * 8)
    dealer.connect()
    dealer.send(b"hi")
    assert router_message(router)[1] == b"hi"
    other = Dealer(path, TOKEN + b"y" * 8)
    other.connect()
    dealer.close()  # gone; the router has not read its end yet
    router.send(TOKEN + b"x" * 8, b"reply")  # the write fails: the link is dropped
    assert TOKEN + b"x" * 8 not in router.by_name
    router.close()  # and the dealer's side: its peer goes while it sends
    wait(other.fd)
    with pytest.raises(Again):
        for _ in range(3):
            other.send(b"x" * 100_000)
    other.close()


def test_next_message_gives_the_changes_before_the_messages_then_none(path: str) -> None:
    router = Router(path, TOKEN)
    dealer = Dealer(path, TOKEN + b"x" * 8)
    dealer.connect()
    seen: list[str] = []
    assert dealer.next_message(seen.append) is None and seen == [UP]
    router_message_name = TOKEN + b"x" * 8
    dealer.send(b"hello")
    router_message(router)  # the router knows the dealer's name now
    router.send(router_message_name, b"one")
    router.send(router_message_name, b"two")
    wait(dealer.fd)
    got = []
    while (data := dealer.next_message(seen.append)) is not None:
        got.append(bytes(data))
        dealer.taken()
    assert got == [b"one", b"two"] and seen == [UP]
    router.close()  # the peer goes: the next read reports it, and no message
    wait(dealer.fd)
    assert dealer.next_message(seen.append) is None and seen == [UP, DOWN]
    dealer.close()


def test_a_dealer_that_keeps_sends_what_waited_once_its_peer_is_there(path: str) -> None:
    dealer = Dealer(path, TOKEN + b"x" * 8, keep=True)
    dealer.connect()  # nobody there yet
    dealer.send(b"asked early")  # kept, not refused
    router = Router(path, TOKEN)
    dealer.retry(dealer.retry_at)
    assert router_message(router) == (TOKEN + b"x" * 8, b"asked early")
    dealer.close()
    router.close()


def test_a_stranger_may_not_send_more_than_a_name_before_it_is_dropped(path: str) -> None:
    router = Router(path, TOKEN)
    raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    raw.connect(path)
    raw.sendall((links.MAX_HELLO + 1).to_bytes(4, "big") + b"s" * 1000)
    settle(router)
    assert router.streams == {}  # dropped at the length, before reading a big "name"
    raw.close()
    router.close()


def test_what_a_peer_sent_before_it_went_is_read_before_its_down(path: str) -> None:
    """A shard's replies written just before it died are answers like any: read, then DOWN
    (and no reconnect in between)."""
    router = Router(path, TOKEN)
    dealer = Dealer(path, TOKEN + b"x" * 8)
    dealer.connect()
    dealer.send(b"hello")
    name, _ = router_message(router)
    router.send(name, b"reply 1")
    router.send(name, b"reply 2")
    router.close()  # the peer goes right after
    while dealer.stream is not None:  # read to the end before a message is taken
        wait(dealer.fd)
        dealer.collect()
    seen: list[str] = []
    got = []
    while (data := dealer.next_message(seen.append)) is not None:
        got.append((bytes(data), list(seen)))
        dealer.taken()
    assert got == [(b"reply 1", [UP]), (b"reply 2", [UP])] and seen == [UP, DOWN]
    dealer.retry(dealer.retry_at)  # nobody there: still down
    assert dealer.take_changes() == []
    dealer.close()


def test_a_peer_that_reads_nothing_loses_its_link_past_max_queued(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(links, "MAX_QUEUED", 1 << 20)
    router = Router(path, TOKEN)
    dealer = Dealer(path, TOKEN + b"x" * 8)
    dealer.connect()
    dealer.send(b"hello")
    name, _ = router_message(router)
    for _ in range(64):  # 4 MiB, which the dealer never reads
        router.send(name, b"r" * 65536)
    assert name not in router.by_name  # dropped: it holds at most MAX_QUEUED for it
    dealer.close()
    router.close()
