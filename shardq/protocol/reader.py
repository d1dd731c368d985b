"""Beanstalk replies as a client reads them, sans-IO: bytes in, (line, body) out.

The server's own processes that speak beanstalk as clients (the Kestrel front-end) read
their answers with this. A reply is one CRLF-terminated line; ``RESERVED <id> <n>``,
``FOUND <id> <n>`` and ``OK <n>`` are followed by n bytes of body and a CRLF.
"""

from __future__ import annotations

from shardq.protocol.record import Record

#: Replies followed by a body, and the index of the word that gives its size.
_BODY_SIZE = {b"RESERVED": 2, b"FOUND": 2, b"OK": 1}
#: A reply line longer than this is a broken stream (the longest beanstalk line is short).
MAX_REPLY_LINE = 512


class ReplyError(Exception):
    """The stream is not beanstalk replies (a line too long, a bad size)."""


class Reply(Record):
    """One reply: its line split on spaces (``[b"RESERVED", b"7", b"5"]``) and its body,
    if it has one. A plain slotted class (a frozen dataclass took 2.3x as long to make: one
    a job the bunqueue door puts or pulls); not changed once made."""

    __slots__ = ("words", "body")
    __match_args__ = ("words", "body")

    def __init__(self, words: list[bytes], body: bytes | None = None) -> None:
        self.words = words
        self.body = body

    @property
    def name(self) -> bytes:
        return self.words[0] if self.words else b""

    def number(self, index: int = 1) -> int:
        return int(self.words[index])


class ReplyReader:
    """The replies not read yet and how far they are read: a reply taken moves the offset,
    and what was read is dropped once a feed (not once a reply, which moved the rest of a
    batch's 50 each time)."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.pos = 0

    @property
    def buffered(self) -> int:
        return len(self.buf) - self.pos

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self.pos:
            del self.buf[: self.pos]
            self.pos = 0
        self.buf += data

    def next_reply(self) -> Reply | None:
        buf, pos = self.buf, self.pos
        end = buf.find(b"\r\n", pos)
        if end < 0:
            if len(buf) - pos > MAX_REPLY_LINE:
                raise ReplyError(f"reply line longer than {MAX_REPLY_LINE} bytes")
            return None
        words = bytes(buf[pos:end]).split(b" ")
        where = _BODY_SIZE.get(words[0])
        if where is None:
            self.pos = end + 2
            return Reply(words)
        try:
            size = int(words[where])
        except (IndexError, ValueError):
            raise ReplyError(f"bad reply line {bytes(buf[pos:end])!r}") from None
        start = end + 2
        if len(buf) < start + size + 2:
            return None
        self.pos = start + size + 2
        return Reply(words, bytes(buf[start : start + size]))
