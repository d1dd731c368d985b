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

    def uuid7(self, now_ms: int) -> str:
        if now_ms <= self.last_ms:
            now_ms, self.seq = self.last_ms, self.seq + 1
        else:
            self.seq = random.getrandbits(8)
        self.last_ms = now_ms
        rand = random.getrandbits(62)  # version 7, variant 0b10, then 62 random bits
        high, low, seq = now_ms >> 16 & 0xFFFFFFFF, now_ms & 0xFFFF, 0x7000 | self.seq & 0xFFF
        variant, tail = 0x8000 | rand >> 48, rand & 0xFFFFFFFFFFFF
        return f"{high:08x}-{low:04x}-{seq:04x}-{variant:04x}-{tail:012x}"

    def token(self) -> str:
        """A lock token."""
        return self.uuid7(time.time_ns() // 1_000_000)
