"""The dashboard's JSON (``/api/summary``): a `Gathered` view as plain values. The page keeps
the history (the last minutes of samples) and computes rates from successive totals."""

from __future__ import annotations

from typing import Any

from shardq.engine.timing import JOB_BOUNDS_S
from shardq.metrics.exposition import role_order
from shardq.metrics.gathered import Gathered, job_histograms

#: server fields the page shows (from `stats`)
SERVER_KEYS = ("version", "pid", "uptime", "hostname", "id", "current-tubes")
#: server-wide totals the page shows and charts (from `stats`)
TOTAL_KEYS = (
    "current-jobs-urgent",
    "current-jobs-ready",
    "current-jobs-reserved",
    "current-jobs-delayed",
    "current-jobs-buried",
    "current-connections",
    "current-producers",
    "current-workers",
    "current-waiting",
    "total-connections",
    "total-jobs",
    "job-timeouts",
    "cmd-put",
    "cmd-reserve",
    "cmd-reserve-with-timeout",
    "cmd-delete",
    "cmd-release",
    "cmd-bury",
    "cmd-kick",
    "limit-connections-refused",
    "limit-connections-denied",
    "limit-output-closed",
    "limit-puts-refused",
)


def quantile(q: float, bounds_s: tuple[float, ...], counts: list[int]) -> float | None:
    """The q-quantile (0 < q < 1) of a fixed-bucket histogram, interpolated linearly within
    its bucket as Prometheus's histogram_quantile does; None without observations. A value
    in the last (unbounded) bucket is reported as the highest bound."""
    total = sum(counts)
    if total == 0:
        return None
    rank = q * total
    seen = 0
    for i, count in enumerate(counts):
        if seen + count >= rank and count:
            if i == len(bounds_s):
                return bounds_s[-1]
            low = bounds_s[i - 1] if i else 0.0
            return low + (bounds_s[i] - low) * (rank - seen) / count
        seen += count
    return bounds_s[-1]


def tube_rows(g: Gathered) -> list[dict[str, Any]]:
    waits = job_histograms(g.timing, "wait")
    runs = job_histograms(g.timing, "run")
    rows = []
    for name in sorted(g.tubes):
        shards = g.homes.get(name, [])
        row: dict[str, Any] = {"name": name, **g.tubes[name], "shards": shards}
        row["hosts"] = [g.host_of(shard) for shard in shards]
        for kind, table in (("wait", waits), ("run", runs)):
            counts = table.get(name, [[0], 0])[0]
            row[f"{kind}-count"] = sum(counts)
            row[f"{kind}-p50"] = quantile(0.5, JOB_BOUNDS_S, counts)
            row[f"{kind}-p95"] = quantile(0.95, JOB_BOUNDS_S, counts)
        rows.append(row)
    return rows


def summary(g: Gathered, shards: int, serving: int) -> dict[str, Any]:
    stats = g.stats or {}
    problems = g.problems()
    return {
        "time": g.at,
        "healthy": not problems,
        "problems": problems,
        "server": {
            **{key: stats.get(key) for key in SERVER_KEYS},
            "shards": shards,
            "serving": serving,
        },
        "totals": {key: stats.get(key) for key in TOTAL_KEYS} if g.stats is not None else None,
        "tubes": tube_rows(g),
        "processes": [
            {
                "role": p.role,
                "pid": p.pid,
                "state": p.state,
                "cpu": p.cpu_seconds,
                "rss": p.rss_bytes,
            }
            for p in sorted(g.processes, key=role_order)
        ],
    }
