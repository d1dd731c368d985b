"""The job event log: one JSON object per line, per shard, in rotating files.

This is the contract between the server and the analytics pipeline (shardq/pipeline):
every record has exactly the fields of `FIELDS`, in that order. The shard process hands
over the rows its engine noted (`Engine.audit`) once per turn; they are written as one
batch and flushed, so a crash loses at most the turn in progress.

Files are DIR/<server>-shard<N>-<YYYYmmddHH>[.<part>].jsonl: a new file every UTC hour,
and a new part when one passes `max_bytes`, so no file grows without bound (deleting old
hours is the operator's retention policy). A failing disk never stops the queue: the
batch is dropped and counted in `dropped`, one warning is logged (at most every
LOG_EVERY seconds), and the next batch tries a fresh open.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Callable
from typing import IO, Any

FIELDS = ("ts", "server", "shard", "tube", "job", "event", "pri", "delay", "ttr", "bytes")
#: A job a closing connection held is given back as a `release` (delay 0): every change of
#: a job's state is one of these (a delayed job's becoming ready follows from its delay).
EVENTS = ("put", "reserve", "release", "bury", "kick", "delete", "timeout", "touch")
MAX_FILE_BYTES = 64 * 1024 * 1024  #: start a new part when a file grows past this
LOG_EVERY = 60.0  #: seconds between two "events dropped" warnings

log = logging.getLogger(__name__)

Opener = Callable[[str], IO[str]]


def _open_append(path: str) -> IO[str]:
    return open(path, "a", encoding="utf-8")  # noqa: SIM115 (EventLog closes it)


class EventLog:
    """Appends a shard's job events to DIR/<server>-shard<N>-<YYYYmmddHH>.jsonl.

    `clock` (epoch seconds) picks the hour of the file name; `opener` opens a file for
    appending. Both are seams for tests (a fake hour, a disk that fails). The "events
    dropped" warning goes to this module's logger, or as a plain line to `log` if given.
    """

    def __init__(
        self,
        directory: str,
        server: str,
        shard: int,
        max_bytes: int = MAX_FILE_BYTES,
        clock: Callable[[], float] = time.time,
        opener: Opener = _open_append,
        log: IO[str] | None = None,
    ) -> None:
        self.directory = directory
        self.server = server
        self.shard = shard
        self.max_bytes = max_bytes
        self.dropped = 0  #: events lost to write errors since start
        self._clock = clock
        self._opener = opener
        self._log = log
        self._file: IO[str] | None = None
        self._hour = ""
        self._part = 0
        self._size = 0
        self._logged_at = -LOG_EVERY
        self._logged_dropped = 0
        # Every line repeats these; json.dumps them once (server names are config text).
        server_json = json.dumps(server).replace("%", "%%")
        self._head = f'{{"ts":%.6f,"server":{server_json},"shard":{int(shard)},"tube":'

    # ------------------------------------------------------------------ formatting
    def format(self, rows: list[tuple[Any, ...]], wall_offset_ns: int) -> str:
        """JSON lines for engine audit rows; `wall_offset_ns` turns monotonic ns into epoch."""
        head = self._head
        out = []
        for now, event, job, tube, pri, delay, ttr, size in rows:
            out.append(
                head
                % ((now + wall_offset_ns) / 1e9)
                + f'{json.dumps(tube)},"job":{job},"event":"{event}","pri":{pri},'
                f'"delay":{delay},"ttr":{ttr},"bytes":{size}}}\n'
            )
        return "".join(out)

    # ------------------------------------------------------------------ files
    def path(self, hour: str, part: int) -> str:
        suffix = f".{part}" if part else ""
        name = f"{self.server}-shard{self.shard}-{hour}{suffix}.jsonl"
        return os.path.join(self.directory, name)

    def _target(self, wall: float) -> IO[str]:
        hour = time.strftime("%Y%m%d%H", time.gmtime(wall))
        if self._file is not None and hour == self._hour and self._size < self.max_bytes:
            return self._file
        self.close()
        part = self._part if hour == self._hour else 0
        while _size_of(self.path(hour, part)) >= self.max_bytes:  # full: this turn's or older
            part += 1
        os.makedirs(self.directory, exist_ok=True)
        f = self._opener(self.path(hour, part))
        self._file, self._hour, self._part = f, hour, part
        self._size = f.tell()
        if self._size and not _ends_with_newline(self.path(hour, part)):
            f.write("\n")  # a torn line from a crash or a full disk stays on its own
            self._size += 1
        return f

    def write(self, rows: list[tuple[Any, ...]], wall_offset_ns: int) -> None:
        """Append one turn's audit rows; on OSError drop them, count them, say so."""
        if not rows:
            return
        data = self.format(rows, wall_offset_ns)
        try:
            f = self._target(self._clock())
            f.write(data)
            f.flush()
            self._size += len(data)
        except OSError as e:
            self.dropped += len(rows)
            self.close()
            self._report(e)

    def _report(self, error: OSError) -> None:
        now = time.monotonic()
        if now - self._logged_at < LOG_EVERY:
            return
        lost = self.dropped - self._logged_dropped
        self._logged_at, self._logged_dropped = now, self.dropped
        reason = error.strerror or str(error)
        message = (
            f"shard {self.shard}: event log: {reason}; {lost} events dropped "
            f"({self.dropped} since start)"
        )
        if self._log is None:
            log.warning("%s", message)
        else:
            self._log.write(message + "\n")

    def close(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None


def _size_of(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _ends_with_newline(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            f.seek(-1, os.SEEK_END)
            return f.read(1) == b"\n"
    except OSError:
        return True


def parse_line(line: str) -> dict[str, Any]:
    """One record back from its line (tests and tools); raises ValueError if malformed."""
    record = json.loads(line)
    if not isinstance(record, dict) or tuple(record) != FIELDS:
        raise ValueError(f"not an event record: {line!r}")
    return record
