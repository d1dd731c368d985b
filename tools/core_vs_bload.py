"""Does `shardq bench` (its compiled load core) reach another load generator's ceiling?

Each row of the C generator `bload`'s matrix (its compare.sh rows) is run by `bload` and by
`shardq bench`, alternating cell by cell (the order flips every round), each cell on a fresh
server, and the medians are set side by side with each tool's CPU per operation. `bload` is
not part of this repository: give the path of a build of it.

    python tools/core_vs_bload.py --bload PATH [--server beanstalkd|stub] [--rounds 3]
        [--duration 2] [--engine c|python] [--rows put_c1,mixed_c50,...]

On a shared machine run it under `chrt -f 10` (figures spread several-fold otherwise;
docs/BENCHMARKS.md, "The compiled load core").
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import subprocess
import sys
from collections.abc import Callable
from functools import partial

from shardq.bench.limits import stub_command
from shardq.bench.servers import Server

log = logging.getLogger("core_vs_bload")

#: name: (bload's arguments, shardq bench's arguments); 100-byte bodies everywhere.
ROWS = {
    "put_c1": ("-w put -c 1 -P 1", "-w put -c 1"),
    "put_c50_P16": ("-w put -c 50 -P 16", "-w put -c 50 --pipeline 16"),
    "reserve_c50": ("-w reserve -c 50 -P 1 --prefill 200000", "-w reserve -c 50 --prefill 200000"),
    "mixed_c50": ("-w mixed -c 50 -P 1", "-w mixed -c 50 --backlog 1000"),
    "mixed_c200": ("-w mixed -c 200 -P 1", "-w mixed -c 200 --backlog 1000"),
    "multitube_t16_c64": (
        "-w multitube -t 16 -c 64 -P 1",
        "-w multitube -t 16 -c 64 --backlog 1000",
    ),
    "pingpong_c1": ("-w pingpong -c 1", "-w pingpong -c 1"),
}
SERVERS = {"beanstalkd": "beanstalkd -l 127.0.0.1 -p {port}", "stub": stub_command(100)}

#: One cell's (ops/s, tool CPU in % of one core, errors).
Cell = tuple[float, float, int]


def run_bload(bload: str, port: int, args: str, seconds: float) -> Cell:
    cmd = [bload, "-p", str(port), "-d", str(seconds), "--json", *args.split()]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    j = json.loads(done.stdout.strip().splitlines()[-1])
    return j["ops_s"], j["cli_cpu_pct"], j["errors"] + j["conn_errors"]


def run_shardq(engine: str, port: int, args: str, seconds: float) -> Cell:
    cmd = [sys.executable, "-m", "shardq", "bench", "-p", str(port), "-d", str(seconds)]
    cmd += ["--json", "--keep", "--engine", engine, *args.split()]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    j = json.loads(done.stdout)
    return j["ops_per_sec"], 100 * j["client_cpu_s"] / j["elapsed_s"], j["errors"]


def measure(template: str, tool: Callable[[int], Cell]) -> Cell:
    with Server(template) as server:
        return tool(server.port)


def median_row(cells: list[Cell]) -> tuple[float, float]:
    """Median ops/s and median tool CPU per operation (µs)."""
    ops = statistics.median(c[0] for c in cells)
    us = statistics.median(1e4 * c[1] / c[0] for c in cells if c[0])
    return ops, us


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bload", required=True, help="path of the bload binary")
    parser.add_argument("--server", choices=sorted(SERVERS), default="beanstalkd")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=2.0)
    parser.add_argument("--engine", choices=("c", "python"), default="c")
    parser.add_argument("--rows", default=",".join(ROWS), help="comma-separated row names")
    a = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    template = SERVERS[a.server]
    table = []
    for row in a.rows.split(","):
        b_args, s_args = ROWS[row]
        cells: dict[str, list[Cell]] = {"bload": [], "shardq": []}
        for rnd in range(a.rounds):
            order = ["bload", "shardq"] if rnd % 2 == 0 else ["shardq", "bload"]
            for tool in order:
                if tool == "bload":
                    run = partial(run_bload, a.bload, args=b_args, seconds=a.duration)
                else:
                    run = partial(run_shardq, a.engine, args=s_args, seconds=a.duration)
                cell = measure(template, run)
                cells[tool].append(cell)
                log.info("%s %s round %d: %.0f ops/s, tool CPU %.0f %%, errors %d",
                         row, tool, rnd + 1, *cell)  # fmt: skip
        (b_ops, b_us), (s_ops, s_us) = median_row(cells["bload"]), median_row(cells["shardq"])
        runs = " / ".join(f"{c[0] / 1000:.1f}k" for c in cells["shardq"])
        table.append(
            f"| {row} | {b_ops:,.0f} | {s_ops:,.0f} | **{s_ops / b_ops:.2f}** | {runs}"
            f" | {b_us:.1f} / {s_us:.1f} |"
        )
    log.info("| row | bload ops/s | shardq bench ops/s | ratio | shardq bench's rounds"
             " | tool µs/op bload / shardq |")  # fmt: skip
    log.info("|---|---:|---:|---:|---|---:|")
    for line in table:
        log.info("%s", line)


if __name__ == "__main__":
    main()
