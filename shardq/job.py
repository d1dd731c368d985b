"""One job: its fields, its states and the transitions between them.

Times are integer nanoseconds of the monotonic clock the engine is given; durations
(delay, ttr) are nanoseconds too. The transition table is the single statement of
which operation may move a job from which state; the engine asserts against it.
"""

from __future__ import annotations

from enum import IntEnum

NS = 1_000_000_000  #: nanoseconds per second
URGENT_PRI = 1024  #: ready jobs with a priority below this count as "urgent"


class State(IntEnum):
    READY = 1
    RESERVED = 2
    BURIED = 3
    DELAYED = 4
    OFFERED = 5  # handed to a cross-shard reserver, waiting for its accept or decline


#: (state, operation) -> new state. Anything missing is NOT_FOUND for the client.
TRANSITIONS: dict[tuple[State, str], State] = {
    (State.READY, "reserve"): State.RESERVED,
    (State.READY, "offer"): State.OFFERED,
    (State.OFFERED, "accept"): State.RESERVED,
    (State.OFFERED, "decline"): State.READY,
    (State.DELAYED, "reserve"): State.RESERVED,  # reserve-job only
    (State.BURIED, "reserve"): State.RESERVED,  # reserve-job only
    (State.RESERVED, "release"): State.READY,
    (State.RESERVED, "release-delayed"): State.DELAYED,
    (State.RESERVED, "bury"): State.BURIED,
    (State.RESERVED, "timeout"): State.READY,
    (State.DELAYED, "promote"): State.READY,
    (State.DELAYED, "kick"): State.READY,
    (State.BURIED, "kick"): State.READY,
}

STATE_NAMES = {
    State.READY: "ready",
    State.RESERVED: "reserved",
    State.BURIED: "buried",
    State.DELAYED: "delayed",
    State.OFFERED: "ready",
}


class Job:
    """A job record. `seq` is the put-order stamp used for "oldest first" across shards."""

    __slots__ = (
        "id",
        "seq",
        "tube",
        "pri",
        "delay",
        "ttr",
        "body",
        "state",
        "created",
        "deadline",
        "owner",
        "reserves",
        "timeouts",
        "releases",
        "buries",
        "kicks",
    )

    def __init__(
        self,
        job_id: int,
        seq: int,
        tube: str,
        pri: int,
        delay: int,
        ttr: int,
        body: bytes,
        now: int,
    ) -> None:
        self.id = job_id
        self.seq = seq
        self.tube = tube
        self.pri = pri
        self.delay = delay
        self.ttr = ttr
        self.body = body
        self.state = State.READY
        self.created = now
        self.deadline = 0  # TTR deadline while reserved, due time while delayed
        self.owner = 0  # connection id while reserved or offered
        self.reserves = 0
        self.timeouts = 0
        self.releases = 0
        self.buries = 0
        self.kicks = 0

    def move(self, op: str) -> None:
        """Apply a transition; a missing entry is a bug in the engine, not a client error."""
        self.state = TRANSITIONS[(self.state, op)]

    def can(self, op: str) -> bool:
        return (self.state, op) in TRANSITIONS

    @property
    def ready_key(self) -> tuple[int, int, int]:
        return (self.pri, self.seq, self.id)
