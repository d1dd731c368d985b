"""The metrics process's questions to its peers (`gather.Peers`): an answer lost because
memory ran out while it was read is asked for again by the next view, not waited for.

Before, the lost answer's question stayed open for `GIVE_UP_AFTER_S` (5 s): the peer was
not asked again meanwhile, so a /health asked right after memory came back said "shard N:
not answered in time" (tests/integration/test_out_of_memory_roles.py, metrics, failed
about one run in eight)."""

from __future__ import annotations

import select
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shardq.cluster import wire
from shardq.processes.common import links
from shardq.processes.common.sockpath import link_path
from shardq.processes.metrics import gather
from shardq.processes.metrics.gather import COORDINATOR, Peers

WAIT_MS = 2000  #: for a question that must come (it comes at once when it does)


class FakePeer:
    """A Router where a shard or the coordinator listens: reads questions, answers them."""

    def __init__(self, run_dir: Path, name: str) -> None:
        self.sock = links.Router(link_path(str(run_dir), name), links.TOKEN)

    def question(self) -> tuple[bytes, int] | None:
        """(who asked, the rid) of the next question, or None if none came."""
        while True:
            try:
                who, data = self.sock.peek()
            except links.Again:
                if not select.select([self.sock.fd], [], [], WAIT_MS / 1000)[0]:
                    return None
                continue
            [request] = wire.unpack(data)
            self.sock.taken()
            return who, wire.Request._make(request).rid

    def answer(self, who: bytes, rid: int, payload: Any) -> None:
        self.sock.send(who, wire.pack([(rid, payload)]))

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def peers(tmp_path: Path) -> Iterator[tuple[Peers, FakePeer, FakePeer]]:
    coordinator = FakePeer(tmp_path, "coordinator")
    shard = FakePeer(tmp_path, "shard-0")
    asking = Peers(str(tmp_path), 1)
    yield asking, coordinator, shard
    asking.close()
    coordinator.close()
    shard.close()


def answer_question(peer: FakePeer, payload: Any) -> None:
    asked = peer.question()
    assert asked is not None, "not asked"
    peer.answer(*asked, payload)


def unpack_out_of_memory(data: bytes | memoryview) -> Any:
    raise MemoryError


def test_an_answer_lost_out_of_memory_is_asked_for_again(
    peers: tuple[Peers, FakePeer, FakePeer], monkeypatch: pytest.MonkeyPatch
) -> None:
    asking, coordinator, shard = peers
    assert asking.ask_all(within_s=0) == {}  # both asked; nothing waited for
    answer_question(coordinator, "stats")
    answer_question(shard, "metrics")
    with monkeypatch.context() as m:  # the first answer read is lost: memory ran out
        m.setattr(gather.wire, "unpack", unpack_out_of_memory)
        with pytest.raises(MemoryError):
            asking.ask_all(within_s=WAIT_MS / 1000)
    assert len(asking.asked) == 1, "the lost answer's question is still open"
    [waited] = asking.asked  # the other answer, not read yet: still awaited
    lost_key = {COORDINATOR: 0, 0: COORDINATOR}[waited]
    lost = {COORDINATOR: coordinator, 0: shard}[lost_key]

    asking.ask_all(within_s=0)  # memory is back: the lost answer is asked for again
    answer_question(lost, "again")
    again = asking.ask_all(within_s=WAIT_MS / 1000)
    first = {COORDINATOR: "stats", 0: "metrics"}[waited]  # the awaited one was not asked
    assert again == {waited: first, lost_key: "again"}  # twice: its first answer is taken


def test_a_late_answer_is_taken_and_its_peer_not_asked_twice(
    peers: tuple[Peers, FakePeer, FakePeer],
) -> None:
    """The rule the fix keeps: a question still open (its answer late, not lost) is not
    asked again; its answer, when it comes, is the next view's."""
    asking, coordinator, shard = peers
    asking.ask_all(within_s=0)
    answer_question(coordinator, "stats")
    view: dict[int, Any] = {}  # the view closes with the shard's answer still to come
    assert select.select([asking.socks[COORDINATOR].fd], [], [], WAIT_MS / 1000)[0]
    asking.take(asking.socks[COORDINATOR], view)
    assert view == {COORDINATOR: "stats"}
    asking.ask_all(within_s=0)
    answer_question(coordinator, "stats 2")
    answer_question(shard, "metrics")  # the first question's answer (asked again, its
    # rid would be stale and the answer dropped)
    assert asking.ask_all(within_s=WAIT_MS / 1000) == {COORDINATOR: "stats 2", 0: "metrics"}
