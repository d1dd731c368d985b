"""Out of memory, a message taken from a ZeroMQ socket is not lost (common/inbox.py), and a
shard applies the requests a turn out of memory left in the next turn, each once.

The bug: pyzmq's copying receive took a 60 KB put out of libzmq and then failed to copy
it; the shard process logged "out of memory in a turn of the loop" and the put was never
answered (CI, test_out_of_memory_roles.py). Here memory running out is a MemoryError
raised where pyzmq or the shard would raise it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq
from shard_helpers import req

from shardq.cluster import wire
from shardq.cluster.wire import Reply, Request
from shardq.processes.common.inbox import Inbox
from shardq.processes.common.zmqctx import dealer
from shardq.processes.shard import ops
from shardq.processes.shard.core import ShardCore
from shardq.processes.shard.server import ShardServer


class ShortOnce:
    """A socket whose `nth` receive (counting from 1) fails once, as pyzmq's does when it
    cannot build the Frame: before it takes the part."""

    def __init__(self, sock: zmq.Socket[bytes], nth: int) -> None:
        self.sock = sock
        self.left = nth

    def recv(self, flags: int, copy: bool) -> Any:
        self.left -= 1
        if self.left == 0:
            raise MemoryError
        return self.sock.recv(flags, copy=copy)


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[zmq.Socket[bytes], zmq.Socket[bytes]]]:
    ctx = zmq.Context.instance()
    router = ctx.socket(zmq.ROUTER)
    router.bind(f"ipc://{tmp_path}/r")
    peer = dealer(ctx)
    peer.connect(f"ipc://{tmp_path}/r")
    yield router, peer
    peer.close(0)
    router.close(0)


@pytest.mark.parametrize("nth", [1, 2])
def test_a_message_survives_memory_running_out_at_either_part(
    pair: tuple[zmq.Socket[bytes], zmq.Socket[bytes]], nth: int
) -> None:
    router, peer = pair
    peer.send(b"x" * 60_000)
    assert router.poll(2000)
    inbox = Inbox(ShortOnce(router, nth))  # type: ignore[arg-type]
    with pytest.raises(MemoryError):
        inbox.peek()
    assert inbox.held() is (nth == 2)  # the routing id is at hand
    who, data = inbox.peek()
    assert who == peer.getsockopt(zmq.ROUTING_ID) and bytes(data) == b"x" * 60_000
    assert inbox.peek()[0] == who, "not taken yet: the same message again"
    inbox.taken()
    assert not inbox.held()
    with pytest.raises(zmq.Again):
        inbox.peek()


def test_a_dealer_message_has_no_first_part(
    pair: tuple[zmq.Socket[bytes], zmq.Socket[bytes]],
) -> None:
    router, peer = pair
    peer.send(b"hello")
    assert router.poll(2000)
    who = router.recv()
    router.send_multipart([who, b"answer"])
    assert peer.poll(2000)
    assert Inbox(peer).peek() == (b"", memoryview(b"answer"))


def test_requests_a_turn_out_of_memory_left_are_applied_next_turn_each_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    endpoint = f"ipc://{tmp_path}/shard-0"
    server = ShardServer(ShardCore(0, owns_default=True), endpoint)
    peer = dealer(zmq.Context.instance())
    peer.connect(endpoint)
    try:
        puts = [req(ops.PUT, rid, 7, rid, rid, "t", 0, 0, 60, b"x") for rid in (1, 2, 3)]
        peer.send(wire.pack(puts))
        made = Request._make
        calls = 0

        def short_at_the_second(raw: Any) -> Request:
            nonlocal calls
            calls += 1
            if calls == 2:
                raise MemoryError  # the second request could not be built: not applied
            return made(raw)

        monkeypatch.setattr(Request, "_make", short_at_the_second)
        with pytest.raises(MemoryError):
            server.turn(2000)
        assert server.held() and len(server.core.engine.jobs) == 1
        server.next_turn()  # at once: nothing new arrives to wake it
        assert not server.held()
        answers: list[Reply] = []
        while peer.poll(200):
            answers += [Reply._make(r) for r in wire.unpack(peer.recv())]
        assert sorted(a.rid for a in answers) == [1, 2, 3]
        assert all(a.payload[0] == b"INSERTED %d\r\n" % a.rid for a in answers)
        assert sorted(server.core.engine.jobs) == [1, 2, 3]
    finally:
        peer.close(0)
        server.sock.close(0)
