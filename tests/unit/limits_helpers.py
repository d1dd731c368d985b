"""Helpers of the limit tests (test_engine_max_reserved.py, test_engine_reserve_rate.py):
the policies are given with `set_policies`, as a shard does at start-up; a reload passes
`now`, as a shard does on SIGHUP."""

from __future__ import annotations

from typing import Any

from engine_helpers import Q

from shardq.engine.engine import FINAL, RESERVED
from shardq.engine.job import NS
from shardq.engine.policy import Policies
from shardq.protocol import proto

MS = NS // 1000


def limited(q: Q, **policy: Any) -> Q:
    """`q` with `policy` on the tube "p" (and on no other), as at start-up."""
    q.e.set_policies(Policies({"p": policy}))
    return q


def reload(q: Q, **policy: Any) -> None:
    """A SIGHUP: the new policy of "p" (none if empty), at the engine's `now`."""
    q.e.set_policies(Policies({"p": policy} if policy else {}), q.now)


def timed_out(q: Q, tubes: tuple[str, ...] = ("p",)) -> bool:
    """Does a reserve-with-timeout 0 on `tubes` time out?"""
    payload = q.reserve(9, tubes, timeout=0)
    if payload == [FINAL, proto.TIMED_OUT]:
        return True
    assert payload is not None and payload[0] == RESERVED, payload
    return False
