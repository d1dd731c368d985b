"""Requests to a ShardCore and its replies, written as the tests spell them: a request as
``req(op, rid, conn, *args)`` (its args in the op's order), the replies of an outbox as
``[rid, *payload]`` lists (`flat`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shardq.cluster.wire import Request
from shardq.processes.shard.holding import Outbox


def req(op: int, rid: int, conn: int, *args: Any) -> Request:
    return Request(op, rid, conn, list(args))


def flat_reply(reply: tuple[int, Sequence[Any]]) -> list[Any]:
    """A reply (a `Reply`, or a shard's (rid, payload) pair) as ``[rid, *payload]``."""
    rid, payload = reply
    return [rid, *payload]


def flat(out: Outbox) -> dict[bytes, list[list[Any]]]:
    return {peer: [flat_reply(r) for r in replies] for peer, replies in out.items()}
