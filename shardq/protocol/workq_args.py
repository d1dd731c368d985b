"""What the words of each Workq command mean, checked in Workq's order with Workq's error
texts (`-CLIENT-ERROR Invalid ID`, `Invalid TTR`, ...), sans-IO.

`parse(frame, now_ms)` gives a typed command or an `Invalid`. Times are unix milliseconds.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from shardq.protocol.workq import INVALID_ARGS, UNKNOWN, Frame, Invalid, client_error

MAX_NAME = 255
MAX_TTR_MS = 86_400_000  # 24 hours
MAX_TTL_MS = 2_592_000_000  # 30 days
MAX_WAIT_MS = 86_400_000
MAX_TRIES = 255  # max-attempts and max-fails
MAX_LIMIT = 100  # inspect's page
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
_NAME = re.compile(rb"[A-Za-z0-9_.-]+")
_UUID = re.compile(rb"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


class Refused(Exception):
    """A word is wrong: answer `reply`."""

    def __init__(self, reply: bytes) -> None:
        self.reply = reply


@dataclass(frozen=True, slots=True)
class Add:
    """add, schedule (`at`: the scheduled unix ms) and run (`wait_ms`; no ttl)."""

    id: str
    name: str
    ttr: int
    ttl: int
    payload: bytes
    priority: int = 0
    max_attempts: int = 0
    max_fails: int = 0
    at: int = 0
    wait_ms: int | None = None  # run only

    @property
    def is_run(self) -> bool:
        return self.wait_ms is not None


@dataclass(frozen=True, slots=True)
class Finish:
    """complete (`success`) and fail."""

    id: str
    result: bytes
    success: bool


@dataclass(frozen=True, slots=True)
class Result:
    id: str
    wait_ms: int


@dataclass(frozen=True, slots=True)
class Lease:
    names: tuple[str, ...]
    wait_ms: int


@dataclass(frozen=True, slots=True)
class Delete:
    id: str


@dataclass(frozen=True, slots=True)
class Inspect:
    """inspect server | queues | queue NAME | jobs NAME | scheduled-jobs NAME | job ID."""

    what: str
    name: str = ""
    offset: int = 0
    limit: int = 0


Typed = Add | Finish | Result | Lease | Delete | Inspect


def refuse(text: str) -> Refused:
    return Refused(client_error(text))


def job_id(word: bytes) -> str:
    """A UUIDv4 in canonical form (lower-cased), as Workq checks it: version 4, RFC 4122
    variant, not nil."""
    if not _UUID.fullmatch(word):
        raise refuse("Invalid ID")
    u = uuid.UUID(word.decode())
    if u.version != 4 or u.variant != uuid.RFC_4122:
        raise refuse("Invalid ID")
    return str(u)


def name(word: bytes) -> str:
    if len(word) > MAX_NAME or not _NAME.fullmatch(word):
        raise refuse("Invalid Name")
    return word.decode()


def unsigned(word: bytes, bits: int, error: str) -> int:
    """A decimal number 0 .. 2^bits-1 (Go's ParseUint: digits only, maybe a leading +)."""
    text = word.decode(errors="replace")
    if not text.isdigit() or int(text) >= 1 << bits:
        raise refuse(error)
    return int(text)


def ranged(word: bytes, bits: int, most: int, error: str) -> int:
    """An unsigned number, not 0, at most `most`."""
    value = unsigned(word, bits, error)
    if value == 0 or value > most:
        raise refuse(error)
    return value


def wait(word: bytes) -> int:
    text = word.decode(errors="replace")
    if not text.isdigit() or int(text) > MAX_WAIT_MS:
        raise refuse("Invalid wait timeout")
    return int(text)


def priority(flags: dict[str, bytes]) -> int:
    word = flags.get("priority")
    if word is None:
        return 0
    text = word.decode(errors="replace")
    body = text[1:] if text[:1] in "+-" else text
    if not body.isdigit() or not -(1 << 31) <= int(text) < 1 << 31:
        raise refuse("Invalid Priority")
    return int(text)


def tries(flags: dict[str, bytes], key: str, error: str) -> int:
    word = flags.get(key)
    return 0 if word is None else unsigned(word, 8, error)


def scheduled(word: bytes) -> int:
    try:
        when = datetime.strptime(word.decode(), TIME_FORMAT).replace(tzinfo=UTC)
    except (UnicodeDecodeError, ValueError):
        raise refuse("Invalid Time") from None
    return int(when.timestamp() * 1000)


def parse_add(f: Frame, now_ms: int) -> Add:
    schedule = f.name == "schedule"
    if len(f.flags) > 3:
        raise Refused(INVALID_ARGS)
    ident, nm = job_id(f.args[0]), name(f.args[1])
    ttr = ranged(f.args[2], 32, MAX_TTR_MS, "Invalid TTR")
    ttl = ranged(f.args[3], 64, MAX_TTL_MS, "Invalid TTL")
    at = scheduled(f.args[4]) if schedule else 0
    max_attempts = tries(f.flags, "max-attempts", "Invalid Max Attempts")
    max_fails = tries(f.flags, "max-fails", "Invalid Max Fails")
    prio = priority(f.flags)
    if (at or now_ms) + ttl < now_ms:  # expired before it could run
        raise refuse("Invalid Time")
    return Add(ident, nm, ttr, ttl, f.block, prio, max_attempts, max_fails, at)


def parse_run(f: Frame) -> Add:
    if len(f.flags) > 1:
        raise Refused(INVALID_ARGS)
    ident, nm = job_id(f.args[0]), name(f.args[1])
    ttr = ranged(f.args[2], 32, MAX_TTR_MS, "Invalid TTR")
    prio = priority(f.flags)
    return Add(ident, nm, ttr, 0, f.block, prio, wait_ms=wait(f.args[3]))


def parse_inspect(f: Frame) -> Inspect:
    what, args = f.args[0].decode(errors="replace"), f.args[1:]
    counts = {"server": 0, "queues": 2, "queue": 1, "jobs": 3, "scheduled-jobs": 3, "job": 1}
    if what not in counts:
        raise Refused(UNKNOWN)
    if len(args) != counts[what] or f.flags:
        raise Refused(INVALID_ARGS)
    if what == "job":
        return Inspect(what, job_id(args[0]))
    named = what in ("queue", "jobs", "scheduled-jobs")
    nm = name(args[0]) if named else ""
    paged = args[1:] if named else args
    if not paged:
        return Inspect(what, nm)
    offset = unsigned(paged[0], 32, "Invalid cursor offset")
    limit = unsigned(paged[1], 16, "Invalid limit")
    if not 1 <= limit <= MAX_LIMIT:
        raise refuse("Invalid limit")
    return Inspect(what, nm, offset, limit)


def parse(f: Frame, now_ms: int) -> Typed | Invalid:
    try:
        if f.name in ("add", "schedule"):
            return parse_add(f, now_ms)
        if f.name == "run":
            return parse_run(f)
        if f.name == "inspect":
            return parse_inspect(f)
        if f.flags:
            return Invalid(INVALID_ARGS)
        if f.name in ("complete", "fail"):
            return Finish(job_id(f.args[0]), f.block, f.name == "complete")
        if f.name == "result":
            return Result(job_id(f.args[0]), wait(f.args[1]))
        if f.name == "lease":
            return Lease(tuple(name(w) for w in f.args[:-1]), wait(f.args[-1]))
        if f.name == "delete":
            return Delete(job_id(f.args[0]))
    except Refused as e:
        return Invalid(e.reply)
    return Invalid(UNKNOWN)
