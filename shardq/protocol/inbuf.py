"""What the front-end protocols' parsers (Kestrel, Workq) share, sans-IO: the bytes a
client sent that are not parsed yet, the rest of a refused block still to be dropped as
it arrives (never buffered), the end of parsing once the stream cannot be followed, and
what a parser gives for input that is no command (`Invalid`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Invalid:
    """Input that is no valid command: answer `reply`; with `close`, end the connection
    after it (the stream cannot be followed); `shed`: a valid one whose block memory was
    short to hold (dropped, and answered with the protocol's out-of-memory error)."""

    reply: bytes
    close: bool = False
    shed: bool = False


class InputBuffer:
    def __init__(self) -> None:
        self.buf = bytearray()
        self.skip = 0  # bytes of a refused block still to drop as they arrive
        self.dead = False  # a line too long was seen: nothing more is parsed

    @property
    def buffered(self) -> int:
        return len(self.buf)

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self.dead:
            return
        if self.skip:
            dropped = min(self.skip, len(data))
            self.skip -= dropped
            data = data[dropped:]
        self.buf += data
