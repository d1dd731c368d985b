"""Events-on overhead: `shardq bench -w mixed -c 50` against shardq with and without
`--events DIR`, alternating off/on three times; prints the medians and the ratio.

    python tools/events_overhead.py
"""

import glob
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

PY = sys.executable


def run(events):
    d = tempfile.mkdtemp()
    argv = [PY, "-m", "shardq", "serve", "-p", "0"] + (["--events", d] if events else [])
    p = subprocess.Popen(argv, stdout=subprocess.PIPE)
    port = int(p.stdout.readline().split(b":")[-1])
    out = subprocess.run(
        [
            PY,
            "-m",
            "shardq",
            "bench",
            "-w",
            "mixed",
            "-c",
            "50",
            "-d",
            "5",
            "-p",
            str(port),
            "--json",
        ],
        capture_output=True,
        text=True,
    )
    p.terminate()
    p.wait()
    r = json.loads(out.stdout)
    assert r["errors"] == 0
    lines = sum(Path(f).read_bytes().count(b"\n") for f in glob.glob(d + "/*.jsonl"))
    shutil.rmtree(d)
    return r["ops_per_sec"], lines


res = {"off": [], "on": []}
for _ in range(3):
    for k in ("off", "on"):
        ops, lines = run(k == "on")
        res[k].append(ops)
        print(k, round(ops), "event lines", lines)
off, on = statistics.median(res["off"]), statistics.median(res["on"])
print(f"median off {off:,.0f} on {on:,.0f} ratio {on / off:.2f}")
