"""`shardq bench compare`: the same matrix against two server commands, A and B, and the stub.

Row by row, each round runs the row against A, then B, then L (`shardq.bench.stub`, a
server that answers at once and stores nothing: the load tool's own ceiling), each on a
fresh server on a free port, as the C load generator's compare.sh does; medians over rounds
damp the noise of a shared machine. Server CPU is taken over the measured seconds only.
Rows where the load tool rather than the server was the limit are flagged
(`shardq.bench.limits`). Which cell runs is logged at INFO (`shardq bench` shows INFO).
"""

from __future__ import annotations

import logging
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from shardq.bench.busy import Busy
from shardq.bench.limits import (
    LEGEND,
    NEAR_L,
    NOISY,
    RT_SHARE,
    TOOL_BUSY,
    cores,
    flag_row,
    flag_scaling,
    flag_text,
    kops_per_cpu_s,
)
from shardq.bench.runner import prefill, run
from shardq.bench.servers import CpuWindow, Server, memory, role
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
    busy: int = 0  # loaded rows: cores kept busy by other processes meanwhile (bench/busy.py)


def matrix(name: str, duration: float | None = None) -> list[Cell]:
    """The standard matrix, a tiny one for tests, only its memory row or only its loaded
    rows (one client while another process keeps one core busy)."""
    quick = name == "quick"
    d = duration or (0.5 if quick else 5.0)
    fill = 20_000 if quick else 250_000

    def c(key: str, label: str, workload: str, conns: int, **kw: Any) -> Cell:
        kind = "cycles" if workload == "pingpong" else "ops"
        spec = {"workload": workload, "connections": conns, "duration": d, **kw}
        return Cell(key, label, kind, spec)

    cells = [
        c("put-1", "put, 1 conn", "put", 1, processes=1),
        c("put-50x16", "put, 50 conns x16 pipelined", "put", 50, pipeline=16),
        c("reserve-50", "reserve+delete, 50 conns (pre-filled)", "reserve", 50, prefill=fill),
        c("mixed-50", "mixed, 50 conns", "mixed", 50, backlog=BACKLOG),
        c("mixed-200", "mixed, 200 conns", "mixed", 200, backlog=BACKLOG),
        c(
            "multitube-64",
            "multitube, 16 tubes / 64 conns",
            "multitube",
            64,
            tubes=16,
            backlog=BACKLOG,
        ),
        c("pingpong-1", "pingpong, 1 client", "pingpong", 1, processes=1),
    ]
    loaded = [
        Cell(f"{x.key}-busy", f"{x.label}, one core busy", x.kind, x.spec, busy=1)
        for x in cells
        if x.key in LOADED_KEYS
    ]
    jobs = 20_000 if quick else 1_000_000
    memory = Cell("memory", f"memory, {jobs:,} ready jobs of 100 B", "memory", jobs=jobs)
    if quick:
        return [x for x in cells if x.key in ("put-50x16", "mixed-50", "pingpong-1")] + [memory]
    if name == "memory":
        return [memory]
    if name == "loaded":
        return loaded
    return cells + loaded + [memory]


#: The rows run again on a loaded machine: one request in flight is where a busy neighbour
#: shows (every command waits for the server to be scheduled).
LOADED_KEYS = ("put-1", "pingpong-1")


#: Mixed rows: producers pause above this many jobs put and not yet deleted.
BACKLOG = 1000

SCALING_KEYS = ("mixed-50", "multitube-64")


def measure(
    server: Server, cell: Cell, prefix: str, processes: int, progress: bool, engine: str = "c"
) -> dict:
    """Run one cell against a running server: its figure, the server's CPU (cores) over the
    measured seconds, the load tool's CPU and what everything else used meanwhile ("other")."""
    if cell.kind == "memory":
        return _measure_memory(server, cell, prefix, processes, progress, engine)
    spec = Spec(
        port=server.port, prefix=prefix, engine=engine, **{"processes": processes, **cell.spec}
    )
    r = run(spec, progress, watch=server.pids)
    win = r["window"]
    wall = win["wall_s"] or 1e-9
    out: dict[str, Any] = {
        "ops_per_sec": r["ops_per_sec"],
        "errors": r["errors"],
        "samples": r["error_samples"],
        "client_cpu_s": r["client_cpu_s"],
        "load_processes": spec.processes,
        "in_flight": spec.connections * spec.pipeline,
        "value": r["ops_per_sec"],
    }
    if cell.kind == "cycles":
        out["value"] = r["cycles"]["per_sec"] if "cycles" in r else 0.0
        out["p99_us"] = r["cycles"]["latency_us"]["p99"] if "cycles" in r else 0.0
    out["cpu_cores"] = win["cpu_s"] / wall
    out["client_cores"] = r["client_cpu_s"] / (r["elapsed_s"] or 1e-9)
    machine_cores = win["machine_s"] / wall
    out["other_cores"] = max(0.0, machine_cores - out["cpu_cores"] - out["client_cores"])
    out["kops_per_cpu_s"] = kops_per_cpu_s(r["ops_per_sec"], out["cpu_cores"])
    out["cpu_by_role"] = _by_role(win["per_pid"], wall)
    return out


def _by_role(per_pid: dict[int, float], wall: float) -> dict[str, float]:
    by_role: dict[str, float] = defaultdict(float)
    for pid, sec in per_pid.items():
        by_role[role(pid)] += sec / wall
    return dict(by_role)


def _measure_memory(
    server: Server, cell: Cell, prefix: str, processes: int, progress: bool, engine: str
) -> dict[str, Any]:
    """RSS of a fresh server holding `cell.jobs` jobs; CPU over the whole fill."""
    window = CpuWindow(server.pids)
    window.start()
    base = memory(server.pids)
    spec = Spec(port=server.port, processes=processes, prefix=prefix, engine=engine)
    r = prefill(spec, cell.jobs, progress)
    time.sleep(0.5)
    mem = memory(server.pids)
    win = window.stop()
    wall = win["wall_s"] or 1e-9
    cpu = win["cpu_s"] / wall
    client = r["client_cpu_s"] / wall
    return {
        "rss": mem["rss"],
        "pss": mem["pss"],
        "rss_idle": base["rss"],
        "bytes_per_job": (mem["rss"] - base["rss"]) / max(1, cell.jobs),
        "errors": r["errors"],
        "value": mem["rss"],
        "client_cpu_s": r["client_cpu_s"],
        "cpu_cores": cpu,
        "client_cores": client,
        "other_cores": max(0.0, win["machine_s"] / wall - cpu - client),
        "cpu_by_role": _by_role(win["per_pid"], wall),
    }


def time_left(elapsed: float, done: int, total: int) -> str:
    """ ", about N s/min left" from the runs done so far (nothing before the first one)."""
    if done == 0 or done >= total:
        return ""
    left = elapsed / done * (total - done)
    return f", about {left / 60:.0f} min left" if left >= 120 else f", about {left:.0f} s left"


def _loadavg() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else 0.0


#: Per-run figures summarised as medians over the rounds.
MEDIANS = ("value", "cpu_cores", "client_cores", "other_cores", "kops_per_cpu_s")


def _side(cell: Cell, rs: list[dict]) -> dict[str, Any]:
    out: dict[str, Any] = {k: _median([r.get(k, 0.0) for r in rs]) for k in MEDIANS}
    out["cpu_pct"] = 100.0 * out["cpu_cores"]
    out["load_processes"] = rs[0].get("load_processes", 1) if rs else 0
    out["in_flight"] = rs[0].get("in_flight", 0) if rs else 0
    out["errors"] = sum(r["errors"] for r in rs)
    out["error_samples"] = [s for r in rs for s in r.get("samples", [])][:5]
    out["rounds"] = [r["value"] for r in rs]
    if cell.kind == "memory":
        del out["kops_per_cpu_s"]
        if rs:
            out.update({k: rs[0][k] for k in ("pss", "rss_idle", "bytes_per_job")})
    if cell.kind == "cycles":
        out["p99_us"] = _median([r["p99_us"] for r in rs])
    if rs and "cpu_by_role" in rs[0]:
        roles = {k for r in rs for k in r["cpu_by_role"]}
        out["cpu_by_role"] = {
            k: _median([r["cpu_by_role"].get(k, 0.0) for r in rs]) for k in sorted(roles)
        }
    return out


def summarise(
    cells: list[Cell], runs: dict[str, dict[str, list[dict]]], nproc: int | None = None
) -> list[dict]:
    """Per cell: medians for A, B (and L where it ran), the ratio B/A (memory: B/A of RSS,
    lower is better) and the tool-limit flag (`shardq.bench.limits`)."""
    rows = []
    for cell in cells:
        row: dict[str, Any] = {
            "key": cell.key,
            "label": cell.label,
            "kind": cell.kind,
            "busy": cell.busy,
        }
        for side in ("a", "b", "l"):
            rs = runs.get(side, {}).get(cell.key, [])
            if rs or side != "l":
                row[side] = _side(cell, rs)
        a, b = row["a"]["value"], row["b"]["value"]
        row["ratio"] = b / a if a else 0.0
        if cell.kind == "cycles" and row["a"]["p99_us"]:
            row["p99_ratio"] = row["b"]["p99_us"] / row["a"]["p99_us"]
        flag_row(row, nproc or cores())
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
    l: str | None = None,  # noqa: E741 -- the L column, as in the output
    engine: str = "c",
) -> dict[str, Any]:
    """Run the matrix row by row: each round of a row runs A, B and then L (the stub, when
    `l` is given), each on a fresh server; returns rows plus raw runs. One compiled load
    core (`engine` "c") or one Python load process per core ("python") unless `processes`."""
    cells = matrix(matrix_name, duration)
    procs = processes or (1 if engine == "c" else cores())
    sides = [("a", a), ("b", b)] + ([("l", l)] if l else [])
    runs: dict[str, dict[str, list[dict]]] = {s: defaultdict(list) for s, _ in sides}
    started = time.monotonic()
    load_before = _loadavg()
    plan = [
        (i, cell, rnd, side, template)
        for i, cell in enumerate(cells)
        for rnd in range(rounds)
        for side, template in sides
        # the stub holds nothing; memory is deterministic enough for one round
        if not (cell.kind == "memory" and (side == "l" or rnd > 0))
    ]
    for n, (i, cell, rnd, side, template) in enumerate(plan):
        log.info(
            "%s round %d/%d %s (run %d of %d%s)",
            cell.label,
            rnd + 1,
            rounds,
            side.upper(),
            n + 1,
            len(plan),
            time_left(time.monotonic() - started, n, len(plan)),
        )
        # A fresh server per run: nothing left from other cells.
        with Busy(cell.busy), Server(template, label=f"server {side.upper()}") as server:
            res = measure(server, cell, f"c{i}r{rnd}", procs, progress, engine)
        runs[side][cell.key].append(res)
    out: dict[str, Any] = {
        "a": a,
        "b": b,
        "l": l,
        "rounds": rounds,
        "matrix": matrix_name,
        "processes": procs,
        "engine": engine,
        "cores": cores(),
        "tool_limit_rule": {
            "near_l": NEAR_L,
            "tool_busy": TOOL_BUSY,
            "rt_share": RT_SHARE,
            "noisy_cores": NOISY,
        },
        "legend": LEGEND,
        "rows": summarise(cells, runs),
        "loadavg": {"before": load_before, "after": _loadavg()},
    }
    if scaling:
        out["scaling"] = scale(b, cells, scaling, procs, progress, engine)
        flag_scaling(out["scaling"], out["rows"], cores())
    out["seconds"] = time.monotonic() - started
    out["generated"] = time.strftime("%Y-%m-%d %H:%M %Z")
    log.info("%s matrix done in %.1f min", matrix_name, out["seconds"] / 60)
    return out


def scale(
    template: str, cells: list[Cell], shards: list[int], procs: int, progress: bool, engine: str
) -> list[dict[str, Any]]:
    """B with N serving processes (--shards N --serving N: each hosts one shard) for each
    N, on the scaling rows (one round each)."""
    rows = []
    for n in shards:
        flags = f"--shards {n} --serving {n}"
        with Server(f"{template} {flags}", label=f"server B {flags}") as server:
            for i, cell in enumerate(c for c in cells if c.key in SCALING_KEYS):
                log.info("scaling %s %s", flags, cell.label)
                res = measure(server, cell, f"s{n}c{i}", procs, progress, engine)
                rows.append({"shards": n, "key": cell.key, "label": cell.label, **res})
    return rows


#: The unit of a row's A, B and L figures, by the row's kind.
UNITS = {"ops": "ops/s", "cycles": "cycles/s", "memory": "MiB RSS"}


def _fmt_value(kind: str, v: float) -> str:
    return f"{v / 2**20:,.0f}" if kind == "memory" else f"{v:,.0f}"


def _pair(row: dict[str, Any], key: str, fmt: str, sides: tuple[str, ...] = ("a", "b")) -> str:
    return "/".join(format(row[s][key], fmt) if s in row and key in row[s] else "-" for s in sides)


def format_table(result: dict[str, Any]) -> str:
    """Plain-text table for the terminal, with the legend of the tool-limit flag."""
    lines = [f"A: {result['a']}", f"B: {result['b']}"]
    if result.get("l"):
        lines.append(f"L: {result['l']}  (stub: the load tool's ceiling)")
    lines.append(
        f"{'row':<38}{'unit':<9}{'A':>10}{'B':>10}{'L':>10}{'B/A':>6}{'srv CPU% A/B':>14}"
        f"{'kops/cpu-s A/B':>16}{'tool CPU% A/B/L':>17}  {'tool limit':<12} errors A/B"
    )
    for r in result["rows"]:
        a, b, kind = r["a"], r["b"], r["kind"]
        lv = _fmt_value(kind, r["l"]["value"]) if "l" in r else "-"
        ops = kind != "memory"
        tool = [f"{100 * r[s]['client_cores']:.0f}" if s in r else "-" for s in ("a", "b", "l")]
        lines.append(
            f"{r['label'][:37]:<38}{UNITS[kind]:<9}{_fmt_value(kind, a['value']):>10}"
            f"{_fmt_value(kind, b['value']):>10}{lv:>10}{r['ratio']:>6.2f}"
            f"{_pair(r, 'cpu_pct', '.0f'):>14}"
            f"{_pair(r, 'kops_per_cpu_s', '.1f') if ops else '-':>16}"
            f"{'/'.join(tool) if ops else '-':>17}  {flag_text(r):<12} {a['errors']}/{b['errors']}"
        )
        if "p99_ratio" in r:
            lines.append(
                f"{'  pingpong p99 cycle latency':<38}{'µs':<9}"
                f"{a['p99_us']:>10.0f}{b['p99_us']:>10.0f}"
                f"{r['l']['p99_us'] if 'l' in r else 0:>10.0f}{r['p99_ratio']:>6.2f}"
            )
    for s in result.get("scaling", []):
        flag = ",".join(s.get("tool_limit", []))
        lines.append(
            f"B --shards {s['shards']}: {s['label']:<32}{s['value']:>12,.0f} ops/s  "
            f"cpu {100 * s['cpu_cores']:.0f}%  tool {100 * s['client_cores']:.0f}%  "
            f"errors {s['errors']}" + (f"  tool limit: {flag}" if flag else "")
        )
    lines.append(result.get("legend", LEGEND))
    return "\n".join(lines)
