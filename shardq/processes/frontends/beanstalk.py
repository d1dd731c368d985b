"""Beanstalk, as a front-end's task speaks it on its session's private connection: command
lines, the tubes the connection uses and watches, reserving within a deadline in
milliseconds, and reading YAML bodies."""

from __future__ import annotations

import time
from collections.abc import Generator
from typing import Any

from shardq.processes.frontends.session import Send, Session, Sleep
from shardq.protocol.reader import Reply

#: Sub-second waits poll with ``reserve-with-timeout 0`` (beanstalk waits are whole
#: seconds): first after this long, doubling up to POLL_MAX_S.
POLL_FIRST_S = 0.005
POLL_MAX_S = 0.04

Result = Generator[Any, Any, Any]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def line(*words: object) -> bytes:
    return " ".join(map(str, words)).encode() + b"\r\n"


def put_line(pri: int, delay: int, ttr: int, data: bytes) -> bytes:
    """A whole ``put``: its line and body."""
    return b"put %d %d %d %d\r\n%b\r\n" % (pri, delay, ttr, len(data), data)


def use_lines(s: Session, tube: str) -> tuple[bytes, ...]:
    """What makes `tube` the connection's used tube (nothing if it is already)."""
    if s.use == tube:
        return ()
    s.use = tube
    return (line("use", tube),)


def watch_lines(s: Session, tubes: tuple[str, ...]) -> tuple[bytes, ...]:
    """What makes `tubes` the ones the connection watches (watch the new ones first: a
    connection must always watch one)."""
    if s.watching == tubes:
        return ()
    old, s.watching = s.watching, tubes
    return (
        *(line("watch", t) for t in tubes if t not in old),
        *(line("ignore", t) for t in old if t not in tubes),
    )


def reserve_within(s: Session, deadline: float, before: tuple[bytes, ...] = ()) -> Result:
    """Reserve from the watched tubes until `deadline` (monotonic s): the answer that is not
    TIMED_OUT (RESERVED, DEADLINE_SOON, an error), or None once the deadline has passed.
    Whole seconds are waited in the shard (exact); the sub-second rest polls."""
    wait, poll = 0, POLL_FIRST_S
    while True:
        replies = yield Send((*before, line("reserve-with-timeout", wait)))
        before, wait = (), 0
        answer: Reply = replies[-1]
        if answer.name != b"TIMED_OUT":
            return answer
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        if left >= 1:
            wait = int(left)
            continue
        yield Sleep(min(poll, left))
        poll = min(2 * poll, POLL_MAX_S)


def yaml_map(body: bytes | None) -> dict[str, str]:
    """A beanstalk stats body (``key: value`` lines) as a dict of strings."""
    out = {}
    for text in (body or b"").decode(errors="replace").splitlines():
        key, sep, value = text.partition(": ")
        if sep:
            out[key] = value.strip().strip('"')
    return out


def yaml_list(body: bytes | None) -> list[str]:
    """A beanstalk list body (``- name`` lines)."""
    lines = (body or b"").decode(errors="replace").splitlines()
    return [t[2:].strip().strip('"') for t in lines if t.startswith("- ")]
