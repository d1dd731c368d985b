"""Events-on overhead: `shardq bench -w mixed -c 50` against shardq with and without
`--events DIR`, alternating off/on three times; prints the medians and the ratio.

    python tools/events_overhead.py
"""

from __future__ import annotations

import glob
import json
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from shardq.bench.servers import Server

PY = sys.executable
ROUNDS = 3
BENCH = ["-m", "shardq", "bench", "-w", "mixed", "-c", "50", "-d", "5", "--json"]


def run(events: bool) -> tuple[float, int]:
    """ops/s of one bench run, and the event lines the server wrote."""
    d = tempfile.mkdtemp()
    command = f"{shlex.quote(PY)} -m shardq serve -p {{port}}"
    if events:
        command += f" --events {shlex.quote(d)}"
    server = Server(command)
    try:
        argv = [PY, *BENCH, "-p", str(server.port)]
        out = subprocess.run(argv, capture_output=True, text=True)
    finally:
        server.stop()
    r = json.loads(out.stdout)
    assert r["errors"] == 0
    lines = sum(Path(f).read_bytes().count(b"\n") for f in glob.glob(d + "/*.jsonl"))
    shutil.rmtree(d)
    return r["ops_per_sec"], lines


def main() -> None:
    res: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(ROUNDS):
        for k in ("off", "on"):
            ops, lines = run(k == "on")
            res[k].append(ops)
            print(k, round(ops), "event lines", lines)
    off, on = statistics.median(res["off"]), statistics.median(res["on"])
    print(f"median off {off:,.0f} on {on:,.0f} ratio {on / off:.2f}")


if __name__ == "__main__":
    main()
