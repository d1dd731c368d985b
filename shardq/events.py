"""The job event log: one JSON object per line, per shard, in rotating files.

This is the contract between the server and the analytics pipeline (shardq/pipeline):
every record has exactly the fields of `FIELDS`. The shard process hands over the rows
its engine noted (`Engine.audit`) once per turn; writing is buffered, and a failing disk
never stops the queue — rows are dropped and counted instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from typing import Any

FIELDS = ("ts", "server", "shard", "tube", "job", "event", "pri", "delay", "ttr", "bytes")
EVENTS = ("put", "reserve", "release", "bury", "kick", "delete", "timeout", "touch")
MAX_FILE_BYTES = 64 * 1024 * 1024  #: rotate a file when it grows past this


class EventLog:
    """Appends a shard's job events to DIR/<server>-shard<N>-<YYYYmmddHH>.jsonl."""

    def __init__(self, directory: str, server: str, shard: int, max_bytes: int = MAX_FILE_BYTES):
        self.directory = directory
        self.server = server
        self.shard = shard
        self.max_bytes = max_bytes
        self.dropped = 0
        self._file: Any = None
        self._hour = ""
        self._part = 0
        self._size = 0
        os.makedirs(directory, exist_ok=True)

    def _path(self) -> str:
        suffix = f".{self._part}" if self._part else ""
        return os.path.join(
            self.directory, f"{self.server}-shard{self.shard}-{self._hour}{suffix}.jsonl"
        )

    def _target(self, wall: float) -> Any:
        hour = time.strftime("%Y%m%d%H", time.gmtime(wall))
        if self._file is None or hour != self._hour or self._size >= self.max_bytes:
            self.close()
            self._part = self._part + 1 if hour == self._hour else 0
            self._hour = hour
            self._file = open(self._path(), "a", encoding="utf-8")  # noqa: SIM115
            self._size = self._file.tell()
        return self._file

    def write(self, rows: list[tuple], wall_offset_ns: int) -> None:
        """Write engine audit rows; `wall_offset_ns` turns their monotonic times into epoch."""
        if not rows:
            return
        lines = []
        for now, event, job, tube, pri, delay, ttr, size in rows:
            ts = round((now + wall_offset_ns) / 1e9, 6)
            record = dict(
                zip(
                    FIELDS,
                    (ts, self.server, self.shard, tube, job, event, pri, delay, ttr, size),
                    strict=True,
                )
            )
            lines.append(json.dumps(record, separators=(",", ":")))
        data = "\n".join(lines) + "\n"
        try:
            f = self._target(time.time())
            f.write(data)
            f.flush()
            self._size += len(data)
        except OSError as e:
            self.dropped += len(rows)
            print(
                f"shard {self.shard}: event log: {e.strerror}; {len(rows)} events dropped",
                file=sys.stderr,
            )
            self.close()

    def close(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None
