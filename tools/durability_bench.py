"""Durability figures for docs/BENCHMARKS.md: shardq and beanstalkd with a log, in one run.

For each fsync policy, starts `beanstalkd -b DIR` and `shardq serve -b DIR` in turn (A, B,
A, B …) on free ports, runs `shardq bench -w mixed` (put + reserve + delete) against each and
prints the medians and the ratio; then a churn of put/delete with a fixed set of jobs alive
throughout, and the log directory's size on disk afterwards.

    python tools/durability_bench.py --seconds 5 --rounds 2 --churn 200000
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from shardq.bench.servers import Server

PY = sys.executable
SERVERS = {
    "beanstalkd": "beanstalkd -l 127.0.0.1 -p {port} -b {dir} {fsync}",
    "shardq": shlex.quote(PY) + " -m shardq serve -l 127.0.0.1 -p {port} -b {dir} {fsync}",
}
POLICIES = {"-f 0": "-f 0", "-f 50 (default)": ""}


def start(template: str, fsync: str, log_dir: str) -> Server:
    """The server on a free port, answering (its output goes to a temporary log)."""
    command = template.replace("{dir}", shlex.quote(log_dir)).replace("{fsync}", fsync)
    return Server(command)


def bench(port: int, seconds: float) -> dict[str, Any]:
    argv = [PY, "-m", "shardq", "bench", "-w", "mixed", "-c", "50", "-d", str(seconds)]
    out = subprocess.run(argv + ["-p", str(port), "--json"], capture_output=True, text=True)
    return json.loads(out.stdout)


def du(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            total += os.stat(os.path.join(root, name)).st_blocks * 512
    return total


def churn(port: int, total: int, alive: int, connections: int = 8) -> None:
    """Keep `alive` jobs in the server while `total` others are put and deleted, in batches
    of 100 pipelined puts then their 100 deletes, over several connections at once."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        f = s.makefile("rb")
        s.sendall((b"put 0 0 60 100\r\n" + b"k" * 100 + b"\r\n") * alive)
        for _ in range(alive):
            f.readline()
    threads = [
        threading.Thread(target=_churn_one, args=(port, total // connections))
        for _ in range(connections)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _churn_one(port: int, total: int, batch: int = 100) -> None:
    with socket.create_connection(("127.0.0.1", port)) as s:
        f = s.makefile("rb")
        for _ in range(total // batch):
            s.sendall((b"put 0 0 60 100\r\n" + b"c" * 100 + b"\r\n") * batch)
            ids = [f.readline().split()[1] for _ in range(batch)]
            s.sendall(b"".join(b"delete %s\r\n" % i for i in ids))
            for _ in range(batch):
                f.readline()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--churn", type=int, default=1_000_000)
    ap.add_argument("--skip-load", action="store_true", help="only the churn / disk-use part")
    ap.add_argument("--alive", type=int, default=1000)
    args = ap.parse_args()
    for label, fsync in ({} if args.skip_load else POLICIES).items():
        rates: dict[str, list[float]] = {name: [] for name in SERVERS}
        for _ in range(args.rounds):
            for name, template in SERVERS.items():
                log_dir = tempfile.mkdtemp(prefix=f"durab-{name}-")
                server = start(template, fsync, log_dir)
                try:
                    result = bench(server.port, args.seconds)
                    if result["errors"]:
                        raise RuntimeError(f"{name}: {result['errors']} wrong replies")
                    rates[name].append(result["ops_per_sec"])
                finally:
                    server.stop()
                    shutil.rmtree(log_dir, ignore_errors=True)
        a, b = (statistics.median(rates[n]) for n in SERVERS)
        print(
            f"mixed 50 conns {label}: beanstalkd {a:,.0f} ops/s, shardq {b:,.0f} ops/s, "
            f"ratio {b / a:.2f}  (all rounds: {rates})"
        )
    for name, template in SERVERS.items():
        log_dir = tempfile.mkdtemp(prefix=f"churn-{name}-")
        server = start(template, "", log_dir)
        started = time.monotonic()
        try:
            churn(server.port, args.churn, args.alive)
            took = time.monotonic() - started
            time.sleep(1)
            size = du(log_dir) / 1e6
            print(
                f"churn {args.churn:,} put+delete, {args.alive} alive, {name}: "
                f"{size:.1f} MB on disk after {took:.0f} s"
            )
        finally:
            server.stop()
            shutil.rmtree(log_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
