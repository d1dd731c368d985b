"""bunqueue's ids: UUIDv7 strings (time-ordered, so the FIFO tie-break of jobs pushed in one
millisecond too), for jobs and lock tokens."""

from __future__ import annotations

import random
import time


class Ids:
    """UUIDv7s in order: within one millisecond a counter keeps them increasing."""

    def __init__(self) -> None:
        self.last_ms = 0
        self.seq = 0
        self.prefix = ""  # the id's first two groups: last_ms's

    def uuid7(self, now_ms: int) -> str:
        if now_ms <= self.last_ms:
            now_ms, self.seq = self.last_ms, self.seq + 1
        else:
            self.seq = random.getrandbits(8)
            self.last_ms = now_ms
            self.prefix = "%08x-%04x-" % (now_ms >> 16 & 0xFFFFFFFF, now_ms & 0xFFFF)  # noqa: UP031
        rand = random.getrandbits(62)  # version 7, variant 0b10, then 62 random bits
        seq, variant, tail = 0x7000 | self.seq & 0xFFF, 0x8000 | rand >> 48, rand & 0xFFFFFFFFFFFF
        # (%-formatting: a third of an f-string's time with these format specs)
        return "%s%04x-%04x-%012x" % (self.prefix, seq, variant, tail)  # noqa: UP031

    def token(self) -> str:
        """A lock token."""
        return self.uuid7(time.time_ns() // 1_000_000)
