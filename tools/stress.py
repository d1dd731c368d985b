#!/usr/bin/env python3
"""Many rounds of the randomized invariant checker, each on a fresh shardq server.

Each round starts ``python -m shardq serve -l 127.0.0.1 -p 0 --shards N --run-dir DIR``
(N taken in turn from ``--shards``), runs the workload of ``tests/invariants/workload.py``
against it (producers, consumers, a kicker, then a drain; see that module for the
invariants and why the checks are sound), and stops it (SIGTERM, then SIGKILL of its
process group). One line per round (plus its violations if it failed; a failed round's
directory, with the server's stderr.log, is kept); at the end, the seed and a replay command
for every failing round. Exit status 1 if any round failed.

Round i uses seed S + i (S from ``--seed``, else random), so a failing round replays with
``--seed <its seed> --runs 1 --shards <its shards>`` (same random choices; thread timing
still varies).

Examples::

    python tools/stress.py --shards 2,4 --runs 100 --seconds 20
    python tools/stress.py --shards 4 --runs 1 --seed 1234 --seconds 20
    python tools/stress.py --shards 1,2,4 --runs 30 --seconds 10 --jobs 2
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import multiprocessing
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT / "tests") not in sys.path:  # the workload lives with the tests
    sys.path.insert(0, str(REPO_ROOT / "tests"))

from invariants.workload import run  # noqa: E402

from shardq.bench.procs import wait_listening  # noqa: E402

log = logging.getLogger("stress")

#: Seconds to wait for the "listening" line.
START_TIMEOUT = 30.0
#: Seconds a server may take to exit after SIGTERM before it is killed.
STOP_TIMEOUT = 10.0


@dataclass
class RoundResult:
    number: int
    shards: int
    seed: int
    ok: bool
    text: str  #: counters, then violations and server notes, one per line
    kept: str | None  #: the round's directory (kept when it failed)


class ServerError(Exception):
    """The server did not start."""


@contextlib.contextmanager
def shardq_server(shards: int, base: Path) -> Iterator[tuple[int, list[str]]]:
    """Run ``shardq serve`` in a session of its own; yield (port, notes about its exit)."""
    stderr_path = base / "stderr.log"
    tmp_dir = base / "tmp"
    tmp_dir.mkdir()
    cmd = [sys.executable, "-m", "shardq", "serve", "-l", "127.0.0.1", "-p", "0"]
    cmd += ["--shards", str(shards), "--run-dir", str(base / "run")]
    with open(stderr_path, "wb") as err:
        proc = subprocess.Popen(
            cmd,
            cwd=REPO_ROOT,
            env=dict(os.environ, TMPDIR=str(tmp_dir)),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            start_new_session=True,
        )
    notes: list[str] = []
    try:
        port, line = wait_listening(proc, START_TIMEOUT)
        if port is None:
            raise ServerError(
                f"no 'shardq listening on 127.0.0.1:<port>' within {START_TIMEOUT} s "
                f"(exit status {proc.poll()}); stdout {line[:200]!r}; "
                f"stderr: {stderr_path.read_text(errors='replace')[-2000:]}"
            )
        yield port, notes
        if exited(proc.pid):
            notes.append("the server exited by itself during the round")
    finally:
        stop(proc, notes)
        if proc.stdout is not None:
            proc.stdout.close()


def exited(pid: int) -> bool:
    """True once our child ``pid`` has exited. It is left a zombie, not reaped, so its pid
    (also its process group's id) cannot be reused meanwhile."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def stop(proc: subprocess.Popen[bytes], notes: list[str]) -> None:
    """SIGTERM the server (its pid); then SIGKILL its process group (anything it left
    behind), before reaping it."""
    if not exited(proc.pid):
        os.kill(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        while not exited(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.02)  # waiting for the exit
        if not exited(proc.pid):
            notes.append(f"server did not exit within {STOP_TIMEOUT} s of SIGTERM; killed")
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=STOP_TIMEOUT)


def one_round(number: int, shards: int, seed: int, seconds: float, drain: float) -> RoundResult:
    """Start a server, run the workload once, stop the server. Never raises."""
    base = Path(tempfile.mkdtemp(prefix=f"shardq-stress-{number}-"))
    lines: list[str] = []
    ok = False
    try:
        with shardq_server(shards, base) as (port, notes):
            report = run(port, seed, seconds=seconds, drain_seconds=drain)
        ok = report.ok
        lines.append(report.counters_line())
        lines += report.violations
        lines += [f"note: {n}" for n in notes]
        if not ok:
            tail = (base / "stderr.log").read_text(errors="replace").strip().splitlines()[-20:]
            lines += [f"server stderr: {t}" for t in tail]
    except ServerError as exc:
        lines.append(f"server: {exc}")
    except Exception as exc:  # a bug in the harness itself: report it as a failed round
        log.exception("round %d crashed", number)
        lines.append(f"harness error: {exc!r}")
    if ok:
        shutil.rmtree(base, ignore_errors=True)
    return RoundResult(number, shards, seed, ok, "\n".join(lines), None if ok else str(base))


def report_round(result: RoundResult, runs: int, violations_shown: int) -> None:
    first, *rest = result.text.splitlines() or [""]
    status = "ok" if result.ok else "FAIL"
    log.info(
        "run %d/%d shards=%d seed=%d %s %s",
        result.number,
        runs,
        result.shards,
        result.seed,
        first,
        status,
    )
    for line in rest[:violations_shown]:
        log.info("    %s", line)
    if len(rest) > violations_shown:
        log.info("    ... %d more lines", len(rest) - violations_shown)
    if result.kept:
        log.info("    kept %s", result.kept)


def parse_shards(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: {text}") from None
    if not values or any(not 1 <= v <= 64 for v in values):
        raise argparse.ArgumentTypeError(f"shard counts must be 1..64: {text}")
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shards", type=parse_shards, default=[2, 4], help="e.g. 2,4 (in turn)")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=20.0, help="load phase per round")
    parser.add_argument("--drain", type=float, default=20.0, help="drain deadline per round")
    parser.add_argument("--seed", type=int, help="seed of the first round (default: random)")
    parser.add_argument("--jobs", type=int, default=1, help="rounds run at once (processes)")
    parser.add_argument("--show", type=int, default=30, help="violation lines shown per round")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stdout)

    first_seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    plan = [
        (n + 1, args.shards[n % len(args.shards)], first_seed + n, args.seconds, args.drain)
        for n in range(args.runs)
    ]
    log.info(
        "%d run(s), shards %s, %.0f s load + up to %.0f s drain each, seeds %d..%d, %d at once",
        args.runs,
        ",".join(map(str, args.shards)),
        args.seconds,
        args.drain,
        first_seed,
        first_seed + args.runs - 1,
        args.jobs,
    )
    results: list[RoundResult] = []
    if args.jobs <= 1:
        for item in plan:
            results.append(one_round(*item))
            report_round(results[-1], args.runs, args.show)
    else:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=args.jobs, mp_context=context) as pool:
            futures = [pool.submit(one_round, *item) for item in plan]
            for future in as_completed(futures):
                results.append(future.result())
                report_round(results[-1], args.runs, args.show)

    failed = sorted((r for r in results if not r.ok), key=lambda r: r.number)
    python = sys.executable
    with contextlib.suppress(ValueError):
        if Path(python).is_relative_to(Path.cwd()):
            python = os.path.relpath(python)
    log.info("%d run(s), %d failed", len(results), len(failed))
    for r in failed:
        log.info(
            "FAILED run %d: shards=%d seed=%d; replay: %s tools/stress.py --shards %d --runs 1 "
            "--seed %d --seconds %g --drain %g",
            r.number,
            r.shards,
            r.seed,
            python,
            r.shards,
            r.seed,
            args.seconds,
            args.drain,
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
