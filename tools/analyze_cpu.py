"""The CPU time `shardq analyze` takes, with its Spark settings sized to the input
(`shardq/pipeline/tuning.py`) and with Spark's defaults (README, "Analytics"; docs/BENCHMARKS.md,
"Analytics pipeline").

    python tools/gen_events.py /tmp/ev90k --events 90000 --span 1800
    python tools/analyze_cpu.py /tmp/ev90k -n 3
    python tools/analyze_cpu.py /tmp/ev1k -n 3 --only tuned   # 1,000 events: the floor
    python tools/analyze_cpu.py /tmp/ev1k -n 3 --only tuned,no-class-cache

Each round runs `shardq analyze EVENTS --out NEW_DIR` in a child Python, once as it is and
once with `tuning_for` replaced by one that returns no settings (Spark's defaults: 200
shuffle partitions, the web UI, the JVM's default compilers and collector), the two
alternating (tuned, defaults, tuned, …) so a machine that others load changes both alike;
`no-class-cache` (only with --only) runs it tuned but with Spark's classes from its jars
(`--no-class-cache`), for the class-data archive's gain (shardq/pipeline/classdata.py).
pyspark's JVM is not a child the driver waits for: this process makes itself the
subreaper of everything it starts (prctl PR_SET_CHILD_SUBREAPER), so the orphaned JVM is
reaped here and its CPU time counts in this process's children's usage. Prints, per variant
and round, the wall time and the CPU time (user + system) of the whole tree (the driver
Python, the JVM and its start-up scripts), then the medians and the 1-minute load average
before and after.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from shardq.pipeline.tuning import Tuning

PR_SET_CHILD_SUBREAPER = 36
VARIANTS = ("tuned", "defaults")  #: what a round runs by default
KNOWN = (*VARIANTS, "no-class-cache")  #: what --only may name


def become_subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def reap_all() -> None:
    """Wait for every descendant that was left to this process (the JVM among them)."""
    while True:
        try:
            os.wait()
        except ChildProcessError:
            return


def one_run(variant: str, events: list[str], out: str) -> tuple[float, float, int]:
    """(wall s, CPU s of the whole tree, exit status) of one `shardq analyze`."""
    before = children_cpu_s()
    started = time.monotonic()
    argv = [sys.executable, __file__, "--child", variant, *events, "--out", out]
    status = subprocess.call(argv, stdin=subprocess.DEVNULL)
    reap_all()
    return time.monotonic() - started, children_cpu_s() - before, status


def no_tuning(paths: list[str], master: str | None, verbose: int = 0) -> Tuning:
    """`tuning_for` for Spark's defaults: no settings at all."""
    return Tuning()


def child(variant: str, argv: list[str]) -> int:
    """Run `shardq analyze` in this process, with or without the input's settings."""
    from shardq.pipeline import main as pipeline

    if variant == "defaults":
        pipeline.tuning_for = no_tuning
    if variant == "no-class-cache":  # tuned, Spark's classes from its jars
        argv = [*argv, "--no-class-cache"]
    return pipeline.main(argv)


def load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("events", nargs="+", help="event log files or directories")
    ap.add_argument("-n", type=int, default=3, help="rounds (each runs both variants)")
    ap.add_argument("--only", help=f"the variants to run, comma-separated: {KNOWN}")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        sys.exit(child(args.child, [*args.events, "--out", args.out]))
    become_subreaper()
    variants = args.only.split(",") if args.only else list(VARIANTS)
    if unknown := set(variants) - set(KNOWN):
        ap.error(f"--only: unknown variant(s) {', '.join(sorted(unknown))}; known: {KNOWN}")
    runs: dict[str, list[tuple[float, float]]] = {v: [] for v in variants}
    print(f"load before: {load()}")
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.n):
            for variant in variants:
                wall, cpu, status = one_run(variant, args.events, f"{tmp}/{variant}{i}")
                if status != 0:
                    raise SystemExit(f"shardq analyze ({variant}) exited with {status}")
                runs[variant].append((wall, cpu))
                print(f"{variant} round {i + 1}: wall {wall:.1f} s, CPU {cpu:.1f} s, load {load()}")
    for variant, done in runs.items():
        wall = statistics.median(r[0] for r in done)
        cpu = statistics.median(r[1] for r in done)
        print(f"{variant}: median wall {wall:.1f} s, CPU {cpu:.1f} s (n={len(done)})")
    print(f"load after: {load()}")


if __name__ == "__main__":
    main()
