"""What an idle `shardq serve` takes in memory, process by process (docs/BENCHMARKS.md,
"Footprint at rest").

Starts `python -m shardq serve -l 127.0.0.1 -p PORT` (this interpreter; the checkout that
PYTHONPATH names, else the installed one) in an empty working directory, so no
config/shardq.yaml is read, with `--extra` flags; waits until it answers and its memory has
stopped moving (the same processes and the same RSS sum in two reads `--settle` s apart:
every child is up and idle); then reads /proc/PID/smaps_rollup of each process of its tree
and prints a Markdown table, one row a process (by its name, `ps -o comm`) and the total:
RSS (a page counted in every process that maps it), PSS (a shared page divided among the
processes that share it: the sum is what the server takes from the machine) and private
dirty pages. The server is stopped by its pid. Memory, unlike time, is not disturbed by other
work on the machine.

    python tools/footprint.py                       # the default server
    python tools/footprint.py --extra "--shards 8"  # 2 serving processes, 6 shard processes
    python tools/footprint.py --beanstalkd          # `beanstalkd -l 127.0.0.1 -p PORT`
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
import time
from pathlib import Path

from shardq.bench.procs import tree
from shardq.bench.servers import Server

FIELDS = ("Rss", "Pss", "Private_Dirty")  #: smaps_rollup lines read, in kB
MAX_WAIT_S = 60.0  #: how long the server may take to settle

#: one process: its pid, its name, then FIELDS in KiB
Row = tuple[int, str, tuple[int, ...]]


def rollup(pid: int) -> tuple[int, ...] | None:
    """FIELDS of one process in KiB; None if it is gone."""
    found: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in FIELDS:
                    found[key] = int(rest.split()[0])
    except OSError:
        return None
    return tuple(found.get(key, 0) for key in FIELDS)


def name_of(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def snapshot(root: int) -> list[Row]:
    """Every live process of the tree under `root`, in the tree's order."""
    rows = []
    for pid in tree(root):
        fields = rollup(pid)
        if fields is not None:
            rows.append((pid, name_of(pid), fields))
    return rows


def settled(root: int, settle_s: float) -> list[Row]:
    """A snapshot once two in a row, `settle_s` apart, have the same pids and RSS sum."""
    deadline = time.monotonic() + MAX_WAIT_S
    last = snapshot(root)
    while True:
        time.sleep(settle_s)
        now = snapshot(root)
        same_pids = [r[0] for r in now] == [r[0] for r in last]
        if same_pids and sum(r[2][0] for r in now) == sum(r[2][0] for r in last):
            return now
        if time.monotonic() > deadline:
            raise SystemExit(f"the server's memory did not settle within {MAX_WAIT_S:g} s")
        last = now


def mib(kib: int) -> str:
    return f"{kib / 1024:.1f}"


def table(rows: list[Row], label: str) -> str:
    head = ["| process | RSS MiB | PSS MiB | private dirty MiB |", "|---|---:|---:|---:|"]
    body = [
        f"| `{name}` | " + " | ".join(mib(v) for v in fields) + " |" for _, name, fields in rows
    ]
    totals = [sum(r[2][i] for r in rows) for i in range(len(FIELDS))]
    count = f"{len(rows)} process" + ("es" if len(rows) != 1 else "")
    total = f"| **{label}** ({count}) | " + " | ".join(f"**{mib(v)}**" for v in totals)
    return "\n".join([*head, *body, total + " |"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--extra", default="", help="more flags for `shardq serve`, one string")
    ap.add_argument("--beanstalkd", action="store_true", help="beanstalkd instead of shardq")
    ap.add_argument("-n", type=int, default=1, help="servers started one after the other")
    ap.add_argument("--settle", type=float, default=2.0, help="seconds between two reads")
    args = ap.parse_args()
    serve = [sys.executable, "-m", "shardq", "serve"]
    argv = ["beanstalkd"] if args.beanstalkd else serve
    template = shlex.join([*argv, "-l", "127.0.0.1", "-p", "{port}"]) + " " + args.extra
    label = argv[0] if args.beanstalkd else "shardq serve " + args.extra
    with tempfile.TemporaryDirectory() as cwd:
        for _ in range(args.n):
            with Server(template, cwd=Path(cwd), label=label) as server:
                rows = settled(server.proc.pid, args.settle)
            print(table(rows, label.strip()))


if __name__ == "__main__":
    main()
