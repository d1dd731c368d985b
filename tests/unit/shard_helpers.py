"""Requests to a ShardCore and its replies, written as the tests spell them: a request as
``req(op, rid, conn, *args)`` (its args in the op's order), the replies of an outbox as
``[rid, *payload]`` lists (`flat`)."""

from __future__ import annotations

from typing import Any

from shardq.cluster.wire import Reply, Request
from shardq.processes.shard.holding import Outbox


def req(op: int, rid: int, conn: int, *args: Any) -> Request:
    return Request(op, rid, conn, list(args))


def flat_reply(reply: Reply) -> list[Any]:
    return [reply.rid, *reply.payload]


def flat(out: Outbox) -> dict[bytes, list[list[Any]]]:
    return {peer: [flat_reply(r) for r in replies] for peer, replies in out.items()}
