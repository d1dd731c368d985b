"""Logging for every shardq process: one line per event on stderr, naming the process.

Each process calls `setup(role, verbose)` once at its start (the supervisor, every child,
`shardq bench`); modules log through ``logging.getLogger(__name__)`` and never configure
handlers themselves. A line reads ``shardq[acceptor] WARNING message``.

`verbose` is the config's `verbose` (`-V` counts): 0 shows warnings and errors, 1 (`-V`)
adds INFO, 2 and more (`-VV`) DEBUG. The supervisor passes it to every child it starts.

Diagnostics go here; a command's result is its output, not a log line: the supervisor's
``shardq listening on HOST:PORT`` on stdout (tests and tools parse it), the tables of
`shardq bench`, the summary of `shardq analyze`.

Standard library only: every layer may use it.
"""

from __future__ import annotations

import logging
import sys

#: Root level for verbose 0, 1, 2 (and above).
LEVELS = (logging.WARNING, logging.INFO, logging.DEBUG)


def level_for(verbose: int) -> int:
    """The logging level of a `-V` count (0 = WARNING, 1 = INFO, 2 or more = DEBUG)."""
    return LEVELS[max(0, min(verbose, len(LEVELS) - 1))]


def line_format(role: str) -> str:
    """The format of one line of `role`'s log (`%` in a role is kept literally)."""
    return f"shardq[{role.replace('%', '%%')}] %(levelname)s %(message)s"


def setup(role: str, verbose: int) -> None:
    """Send the root logger's records to stderr, one line each, at `verbose`'s level.

    Replaces any handler set before (a re-executed or forked process calls it again).
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(line_format(role)))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level_for(verbose))
