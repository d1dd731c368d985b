"""Settings that change without a restart (SIGHUP): the supervisor re-reads the config
file, writes what changed to ``RUN_DIR/live.json`` and sends SIGHUP to every child; each
child applies it at its loop's next turn (`lifeline.check`). A child started later gets
the same values on its command line.

`Live` names the fields, defined once; everything else in the config needs a restart.
The per-tube policies (`tubes`) reach the shards this way too: each shard (a process of its
own or hosted by a serving process) re-resolves the policy of every tube it holds.
"""

from __future__ import annotations

import json
import logging
import os
import signal
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from shardq.config.values import DEFAULT_MAX_OUTPUT_BYTES
from shardq.log import setup as setup_logging

FILE = "live.json"

log = logging.getLogger(__name__)


class Live(NamedTuple):
    """The settings a running server takes on SIGHUP (Config fields of the same names)."""

    verbose: int
    log_level: str | None
    log_format: str
    max_connections: int
    max_output_bytes: int
    allow: tuple[str, ...]
    tubes: dict[str, dict[str, Any]]  # per-tube policies (config/tubes.py)


def of(config: Any) -> Live:
    """The live part of a Config."""
    return Live(*(getattr(config, name) for name in Live._fields))


def write(run_dir: str, live: Live) -> None:
    """Write atomically: a child reading it never sees half a file."""
    path = os.path.join(run_dir, FILE)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(live._asdict(), f)
    os.replace(tmp, path)


def read(run_dir: str) -> Live:
    with open(os.path.join(run_dir, FILE), encoding="utf-8") as f:
        data = json.load(f)
    data["allow"] = tuple(data["allow"])
    return Live(**data)


#: What a child does with new settings, besides its logging (a door: its limits, allow-list).
Apply = Callable[[Live], None]
_pending = False
_appliers: list[Apply] = []
_role = ""
_run_dir = ""


def listen(role: str, run_dir: str) -> None:
    """In a child: take SIGHUP as "read live.json", applied by `apply_pending`."""
    global _role, _run_dir
    _role, _run_dir = role, run_dir
    signal.signal(signal.SIGHUP, on_sighup)


def on_sighup(_signum: int, _frame: object) -> None:
    global _pending
    _pending = True


def on_change(apply: Apply) -> None:
    _appliers.append(apply)


def apply_pending() -> None:
    """Apply live.json if a SIGHUP came since the last call (cheap when none did)."""
    global _pending
    if not _pending:
        return
    _pending = False
    try:
        live = read(_run_dir)
    except (OSError, ValueError, TypeError) as e:
        log.warning("SIGHUP: cannot read %s: %s", FILE, e)
        return
    setup_logging(_role, live.verbose, live.log_level, live.log_format)
    for apply in _appliers:
        apply(live)
    log.info("SIGHUP: settings applied")


Change = tuple[str, Any, Any]  #: (config key, old value, new value)


def changes(old: Any, new: Any) -> tuple[list[Change], list[Change]]:
    """What differs between two Configs: (changes a running server takes, changes that need
    a restart), each named by its config-file key."""
    from shardq.config import FIELDS

    applied: list[Change] = []
    refused: list[Change] = []
    for name, (key, _validate) in FIELDS.items():
        before, after = getattr(old, name), getattr(new, name)
        if before != after:
            (applied if name in Live._fields else refused).append((key, before, after))
    return applied, refused


def limits_set(max_connections: int, max_output_bytes: int, allow: Sequence[str] | str) -> bool:
    """Whether a connection limit is configured (`stats` shows its limit-* keys then, as it
    does when limits.max_jobs or max_memory is set): max_connections, an allow-list, or a
    max_output_bytes other than the default."""
    return bool(max_connections or allow) or max_output_bytes != DEFAULT_MAX_OUTPUT_BYTES
