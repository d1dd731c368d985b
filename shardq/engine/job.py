"""One job: its fields, its states and the transitions between them.

Times are integer nanoseconds of the monotonic clock the engine is given; a job's
durations (delay, ttr) are whole seconds, as the protocol has them. The transition
table is the single statement of which operation may move a job from which state; the
engine asserts against it.
"""

from __future__ import annotations

from enum import IntEnum

from shardq.engine.packed import pack

NS = 1_000_000_000  #: nanoseconds per second
URGENT_PRI = 1024  #: ready jobs with a priority below this count as "urgent"


class State(IntEnum):
    READY = 1
    RESERVED = 2
    BURIED = 3
    DELAYED = 4
    OFFERED = 5  # handed to a cross-shard reserver, waiting for its accept or decline


#: The states as module names for the hot paths: reading ``State.READY`` goes through the
#: enum metaclass's ``__getattr__`` hook every time (Python 3.11); a global does not.
ST_READY, ST_RESERVED, ST_BURIED, ST_DELAYED, ST_OFFERED = State


#: (state, operation) -> new state. Anything missing is NOT_FOUND for the client.
TRANSITIONS: dict[tuple[State, str], State] = {
    (ST_READY, "reserve"): ST_RESERVED,
    (ST_READY, "offer"): ST_OFFERED,
    (ST_OFFERED, "accept"): ST_RESERVED,
    (ST_OFFERED, "decline"): ST_READY,
    (ST_DELAYED, "reserve"): ST_RESERVED,  # reserve-job only
    (ST_BURIED, "reserve"): ST_RESERVED,  # reserve-job only
    (ST_RESERVED, "release"): ST_READY,
    (ST_RESERVED, "release-delayed"): ST_DELAYED,
    (ST_RESERVED, "bury"): ST_BURIED,
    (ST_RESERVED, "timeout"): ST_READY,
    (ST_DELAYED, "promote"): ST_READY,
    (ST_DELAYED, "kick"): ST_READY,
    (ST_BURIED, "kick"): ST_READY,
    # max_age with expired_to: to the target tube of its family, ready (policing.py)
    (ST_READY, "expire-to"): ST_READY,
    (ST_DELAYED, "expire-to"): ST_READY,
    (ST_BURIED, "expire-to"): ST_READY,
}

STATE_NAMES = {
    ST_READY: "ready",
    ST_RESERVED: "reserved",
    ST_BURIED: "buried",
    ST_DELAYED: "delayed",
    ST_OFFERED: "ready",
}


#: A job's ready-queue key packs (priority, put order, id) into one int, which is smaller
#: than a tuple and compares faster, and orders the same: pri << 128 | seq << 64 | id
#: (seq and id are below 2**64). The delayed queue's key is deadline << 128 | the same low
#: 128 bits.
ID_MASK = (1 << 64) - 1
LOW_MASK = (1 << 128) - 1  #: the (seq, id) part of a key
URGENT_KEY = URGENT_PRI << 128  #: keys below this are urgent jobs'

#: A job's `dur` packs its ttr and delay (whole seconds) and its five counters, 64 bits
#: each (none gets near 2**64): ttr | delay << 64 | reserves << 128 | timeouts << 192 | …
#: A job never reserved (the most of them, in a full queue) keeps a small cached int.
RESERVE, TIMEOUT, RELEASE, BURY, KICK = 1 << 128, 1 << 192, 1 << 256, 1 << 320, 1 << 384
DELAY_MASK = ID_MASK << 64  #: the delay's bits in `dur`

#: A job's `hold` packs the times and the holder that are not in `key` or `dur`:
#: owner << 128 | deadline << 64 | created, the two times as 64-bit two's complement (a job
#: restored from the log may be older than this boot's monotonic clock). While nothing
#: holds it and it has no deadline (a job just put), `hold` is `created` itself: the `now`
#: a turn's puts share. The deadline is the TTR deadline while reserved, the due time while
#: delayed (and stays after, as it was); the owner the connection while reserved or offered.
#: The owner is on top so that the hot paths read and clear it with one operation each
#: (and no negative mask, which is slow on a big int).
SIGN_BIT = 1 << 63  #: of a time in `hold`


def _signed(bits: int) -> int:
    """A time from its 64 bits in `hold`."""
    return bits - (1 << 64) if bits & SIGN_BIT else bits


class Job:
    """A job record. `seq` is the put-order stamp used for "oldest first" across shards.

    To keep a job small, its id, priority and seq live only in `key` (see above), and
    delay, ttr (whole seconds, all the protocol has) and the counters are packed in `dur`.
    Its creation time, deadline and holder are packed in `hold` (above). Six slots make 80
    bytes with the GC header (ten made 112). Hot paths read and write the packed fields
    themselves; the properties are for the rest.
    """

    __slots__ = ("key", "tube", "dur", "body", "state", "hold")
    key: int
    tube: str
    dur: int
    body: bytes
    state: State
    hold: int

    def move(self, op: str) -> None:
        """Apply a transition; a missing entry is a bug in the engine, not a client error."""
        self.state = TRANSITIONS[(self.state, op)]

    def can(self, op: str) -> bool:
        return (self.state, op) in TRANSITIONS

    @property
    def id(self) -> int:
        """Its id: the low 64 bits of its key (hot paths take `key & ID_MASK` themselves)."""
        return self.key & ID_MASK

    @property
    def pri(self) -> int:
        return self.key >> 128

    @pri.setter
    def pri(self, pri: int) -> None:
        """Only while the job is in no queue: its key changes."""
        self.key = pri << 128 | self.key & LOW_MASK

    @property
    def seq(self) -> int:
        return self.key >> 64 & ID_MASK

    @property
    def ttr(self) -> int:
        return self.dur & ID_MASK

    @property
    def delay(self) -> int:
        return self.dur >> 64 & ID_MASK

    @delay.setter
    def delay(self, delay: int) -> None:
        self.dur = self.dur & ~DELAY_MASK | delay << 64

    @property
    def created(self) -> int:
        return _signed(self.hold & ID_MASK)

    @created.setter
    def created(self, created: int) -> None:
        self.hold = self.hold >> 64 << 64 | created & ID_MASK

    @property
    def deadline(self) -> int:
        return _signed(self.hold >> 64 & ID_MASK)

    @deadline.setter
    def deadline(self, deadline: int) -> None:
        hold = self.hold
        self.hold = hold >> 128 << 128 | (deadline & ID_MASK) << 64 | hold & ID_MASK

    @property
    def owner(self) -> int:
        return self.hold >> 128

    @owner.setter
    def owner(self, owner: int) -> None:
        self.hold = owner << 128 | self.hold & LOW_MASK

    def held_by(self, owner: int, deadline: int) -> None:
        """Reserved by connection `owner` until `deadline`."""
        self.hold = (owner << 64 | deadline & ID_MASK) << 64 | self.hold & ID_MASK

    @property
    def delayed_key(self) -> int:
        return self.deadline << 128 | self.key & LOW_MASK

    @property
    def reserves(self) -> int:
        return self.dur >> 128 & ID_MASK

    @property
    def timeouts(self) -> int:
        return self.dur >> 192 & ID_MASK

    @property
    def releases(self) -> int:
        return self.dur >> 256 & ID_MASK

    @property
    def buries(self) -> int:
        return self.dur >> 320 & ID_MASK

    @property
    def kicks(self) -> int:
        return self.dur >> 384

    def set_counters(
        self, reserves: int, timeouts: int, releases: int, buries: int, kicks: int
    ) -> None:
        counts = reserves * RESERVE + timeouts * TIMEOUT + releases * RELEASE
        self.dur = self.dur & LOW_MASK | counts + buries * BURY + kicks * KICK


def new_job(
    job_id: int, seq: int, tube: str, pri: int, delay: int, ttr: int, body: bytes, now: int
) -> Job:
    """A new job, ready (the engine makes it delayed if it is). Jobs are made only here,
    not by calling the class: compiled, the object is allocated and its fields set as a C
    struct's (≈ 1.5k instructions less than a call through the class with eight
    arguments)."""
    job = Job.__new__(Job)
    job.key = pack(pri, seq, job_id)  # pri << 128 | seq << 64 | job_id
    job.tube = tube
    job.dur = ttr | delay << 64  # whole seconds, both
    job.body = body
    job.state = ST_READY
    job.hold = now if now >= 0 else now & ID_MASK  # created; no deadline, no owner
    return job
