"""A shard process answers offers, replies and cancels in the order they happened.

The stranded-job bug: a cross-shard reserver waits on a shard (offer mode). In one batch
another connection puts a job into the tube (the shard offers it to the waiter: an
event) and the reserver's serving process cancels the waiter (it was served elsewhere or timed
out). The shard used to answer CANCELLED and then drop the offer, because the cancel had
already forgotten who waited: the job stayed offered to a connection that no longer
waited for it, and nobody could reserve it until that connection closed.

These tests drive a real ShardServer over a link (common/links.py), as the serving process
does.
"""

from __future__ import annotations

import select
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from shard_helpers import flat_reply, req

from shardq.cluster import wire
from shardq.cluster.wire import Reply, Request
from shardq.engine.engine import CANCELLED, OFFER, WAITING
from shardq.processes.common import links
from shardq.processes.shard import ops
from shardq.processes.shard.core import ShardCore
from shardq.processes.shard.server import ShardServer
from shardq.protocol import proto

READER, WRITER = 7, 8  # connection ids


class Peer:
    """The serving process's side: a Dealer that sends batches and reads the shard's answers."""

    def __init__(self, server: ShardServer, path: str) -> None:
        self.server = server
        self.sock = links.Dealer(path, links.name())  # with this server's token
        self.sock.connect()
        assert self.sock.take_changes() == [links.UP]
        self.rid = 0

    def req(self, op: int, conn: int, *args: Any) -> Request:
        self.rid += 1
        return req(op, self.rid, conn, *args)

    def exchange(self, *batch: Request) -> list[list[Any]]:
        """Send one batch, let the shard run one turn, return every answer it sent (as
        ``[rid, *payload]`` lists)."""
        self.sock.send(wire.pack(list(batch)))
        self.server.turn(2.0)
        got: list[list[Any]] = []
        while select.select([self.sock.fd], [], [], 0.05)[0]:
            while True:
                try:
                    data = self.sock.peek()
                except links.Again:
                    break
                got += [flat_reply(Reply._make(r)) for r in wire.unpack(data)]
                self.sock.taken()
        return got


@pytest.fixture
def peer(tmp_path: Path) -> Iterator[Peer]:
    path = f"{tmp_path}/shard-0"
    server = ShardServer(ShardCore(0, owns_default=True), path)
    p = Peer(server, path)
    yield p
    p.sock.close()
    server.close()


def put(peer: Peer, job_id: int, tube: str = "t") -> Request:
    return peer.req(ops.PUT, WRITER, job_id, job_id, tube, 0, 0, 60, b"x")


def test_an_offer_made_in_the_batch_that_cancels_it_still_reaches_the_reserver(
    peer: Peer,
) -> None:
    wait = peer.req(ops.RESERVE, READER, ["t"], None, None, True)
    assert peer.exchange(wait) == [[wait[1], WAITING]]
    job_put = put(peer, 5)
    cancel = req(ops.CANCEL, wait[1], READER)
    answers = peer.exchange(job_put, cancel)
    kinds = [(a[0], a[1]) for a in answers]
    assert kinds == [(job_put[1], b"INSERTED 5\r\n"), (wait[1], OFFER), (wait[1], CANCELLED)]
    offer = answers[1]
    assert offer[3] == 5 and offer[-1] == READER
    # the reserver was gone: it declines, and the job is anyone's again
    peer.exchange(req(ops.DECLINE, 0, READER, 5, False))
    again = peer.req(ops.RESERVE, WRITER, ["t"], None, None, False)
    (reply,) = peer.exchange(again)
    assert reply[2] == b"RESERVED 5 1\r\nx\r\n"


def test_a_cancel_before_any_offer_leaves_the_job_ready(peer: Peer) -> None:
    wait = peer.req(ops.RESERVE, READER, ["t"], None, None, True)
    peer.exchange(wait)
    assert peer.exchange(req(ops.CANCEL, wait[1], READER)) == [[wait[1], CANCELLED]]
    job_put = put(peer, 6)
    assert peer.exchange(job_put) == [[job_put[1], b"INSERTED 6\r\n"]]
    peek = peer.req(ops.PEEK_READY, WRITER, "t")
    assert peer.exchange(peek) == [[peek[1], proto.job_reply(b"FOUND", 6, b"x")]]
