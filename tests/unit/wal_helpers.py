"""Helpers of the write-ahead log unit tests (tests/unit/test_wal_*.py).

A log in a tmp_path directory with the smallest segment it accepts and no fsync, the
whole-job record the engine writes, and the clocks of a first "process".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from shardq.engine.job import NS, State
from shardq.storage.segment_format import HEADER
from shardq.storage.wal import HEADROOM, Wal

T0 = 1_000 * NS  #: the fake monotonic clock's start
WALL0 = 1_700_000_000 * NS  #: wall clock minus monotonic clock in the first "process"
SEG = len(HEADER) + 2 * HEADROOM  #: the smallest segment the log accepts


def no_sync(_fd: int) -> None:
    """fsync stand-in: the tests do not need the data on the platter."""


def make_wal(path: Path, segment: int = SEG, fsync_ms: int | None = 0, **kw: Any) -> Wal:
    kw.setdefault("sync", no_sync)
    return Wal(str(path), segment, fsync_ms, **kw)


def replay_all(path: Path, segment: int = SEG) -> tuple[list[list[Any]], Wal]:
    w = make_wal(path, segment)
    return list(w.replay()), w


def J(job_id: int, body: bytes = b"body") -> list[Any]:
    """A whole-job record as Engine.full_record makes it (ready, no deadline)."""
    head = ["J", job_id, job_id, "default", 100, 0, NS, WALL0, int(State.READY), 0]
    return [*head, 0, 0, 0, 0, 0, body]


def segment_files(path: Path) -> list[Path]:
    return sorted(path.glob("*.wal"), key=lambda p: int(p.stem))


def disk_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.iterdir() if p.is_file())
