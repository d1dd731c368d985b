"""bunqueue's ids: UUIDv7 strings (time-ordered, so the FIFO tie-break of jobs pushed in one
millisecond too), for jobs and lock tokens.

A job id (RFC 9562's layout: 48 bits of unix ms, version 7, 12 bits `rand_a`, variant
0b10, 62 bits `rand_b`) takes its `rand_a` from a counter that starts at a random value
each millisecond and counts up (the RFC's "fixed bit-length dedicated counter"), and its
`rand_b` from 62 random bits drawn once that millisecond: the ids of one millisecond
differ in the counter, and each is made of three strings already formatted (the door
makes one a pushed job: formatting all five fields took ≈ 0.9 µs). When the counter runs
out within a millisecond the next millisecond's stamp is taken early, so ids never go
backwards, also when the clock does. A lock token is all random (62 bits each): nobody
can tell one from the job's id or from another token.
"""

from __future__ import annotations

import random
import time

SEQ_BITS = 12
SEQ_MAX = (1 << SEQ_BITS) - 1
#: `rand_a` with the version's nibble in front, as text (the counter's every value)
SEQS = ["%04x" % (0x7000 | seq) for seq in range(SEQ_MAX + 1)]  # noqa: UP031


def stamp_prefix(ms: int) -> str:
    """The first two groups of an id: its millisecond's 48 bits."""
    return "%08x-%04x-" % (ms >> 16 & 0xFFFFFFFF, ms & 0xFFFF)  # noqa: UP031


def random_tail() -> str:
    """The last two groups: the variant and 62 random bits."""
    rand = random.getrandbits(62)
    return "-%04x-%012x" % (0x8000 | rand >> 48, rand & 0xFFFFFFFFFFFF)  # noqa: UP031


class Ids:
    """UUIDv7s in order: within one millisecond a counter keeps them increasing."""

    def __init__(self) -> None:
        self.last_ms = 0
        self.seq = 0
        self.prefix = ""  # the id's first two groups: last_ms's
        self.tail = ""  # its last two: drawn once for last_ms

    def uuid7(self, now_ms: int) -> str:
        if now_ms <= self.last_ms:
            if self.seq < SEQ_MAX:
                self.seq += 1
                return self.prefix + SEQS[self.seq] + self.tail
            now_ms = self.last_ms + 1  # the counter ran out: the next millisecond's
        self.last_ms = now_ms
        self.seq = random.getrandbits(8)  # room for ≥ 3,840 more in this millisecond
        self.prefix = stamp_prefix(now_ms)
        self.tail = random_tail()
        return self.prefix + SEQS[self.seq] + self.tail

    def token(self) -> str:
        """A lock token: a UUIDv7 of now whose 74 bits after the stamp are all random."""
        ms = time.time_ns() // 1_000_000
        return stamp_prefix(ms) + SEQS[random.getrandbits(SEQ_BITS)] + random_tail()
