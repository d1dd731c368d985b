"""A log directory's layout file, ``DIR/layout``: the shard count and the tube routing the
log was written with (cluster/routing.py), which a server started on it must keep: a tube's
jobs are in the log of the shard the routing gave it.

The file is text, one ``key=value`` a line::

    shards=2
    routing=spread

A file without a ``routing=`` line was written before tube families: its tubes go by whole
name (`routing.NAMES`). It is written once, when a server first starts on the directory
(fsynced, then renamed into place), and never changed.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from shardq.cluster.routing import NAMES, ROUTINGS

FILE = "layout"


class Layout(NamedTuple):
    shards: int
    routing: str


class LayoutFileError(Exception):
    """The layout file exists but cannot be read or makes no sense."""


def read(log_dir: str) -> Layout | None:
    """The layout recorded in `log_dir`, or None when it records none (a new directory)."""
    path = os.path.join(log_dir, FILE)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (FileNotFoundError, NotADirectoryError):  # a new directory (or none: said later)
        return None
    except OSError as e:
        raise LayoutFileError(f"{path}: cannot be read: {e.strerror}") from None
    try:
        lines = dict(line.split("=", 1) for line in text.split())
        layout = Layout(int(lines["shards"]), lines.get("routing", NAMES))
    except (KeyError, ValueError):
        raise LayoutFileError(f"{path}: not a layout file ({text[:60]!r})") from None
    if layout.shards < 1 or layout.routing not in ROUTINGS:
        raise LayoutFileError(f"{path}: not a layout this shardq knows ({text[:60]!r})")
    return layout


def write(log_dir: str, layout: Layout) -> None:
    """Record `layout` in `log_dir` (durably: fsynced before it is renamed into place)."""
    path = os.path.join(log_dir, FILE)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(f"shards={layout.shards}\nrouting={layout.routing}\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(path + ".tmp", path)
