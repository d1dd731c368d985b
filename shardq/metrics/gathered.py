"""What the metrics process gathered for one request: the server's `stats` (from the
coordinator), every shard's tubes and histograms (the METRICS op), and its processes (from
/proc); and what makes it healthy.

Pure: built from the answers' plain values, so the exposition and the dashboard's JSON can
be tested without a server.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from shardq.metrics.procstat import NOT_RUNNING
from shardq.protocol.stats_keys import STATS_TUBE_KEYS


@dataclass(frozen=True)
class Proc:
    """One process of the server."""

    role: str  #: "supervisor", "coordinator", "serving 1", "shard 3", "metrics"
    pid: int
    state: str  #: /proc's one letter
    cpu_seconds: float
    rss_bytes: int


@dataclass
class Gathered:
    """One view of the server. `stats` is None when the coordinator did not answer in time;
    `answered` names the shards that did."""

    stats: dict[str, Any] | None
    tubes: dict[str, dict[str, Any]]  #: tube -> stats-tube fields (name left out)
    timing: dict[int, dict[str, Any]]  #: shard -> its histograms (engine/timing.py)
    answered: set[int]
    shards: int
    processes: list[Proc]
    expected: tuple[str, ...]  #: the role labels that must run
    at: float = field(default_factory=time.time)
    #: tube -> the shards whose answer listed it: the one its family routes to (a list, so
    #: a tube two shards answered for, as while a shard restarts, shows both)
    homes: dict[str, list[int]] = field(default_factory=dict)
    serving: int = 1  #: serving processes: serving process i hosts shard i (colocation)

    def host_of(self, shard: int) -> str:
        """The role of the process that runs `shard`: its own process (`shard 3`) if one
        runs, else the serving process that hosts it (`serving 1`; `serving` alone)."""
        own = f"shard {shard}"
        if shard >= self.serving or any(p.role == own for p in self.processes):
            return own
        return "serving" if self.serving == 1 else f"serving {shard}"

    def problems(self) -> list[str]:
        """Why the server is not healthy; [] when every process runs and answered."""
        found: list[str] = []
        running = {p.role: p for p in self.processes}
        for role in self.expected:
            proc = running.get(role)
            if proc is None:
                found.append(f"{role}: not running")
            elif proc.state in NOT_RUNNING:
                found.append(f"{role} (pid {proc.pid}): {NOT_RUNNING[proc.state]}")
        if self.stats is None:
            found.append("coordinator: stats not answered in time")
        for shard in range(self.shards):
            if shard not in self.answered:
                found.append(f"shard {shard}: not answered in time")
        return found


def parse_stats(body: bytes) -> dict[str, Any]:
    """A `stats` reply's YAML body (``---`` then ``key: value`` lines) as a dict: ints as
    ints, floats (rusage) as floats, strings (quoted or not) as strings."""
    values: dict[str, Any] = {}
    for line in body.decode(errors="replace").splitlines():
        key, sep, raw = line.partition(": ")
        if not sep:
            continue
        values[key] = scalar(raw.strip())
    return values


def scalar(raw: str) -> Any:
    if len(raw) >= 2 and raw[0] == raw[-1] == '"':
        return raw[1:-1]
    try:
        return int(raw)
    except ValueError:
        pass
    try:
        return float(raw)
    except ValueError:
        return raw


def tube_fields(rows: Sequence[Sequence[Any]]) -> dict[str, dict[str, Any]]:
    """A shard's METRICS tube table (STATS_TUBE_KEYS order) as tube -> fields."""
    names = STATS_TUBE_KEYS[1:]
    return {str(row[0]): dict(zip(names, row[1:], strict=True)) for row in rows}


def job_histograms(timing: dict[int, dict[str, Any]], kind: str) -> dict[str, list[Any]]:
    """tube -> [counts, sum ns] of the `kind` ("wait" or "run") histograms of every shard (a
    tube lives on one shard; OTHER_TUBE may come from several and is added up)."""
    merged: dict[str, list[Any]] = {}
    for snapshot in timing.values():
        for tube, (counts, total) in snapshot.get(kind, {}).items():
            if tube in merged:
                old = merged[tube]
                merged[tube] = [
                    [a + b for a, b in zip(old[0], counts, strict=True)],
                    old[1] + total,
                ]
            else:
                merged[tube] = [list(counts), total]
    return merged
