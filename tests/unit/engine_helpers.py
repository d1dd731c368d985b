"""The harness of the engine unit tests (tests/unit/test_engine_*.py).

`Q` is an `Engine` (shardq/engine/engine.py, job.py, tube.py), a fake clock (an int of
nanoseconds that the test advances and hands to `tick`) and the id/put-order counters
the serving process would keep; the `q` fixture (conftest.py) gives each test a fresh one. The
functions below spell out the replies and events the tests expect.

No sockets, no sleeps. Expected behaviour is beanstalkd 1.12's (see
/work/shared/reference/beanstalkd-1.12.md), except where shardq deliberately fixes it
(FIFO waiters, quoted YAML strings, no lost TTR timer).
"""

from __future__ import annotations

from typing import Any

from shardq.engine.engine import RESERVED, Engine
from shardq.engine.job import NS

T0 = 1_000 * NS  #: the fake clock's start; not 0, so "0" never hides a missing addition


class Q:
    """An engine, a fake clock and the id/put-order counters the serving process would keep."""

    def __init__(self) -> None:
        self.e = Engine()
        self.now = T0
        self.next_id = 1
        self.next_rid = 1

    # clock
    def advance(self, ns: int) -> None:
        self.now += ns
        self.e.tick(self.now)

    def to(self, when: int) -> None:
        assert when >= self.now
        self.now = when
        self.e.tick(self.now)

    def events(self) -> list[tuple[int, list[Any]]]:
        out = list(self.e.events)
        self.e.events.clear()
        return out

    # commands
    def put(
        self,
        tube: str = "default",
        pri: int = 0,
        delay: int = 0,
        ttr: int = 60,
        body: bytes = b"x",
        job_id: int | None = None,
        seq: int | None = None,
    ) -> int:
        if job_id is None:
            job_id = self.next_id
        self.next_id = max(self.next_id, job_id) + 1
        seq = job_id if seq is None else seq
        assert self.e.put(job_id, seq, tube, pri, delay, ttr, body, self.now)  # taken
        return job_id

    def rid(self) -> int:
        self.next_rid += 1
        return self.next_rid - 1

    def reserve(
        self,
        conn: int,
        tubes: tuple[str, ...] = ("default",),
        timeout: int | None = None,
        soon_at: int | None = None,
        offer: bool = False,
        rid: int | None = None,
    ) -> list[Any] | None:
        timeout_at = None if timeout is None else self.now + timeout * NS
        rid = self.rid() if rid is None else rid
        return self.e.reserve(conn, rid, tubes, self.now, timeout_at, soon_at, offer)

    def reserve_id(self, conn: int, tubes: tuple[str, ...] = ("default",)) -> int:
        """Reserve at once and answer the job id (fails if nothing was ready)."""
        payload = self.reserve(conn, tubes)
        assert payload is not None and payload[0] == RESERVED, payload
        return payload[2]

    def stats_job(self, job_id: int) -> dict[str, str]:
        return parse_yaml(self.e.stats_job(job_id, self.now))

    def stats_tube(self, name: str = "default") -> dict[str, str]:
        return parse_yaml(self.e.stats_tube(name, self.now))

    def state(self, job_id: int) -> str:
        return self.stats_job(job_id)["state"]

    def tube_names(self) -> list[str]:
        """list-tubes as the coordinator prints it: sorted by each tube's order key."""
        return [name for _, name in sorted(self.e.list_tubes())]


def unkey(key: int) -> tuple[int, int, int]:
    """A ready or delayed queue key as (pri or deadline, seq, id)."""
    return (key >> 128, key >> 64 & (1 << 64) - 1, key & (1 << 64) - 1)


def parse_yaml(reply: bytes) -> dict[str, str]:
    """Split an ``OK <n>`` stats reply into key -> raw value text, checking its framing."""
    head, _, rest = reply.partition(b"\r\n")
    assert head.startswith(b"OK "), reply
    assert rest.endswith(b"\n\r\n"), reply
    assert int(head[3:]) == len(rest) - 2, reply
    lines = rest[:-2].decode().split("\n")
    assert lines[0] == "---" and lines[-1] == "", reply
    pairs = [line.split(": ", 1) for line in lines[1:-1]]
    return {key: value for key, value in pairs}


def reserved(job_id: int, body: bytes = b"x") -> bytes:
    return b"RESERVED %d %d\r\n%s\r\n" % (job_id, len(body), body)


def found(job_id: int, body: bytes = b"x") -> bytes:
    return b"FOUND %d %d\r\n%s\r\n" % (job_id, len(body), body)


def served(events: list[tuple[int, list[Any]]]) -> list[tuple[int, int]]:
    """(rid, job id) of each RESERVED event."""
    return [(rid, p[2]) for rid, p in events if p[0] == RESERVED]
