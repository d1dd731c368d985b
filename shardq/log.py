"""Logging for every shardq process: one line per event on stderr, naming the process.

Each process calls `setup(role, verbose)` once at its start (the supervisor, every child,
`shardq bench`); modules log through ``logging.getLogger(__name__)`` and never configure
handlers themselves. A line reads ``2026-11-27T03:10:00.123Z shardq[serving] WARNING
message`` (the time in UTC, as journald-less users expect; journald adds its own); a
command run by hand (`shardq analyze`, `shardq bench`) writes ``shardq[analyze] ERROR ...``.

`verbose` is the config's `verbose` (`-V` counts): 0 shows warnings and errors, 1 (`-V`)
adds INFO, 2 and more (`-VV`) DEBUG; the config's `log.level` (debug, info, warning,
error), when set, wins. `log.format` is `text` (the line above) or `json` (one object a
line: ts, role, level, logger, msg, and exc for a traceback) for log collectors. The
supervisor passes all three to every child it starts.

Diagnostics go here; a command's result is its output, not a log line: the supervisor's
``shardq listening on HOST:PORT`` on stdout (tests and tools parse it; in JSON mode it is
an object like the log's, its text in ``msg``: `output_line`), the tables of `shardq
bench`, the summary of `shardq analyze`.

Standard library only: every layer may use it.
"""

from __future__ import annotations

import json
import logging
import sys
import time

#: Root level for verbose 0, 1, 2 (and above).
LEVELS = (logging.WARNING, logging.INFO, logging.DEBUG)


def level_for(verbose: int) -> int:
    """The logging level of a `-V` count (0 = WARNING, 1 = INFO, 2 or more = DEBUG)."""
    return LEVELS[max(0, min(verbose, len(LEVELS) - 1))]


#: `log.level` values, and `log.format` values.
LEVEL_NAMES = ("debug", "info", "warning", "error")
FORMATS = ("text", "json")


def timestamp(created: float) -> str:
    """UTC, to the millisecond: 2026-11-27T03:10:00.123Z."""
    ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created))
    return f"{ts}.{int(created * 1000) % 1000:03d}Z"


class TextFormatter(logging.Formatter):
    """One line per record: its time, the process, the level, the message."""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return timestamp(record.created)


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def __init__(self, role: str) -> None:
        super().__init__()
        self.role = role

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": timestamp(record.created),
            "role": self.role,
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


#: the roles of commands run by hand (`shardq analyze`, `shardq bench`, the stub): their
#: lines are a terminal's, without the time a server's log lines start with
COMMANDS = frozenset({"analyze", "bench", "stub"})


def line_format(role: str) -> str:
    """The format of one line of `role`'s log (`%` in a role is kept literally): a server
    process's lines start with the time, a command's do not."""
    line = f"shardq[{role.replace('%', '%%')}] %(levelname)s %(message)s"
    return line if role in COMMANDS else f"%(asctime)s {line}"


def setup(role: str, verbose: int, level: str | None = None, fmt: str = "text") -> None:
    """Send the root logger's records to stderr, one line each, at `level` (a LEVEL_NAMES
    name) or else `verbose`'s level, as text or JSON (`fmt`).

    Replaces any handler set before (a re-executed or forked process calls it again).
    """
    handler = logging.StreamHandler(sys.stderr)
    formatter = JsonFormatter(role) if fmt == "json" else TextFormatter(line_format(role))
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper() if level else level_for(verbose))


def output_line(text: str, role: str, fmt: str) -> str:
    """A line of a command's output (``shardq listening on ...``): as it is in text mode,
    in JSON mode an object like the log's (`msg` holds the text), so a collector that reads
    every line as JSON reads this one too."""
    if fmt != "json":
        return text
    entry = {"ts": timestamp(time.time()), "role": role, "level": "INFO", "msg": text}
    return json.dumps(entry, ensure_ascii=False)
