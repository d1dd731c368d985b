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
        rand = random.getrandbits(62)
        value = (now_ms << 80) | (0x7 << 76) | ((self.seq & 0xFFF) << 64) | (0b10 << 62) | rand
        h = f"{value:032x}"
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def token(self) -> str:
        """A lock token."""
        return self.uuid7(time.time_ns() // 1_000_000)
