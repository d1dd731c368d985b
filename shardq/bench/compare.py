"""`shardq bench compare`: the same matrix against two server commands, A, B, A, B, ...

Each round starts a fresh server (on a free port), runs every cell, and stops it, so both
servers see the same sequence; medians over rounds damp the noise of a shared machine.
Each cell has its own tube prefix, so what one cell leaves behind cannot feed the next.
Which cell runs is logged at INFO (`shardq bench` shows INFO by default).
"""

from __future__ import annotations

import logging
import os
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from shardq.bench.runner import prefill, run
from shardq.bench.servers import CLK_TCK, Server, cpu_delta, cpu_ticks, memory, role
from shardq.bench.workloads import Spec

log = logging.getLogger(__name__)


@dataclass
class Cell:
    """One row of the matrix. kind: 'ops' (ops/s), 'cycles' (pingpong), 'memory' (RSS)."""

    key: str
    label: str
    kind: str = "ops"
    spec: dict[str, Any] = field(default_factory=dict)
    jobs: int = 0  # memory cells: ready jobs to hold


def matrix(name: str, duration: float | None = None) -> list[Cell]:
    """The issue's standard matrix, a tiny one for tests, or only its memory row."""
    quick = name == "quick"
    d = duration or (0.5 if quick else 5.0)
    fill = 20_000 if quick else 150_000

    def c(key: str, label: str, workload: str, conns: int, **kw: Any) -> Cell:
        kind = "cycles" if workload == "pingpong" else "ops"
        spec = {"workload": workload, "connections": conns, "duration": d, **kw}
        return Cell(key, label, kind, spec)

    cells = [
        c("put-1", "put, 1 conn", "put", 1, processes=1),
        c("put-50x16", "put, 50 conns x16 pipelined", "put", 50, pipeline=16),
        c("reserve-50", "reserve+delete, 50 conns (pre-filled)", "reserve", 50, prefill=fill),
        c("mixed-50", "mixed, 50 conns", "mixed", 50),
        c("mixed-200", "mixed, 200 conns", "mixed", 200),
        c("multitube-64", "multitube, 16 tubes / 64 conns", "multitube", 64, tubes=16),
        c("pingpong-1", "pingpong, 1 client", "pingpong", 1, processes=1),
    ]
    jobs = 20_000 if quick else 1_000_000
    cells.append(Cell("memory", f"memory, {jobs:,} ready jobs of 100 B", "memory", jobs=jobs))
    if quick:
        cells = [x for x in cells if x.key in ("put-50x16", "mixed-50", "pingpong-1", "memory")]
    if name == "memory":
        cells = cells[-1:]
    return cells


SCALING_KEYS = ("mixed-50", "multitube-64")


def busy_ticks() -> int:
    """Non-idle CPU ticks of the whole machine (/proc/stat), to see other processes' load."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return sum(fields) - fields[3] - (fields[4] if len(fields) > 4 else 0)


def measure(server: Server, cell: Cell, prefix: str, processes: int, progress: bool) -> dict:
    """Run one cell against a running server; adds the server's CPU (cores) and memory, the
    load tool's CPU and what everything else on the machine used meanwhile ("other")."""
    pids = server.pids
    before = cpu_ticks(pids)
    busy0 = busy_ticks()
    t0 = time.monotonic()
    out: dict[str, Any] = {}
    if cell.kind == "memory":
        base = memory(pids)
        spec = Spec(port=server.port, processes=processes, prefix=prefix)
        r = prefill(spec, cell.jobs, progress)
        time.sleep(0.5)
        mem = memory(server.pids)
        out = {
            "rss": mem["rss"],
            "pss": mem["pss"],
            "rss_idle": base["rss"],
            "bytes_per_job": (mem["rss"] - base["rss"]) / max(1, cell.jobs),
            "errors": r["errors"],
            "value": mem["rss"],
            "client_cpu_s": r["client_cpu_s"],
        }
    else:
        kw = {"processes": processes, **cell.spec}
        spec = Spec(port=server.port, prefix=prefix, **kw)
        r = run(spec, progress)
        out = {"ops_per_sec": r["ops_per_sec"], "errors": r["errors"]}
        out["client_cpu_s"] = r["client_cpu_s"]
        if cell.kind == "cycles":
            out["value"] = r["cycles"]["per_sec"] if "cycles" in r else 0.0
            out["p99_us"] = r["cycles"]["latency_us"]["p99"] if "cycles" in r else 0.0
        else:
            out["value"] = r["ops_per_sec"]
        out["samples"] = r["error_samples"]
    wall = time.monotonic() - t0
    per_pid = cpu_delta(before, cpu_ticks(server.pids))
    by_role: dict[str, float] = defaultdict(float)
    for pid, sec in per_pid.items():
        by_role[role(pid)] += sec / wall
    out["cpu_cores"] = sum(per_pid.values()) / wall
    out["client_cores"] = out.get("client_cpu_s", 0.0) / wall
    machine_cores = (busy_ticks() - busy0) / CLK_TCK / wall
    out["other_cores"] = max(0.0, machine_cores - out["cpu_cores"] - out["client_cores"])
    out["cpu_by_role"] = dict(by_role)
    return out


def _loadavg() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else 0.0


def summarise(cells: list[Cell], runs: dict[str, dict[str, list[dict]]]) -> list[dict]:
    """Per cell: medians for A and B and the ratio B/A (memory: B/A of RSS, lower is better)."""
    rows = []
    for cell in cells:
        row: dict[str, Any] = {"key": cell.key, "label": cell.label, "kind": cell.kind}
        for side in ("a", "b"):
            rs = runs[side].get(cell.key, [])
            row[side] = {
                "value": _median([r["value"] for r in rs]),
                "cpu_cores": _median([r["cpu_cores"] for r in rs]),
                "client_cores": _median([r.get("client_cores", 0.0) for r in rs]),
                "other_cores": _median([r.get("other_cores", 0.0) for r in rs]),
                "errors": sum(r["errors"] for r in rs),
                "rounds": [r["value"] for r in rs],
            }
            if cell.kind == "cycles":
                row[side]["p99_us"] = _median([r["p99_us"] for r in rs])
            if cell.kind == "memory" and rs:
                row[side].update({k: rs[0][k] for k in ("pss", "rss_idle", "bytes_per_job")})
            if rs and "cpu_by_role" in rs[0]:
                roles = {k for r in rs for k in r["cpu_by_role"]}
                row[side]["cpu_by_role"] = {
                    k: _median([r["cpu_by_role"].get(k, 0.0) for r in rs]) for k in sorted(roles)
                }
        a, b = row["a"]["value"], row["b"]["value"]
        row["ratio"] = b / a if a else 0.0
        if cell.kind == "cycles" and row["a"]["p99_us"]:
            row["p99_ratio"] = row["b"]["p99_us"] / row["a"]["p99_us"]
        rows.append(row)
    return rows


def compare(
    a: str,
    b: str,
    rounds: int = 3,
    matrix_name: str = "standard",
    duration: float | None = None,
    processes: int | None = None,
    scaling: list[int] | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Run the matrix over `rounds` (A then B each round); returns rows plus raw runs."""
    cells = matrix(matrix_name, duration)
    procs = processes or os.cpu_count() or 1
    runs: dict[str, dict[str, list[dict]]] = {"a": defaultdict(list), "b": defaultdict(list)}
    started = time.monotonic()
    load_before = _loadavg()
    for rnd in range(rounds):
        for side, template in (("a", a), ("b", b)):
            with Server(template) as server:
                for i, cell in enumerate(cells):
                    if cell.kind == "memory":
                        continue
                    log.info("round %d/%d %s %s", rnd + 1, rounds, side.upper(), cell.label)
                    res = measure(server, cell, f"c{i}r{rnd}", procs, progress)
                    runs[side][cell.key].append(res)
            for i, cell in enumerate(cells):
                if cell.kind != "memory" or rnd > 0:
                    continue  # deterministic enough; once per server keeps the run short
                log.info("round %d/%d %s %s", rnd + 1, rounds, side.upper(), cell.label)
                with Server(template) as server:  # a fresh one: nothing left from other cells
                    res = measure(server, cell, f"c{i}r{rnd}", procs, progress)
                runs[side][cell.key].append(res)
    out: dict[str, Any] = {
        "a": a,
        "b": b,
        "rounds": rounds,
        "matrix": matrix_name,
        "processes": procs,
        "rows": summarise(cells, runs),
        "loadavg": {"before": load_before, "after": _loadavg()},
    }
    if scaling:
        out["scaling"] = scale(b, cells, scaling, procs, progress)
    out["seconds"] = time.monotonic() - started
    return out


def scale(
    template: str, cells: list[Cell], shards: list[int], procs: int, progress: bool
) -> list[dict[str, Any]]:
    """B with --shards N for each N, on the mixed and multitube rows (one round each)."""
    rows = []
    for n in shards:
        with Server(f"{template} --shards {n}") as server:
            for i, cell in enumerate(c for c in cells if c.key in SCALING_KEYS):
                log.info("scaling --shards %d %s", n, cell.label)
                res = measure(server, cell, f"s{n}c{i}", procs, progress)
                rows.append({"shards": n, "key": cell.key, "label": cell.label, **res})
    return rows


def _fmt_value(kind: str, v: float) -> str:
    return f"{v / 2**20:,.0f} MiB" if kind == "memory" else f"{v:,.0f}"


def format_table(result: dict[str, Any]) -> str:
    """Plain-text table for the terminal."""
    lines = [
        f"A: {result['a']}",
        f"B: {result['b']}",
        f"{'row':<40}{'A':>12}{'B':>12}{'B/A':>7}{'A cpu':>7}{'B cpu':>7}  errors",
    ]
    for r in result["rows"]:
        a, b = r["a"], r["b"]
        lines.append(
            f"{r['label']:<40}{_fmt_value(r['kind'], a['value']):>12}"
            f"{_fmt_value(r['kind'], b['value']):>12}{r['ratio']:>7.2f}"
            f"{a['cpu_cores']:>7.2f}{b['cpu_cores']:>7.2f}  {a['errors']}/{b['errors']}"
        )
        if "p99_ratio" in r:
            lines.append(
                f"{'  pingpong p99 latency (us)':<40}{a['p99_us']:>12.0f}{b['p99_us']:>12.0f}"
                f"{r['p99_ratio']:>7.2f}"
            )
    for s in result.get("scaling", []):
        lines.append(
            f"B --shards {s['shards']}: {s['label']:<32}{s['value']:>12,.0f} ops/s  "
            f"cpu {s['cpu_cores']:.2f}  errors {s['errors']}"
        )
    return "\n".join(lines)
