"""Run one workload over --processes load processes and merge what they measured.

Load processes are forked (one per core is the point of --processes): each connects its
share of the connections and runs the setup commands, then all wait on one Event so the
clock starts for everyone at once. Results come back as dicts over a Queue.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import queue
import sys
import time
from typing import Any

from shardq.bench.hist import Histogram
from shardq.bench.loadgen import OPS, SLOTS, LoadLoop, connect
from shardq.bench.servers import CpuWindow
from shardq.bench.workloads import Spec, counted, plan

#: Seconds a --jobs run may take at most (every load is bounded in time).
JOBS_TIME_LIMIT = 600.0


def _share(total: int | None, parts: int, k: int) -> int | None:
    if total is None:
        return None
    return total // parts + (1 if k < total % parts else 0)


def _worker(spec: Spec, k: int, shared: Any, ready: Any, go: Any, deadline: Any, out: Any) -> None:
    try:
        mine = [p for p in plan(spec) if p.index % spec.processes == k]
        conns = [connect(spec, p) for p in mine]
        quota = _share(spec.jobs, spec.processes, k)
        if spec.workload == "reserve" and spec.jobs is None:
            quota = None
        loop = LoadLoop(spec, conns, k, shared, quota)
        ready.put(None)
        go.wait()
        out.put(("ok", loop.run(deadline.value).to_dict()))
    except Exception as e:  # reported by the parent, which must not hang waiting
        ready.put(None)
        out.put(("error", f"{type(e).__name__}: {e}"))


class Progress:
    """One self-rewriting stderr line with the time left; silent when disabled (not a
    terminal, or --json), and drawn only once a run has lasted `AFTER_S` (short runs stay
    quiet)."""

    AFTER_S = 1.0

    def __init__(self, enabled: bool, label: str) -> None:
        self.enabled = enabled
        self.label = label
        self.width = 0  # of the last line drawn, to blank it at the end

    def show(self, fraction: float, ops: int | None, rate: float | None, elapsed: float) -> None:
        """Redraw the line; `ops` None: counts unknown until the end (the compiled core)."""
        if not self.enabled or elapsed < self.AFTER_S:
            return
        fraction = min(1.0, max(0.0, fraction))
        width = 30
        filled = int(width * fraction)
        bar = "#" * filled + "." * (width - filled)
        counts = "" if ops is None else f" {ops:>10,} ops {rate or 0.0:>10,.0f} ops/s"
        line = f"{self.label} [{bar}]{counts}  {time_left(elapsed, fraction)}"
        pad = " " * max(0, self.width - len(line))
        self.width = len(line)
        sys.stderr.write(f"\r{line}{pad}")
        sys.stderr.flush()

    def end(self) -> None:
        if self.enabled and self.width:
            sys.stderr.write("\r" + " " * self.width + "\r")
            sys.stderr.flush()


def time_left(elapsed: float, fraction: float) -> str:
    """'12 s left' / '3 min left' from the share done so far; '' until there is a share."""
    if fraction <= 0:
        return "  ? s left"
    left = max(0.0, elapsed * (1 - fraction) / fraction)
    if left >= 120:
        return f"{left / 60:>3.0f} min left"
    return f"{left:>5.0f} s left"


def run_load(
    spec: Spec, progress: bool = False, label: str | None = None, watch: list[int] | None = None
) -> dict[str, Any]:
    """Run `spec` once (no pre-fill) and return the merged result (see `merge`). With `watch`
    (the server's pids) the result's "window" holds their CPU over the measured seconds.
    `spec.engine` picks the load processes: "c" the compiled core (`shardq.bench.core`),
    "python" the forked Python load loops."""
    if spec.engine == "c":
        return _run_cores(spec, progress, label, watch)
    return _run_forked(spec, progress, label, watch)


def _limit(spec: Spec) -> float:
    return spec.duration if spec.jobs is None and spec.duration else JOBS_TIME_LIMIT


def _run_cores(
    spec: Spec, progress: bool, label: str | None, watch: list[int] | None
) -> dict[str, Any]:
    """The load in `spec.processes` compiled cores, each with its share of the connections,
    of --jobs and of the mixed loads' backlog bound (the cores share no counters)."""
    from shardq.bench.core import CoreError, CoreProcess

    plans = plan(spec)
    limit = _limit(spec)
    n = spec.processes
    quota = None if spec.workload == "reserve" and spec.jobs is None else spec.jobs
    cores = []
    try:
        for k in range(n):
            mine = [p for p in plans if p.index % n == k]
            share = _share(quota, n, k)
            cores.append(CoreProcess(spec, mine, share, limit, max(1, spec.backlog // n)))
        for c in cores:
            c.ready()
        window = CpuWindow(watch) if watch else None
        if window is not None:
            window.start()
        for c in cores:
            c.go()
        bar = Progress(progress, label or spec.workload)
        start = time.monotonic()
        parts = []
        for c in cores:
            # Wait for its output, not its exit: a large result fills the pipe first.
            while bar.enabled and spec.jobs is None and not c.answered(0.2):
                elapsed = time.monotonic() - start
                bar.show(elapsed / limit, None, None, elapsed)
            parts.append(c.result())
        stats = window.stop() if window is not None else None
        bar.end()
    except CoreError as e:
        raise RuntimeError(f"load core failed: {e}") from None
    finally:
        for c in cores:
            c.kill()
    result = merge(spec, parts)
    if stats is not None:
        result["window"] = stats
    return result


def _run_forked(
    spec: Spec, progress: bool, label: str | None, watch: list[int] | None
) -> dict[str, Any]:
    """The load in `spec.processes` forked Python load loops (`shardq.bench.loadgen`)."""
    ctx = mp.get_context("fork")
    shared = ctx.RawArray("q", SLOTS * spec.processes)
    ready, out = ctx.Queue(), ctx.Queue()
    go = ctx.Event()
    deadline = ctx.RawValue("d", 0.0)
    procs = [
        ctx.Process(target=_worker, args=(spec, k, shared, ready, go, deadline, out), daemon=True)
        for k in range(spec.processes)
    ]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=60)
    limit = _limit(spec)
    start = time.monotonic()
    deadline.value = start + limit
    window = CpuWindow(watch) if watch else None
    if window is not None:
        window.start()
    go.set()
    bar = Progress(progress, label or spec.workload)
    results: list[tuple[str, Any]] = []
    while len(results) < len(procs):
        with contextlib.suppress(queue.Empty):  # empty: time to redraw the bar
            results.append(out.get(timeout=0.2))
        ops = sum(shared[i] for i in range(2, len(shared), SLOTS))
        elapsed = time.monotonic() - start
        if spec.jobs:
            done = sum(shared[i] for i in range(0, len(shared), SLOTS))
            if spec.workload == "reserve":
                done = sum(shared[i] for i in range(1, len(shared), SLOTS))
            fraction = done / spec.jobs
        else:
            fraction = elapsed / limit
        bar.show(fraction, ops, ops / elapsed if elapsed > 0 else 0.0, elapsed)
        if elapsed > limit + 60 and len(results) < len(procs):
            break
    stats = window.stop() if window is not None else None
    bar.end()
    for p in procs:
        p.join(timeout=5)
        if p.is_alive():
            p.kill()
    failures = [r for kind, r in results if kind == "error"]
    if failures or len(results) < len(procs):
        raise RuntimeError("load process failed: " + "; ".join(failures or ["no result"]))
    result = merge(spec, [r for _, r in results])
    if stats is not None:
        result["window"] = stats
    return result


def merge(spec: Spec, parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Sum counts, merge histograms; throughput over the slowest process's elapsed time."""
    elapsed = max(p["elapsed"] for p in parts) or 1e-9
    ops: dict[str, Any] = {}
    total = 0
    errors = 0
    for op in OPS:
        h = Histogram()
        for p in parts:
            h.merge(Histogram.from_dict(p["hists"][op]))
        n = sum(p["counts"][op] for p in parts)
        e = sum(p["errors"][op] for p in parts)
        total += n
        errors += e
        if n or e:
            ops[op] = {
                "count": n,
                "errors": e,
                "per_sec": n / elapsed,
                "latency_us": h.summary_us(),
            }
    cycle = Histogram()
    for p in parts:
        cycle.merge(Histogram.from_dict(p["cycle"]))
    result: dict[str, Any] = {
        "spec": spec.to_dict(),
        "elapsed_s": elapsed,
        "ops": ops,
        "total_ops": total,
        "ops_per_sec": total / elapsed,
        "errors": errors + sum(p["conn_errors"] for p in parts),
        "error_samples": [s for p in parts for s in p["samples"]][:10],
        "timed_out": sum(p["timed_out"] for p in parts),
        "client_cpu_s": sum(p["cpu"] for p in parts),
    }
    if cycle.total:
        result["cycles"] = {
            "count": cycle.total,
            "per_sec": cycle.total / elapsed,
            "latency_us": cycle.summary_us(),
        }
    return result


def prefill(spec: Spec, jobs: int, progress: bool = False) -> dict[str, Any]:
    """Put `jobs` jobs into the spec's tube as fast as possible (for `reserve` and memory)."""
    fill = Spec(
        workload="put",
        host=spec.host,
        port=spec.port,
        connections=max(8, spec.processes * 4),
        pipeline=64,
        size=spec.size,
        duration=None,
        jobs=jobs,
        processes=spec.processes,
        prefix=spec.prefix,
        ttr=spec.ttr,
        engine=spec.engine,
    )
    return run_load(fill, progress, label="prefill")


def run(spec: Spec, progress: bool = False, watch: list[int] | None = None) -> dict[str, Any]:
    """Run a workload as `shardq bench` does: pre-fill first for `reserve` (outside the CPU
    window of `watch`, see `run_load`)."""
    fill = None
    if spec.workload == "reserve":
        fill = prefill(spec, spec.jobs or spec.prefill, progress)
    result = run_load(spec, progress, watch=watch)
    if fill is not None:
        result["prefill"] = {"jobs": fill["total_ops"], "errors": fill["errors"]}
        result["errors"] += fill["errors"]
    return result


def format_result(r: dict[str, Any]) -> str:
    """Human-readable table: throughput per op, latency percentiles in microseconds."""
    s = r["spec"]
    lines = [
        f"{s['workload']} against {s['host']}:{s['port']}: "
        f"{counted(s['connections'], 'connection')}, pipeline {s['pipeline']}, "
        f"{s['size']}-byte bodies, "
        f"{counted(s['processes'], 'load process', 'load processes')}",
        f"{r['total_ops']:,} ops in {r['elapsed_s']:.2f} s = {r['ops_per_sec']:,.0f} ops/s; "
        f"errors {r['errors']}; client CPU {r['client_cpu_s']:.1f} s",
        f"{'op':<9}{'count (ops)':>12}{'ops/s':>11}{'errors':>7}"
        f"{'p50 µs':>9}{'p90 µs':>9}{'p99 µs':>9}{'p99.9 µs':>10}{'max µs':>10}",
    ]
    rows = list(r["ops"].items())
    if "cycles" in r:
        rows.append(("cycle", {**r["cycles"], "errors": 0}))
    for op, o in rows:
        lat = o["latency_us"]
        lines.append(
            f"{op:<9}{o['count']:>12,}{o['per_sec']:>11,.0f}{o['errors']:>7}"
            + "".join(f"{lat[k]:>9.0f}" for k in ("p50", "p90", "p99"))
            + "".join(f"{lat[k]:>10.0f}" for k in ("p99.9", "max"))
        )
    if r["timed_out"]:
        lines.append(f"reserve TIMED_OUT (queue empty, not an error): {r['timed_out']}")
    for sample in r["error_samples"]:
        lines.append(f"wrong reply: {sample}")
    return "\n".join(lines)
