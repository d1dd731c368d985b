"""Workq's text protocol, framing, sans-IO: bytes in, `Frame`s out.

A command is one line ending in CRLF: words separated by spaces (empty words skipped),
``-key=value`` words are flags. ``add``, ``schedule``, ``run``, ``complete`` and ``fail``
are followed by a block of as many bytes as their size word says, and a CRLF. What each
command's words mean is `workq_args.py`; the replies are `workq_replies.py`.

Errors are Workq's own, answered and then the stream goes on: a block whose size word is
a number is always consumed (the declared bytes and the CRLF; if no CRLF follows them, up
to the next CRLF; past 1 MiB it is refused and dropped as it arrives, never buffered), so
a bad block never turns into commands.
Only a line longer than `MAX_LINE` with no end in sight closes the connection (the next
command cannot be found).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shardq.protocol.inbuf import InputBuffer, Invalid
from shardq.protocol.workq_replies import OUT_OF_MEMORY

#: The longest command line (Workq's own command limit is 10,000 bytes).
MAX_LINE = 10_000
#: The largest payload or result (1 MiB), as Workq.
MAX_BLOCK = 1_048_576

#: command -> (word count with the name, exact (True) or at least; index of the size word)
BLOCK_COMMANDS = {"add": 5, "schedule": 6, "run": 5, "complete": 2, "fail": 2}
ARG_COUNTS: dict[str, tuple[int, bool]] = {
    "add": (6, True),
    "schedule": (7, True),
    "run": (6, True),
    "complete": (3, True),
    "fail": (3, True),
    "delete": (2, True),
    "result": (3, True),
    "lease": (3, False),
    "inspect": (2, False),
}
#: The size word of a block that is not a number within 0..MAX_BLOCK: Workq's words.
SIZE_ERRORS = {"fail": "Invalid result size"}


def client_error(text: str) -> bytes:
    return b"-CLIENT-ERROR " + text.encode() + b"\r\n"


INVALID_ARGS = client_error("Invalid command args")
INVALID_FLAGS = client_error("Invalid command flags")
UNKNOWN = client_error("Unknown command")
LINE_TOO_LONG = client_error("Line too long")


@dataclass(frozen=True, slots=True)
class Frame:
    """A whole command: its name, its words after the name (flags taken out), its flags and,
    for the block commands, the block."""

    name: str
    args: tuple[bytes, ...]
    flags: dict[str, bytes] = field(default_factory=dict)
    block: bytes = b""


Command = Frame | Invalid


def split_line(line: bytes) -> tuple[list[bytes], dict[str, bytes]] | Invalid:
    """The words of a line and its flags (``-key=value``: a word starting with ``-`` that
    has an ``=``); an empty key or value, or a flag given twice, is an error."""
    words: list[bytes] = []
    flags: dict[str, bytes] = {}
    for word in line.split(b" "):
        if not word:
            continue
        if word[:1] != b"-" or b"=" not in word:
            words.append(word)
            continue
        key, _, value = word[1:].partition(b"=")
        name = key.decode(errors="replace")
        if not key or not value or name in flags:
            return Invalid(INVALID_FLAGS)
        flags[name] = value
    return words, flags


def block_size(word: bytes) -> int | None:
    """A size word as Workq reads it (a decimal number, maybe signed), or None."""
    try:
        return int(word.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return None


class WorkqParser(InputBuffer):
    def next_command(self) -> Command | None:
        if self.dead or self.skip:
            return None
        end = self.buf.find(b"\n")
        if end < 0:
            if len(self.buf) > MAX_LINE:
                self.dead = True
                self.buf.clear()
                return Invalid(LINE_TOO_LONG, close=True)
            return None
        if end > MAX_LINE:
            del self.buf[: end + 1]
            return Invalid(LINE_TOO_LONG)
        raw = bytes(self.buf[: end + 1])
        if not raw.endswith(b"\r\n"):  # a bare LF ends no Workq line
            del self.buf[: end + 1]
            return Invalid(INVALID_ARGS)
        split = split_line(raw[:-2])
        name = raw[:-2].split(b" ", 1)[0].decode(errors="replace")
        where = BLOCK_COMMANDS.get(name)
        if where is None:
            del self.buf[: end + 1]
            return split if isinstance(split, Invalid) else self._frame(name, *split)
        return self._block(end + 1, name, where, split)

    def _frame(self, name: str, words: list[bytes], flags: dict[str, bytes]) -> Command:
        counts = ARG_COUNTS.get(name)
        if counts is None:
            return Invalid(UNKNOWN)
        count, exact = counts
        if len(words) != count if exact else len(words) < count:
            return Invalid(INVALID_ARGS)
        return Frame(name, tuple(words[1:]), flags)

    def _block(
        self,
        line_end: int,
        name: str,
        where: int,
        split: tuple[list[bytes], dict[str, bytes]] | Invalid,
    ) -> Command | None:
        """A block command: the line and its block once both are here. Its errors come
        after the block is consumed when its size can be read, so the stream stays in
        step."""
        words = split[0] if not isinstance(split, Invalid) else self._plain_words(line_end)
        size_error = client_error(SIZE_ERRORS.get(name, "Invalid payload size"))
        if len(words) != ARG_COUNTS[name][0]:
            del self.buf[:line_end]
            return Invalid(INVALID_ARGS if not isinstance(split, Invalid) else split.reply)
        size = block_size(words[where])
        if size is None or size < 0:
            del self.buf[:line_end]
            return Invalid(size_error if not isinstance(split, Invalid) else split.reply)
        if size > MAX_BLOCK:  # refused, and dropped as it arrives (never buffered)
            del self.buf[:line_end]
            dropped = min(size + 2, len(self.buf))
            del self.buf[:dropped]
            self.skip = size + 2 - dropped
            return Invalid(size_error if not isinstance(split, Invalid) else split.reply)
        end = line_end + size
        if len(self.buf) < end + 2:
            return None
        if self.buf[end : end + 2] != b"\r\n":  # the size was wrong: drop through the next CRLF
            cut = self.buf.find(b"\r\n", end)
            if cut < 0 and len(self.buf) - end <= MAX_LINE:
                return None
            del self.buf[: cut + 2 if cut >= 0 else len(self.buf)]
            return split if isinstance(split, Invalid) else Invalid(size_error)
        try:
            block = bytes(self.buf[line_end:end])
        except MemoryError:  # not held: dropped and answered so; the next command goes on
            del self.buf[: end + 2]
            return split if isinstance(split, Invalid) else Invalid(OUT_OF_MEMORY, shed=True)
        del self.buf[: end + 2]
        if isinstance(split, Invalid):
            return split
        return Frame(name, tuple(words[1:]), split[1], block)

    def _plain_words(self, line_end: int) -> list[bytes]:
        """The words of a line whose flags are bad (to find its block's size)."""
        line = bytes(self.buf[: line_end - 2])
        return [w for w in line.split(b" ") if w and not (w[:1] == b"-" and b"=" in w)]
