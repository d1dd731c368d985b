"""One client on a loaded machine: put 1 conn and pingpong against several servers, in turns.

Each round starts every server afresh on a free 127.0.0.1 port (servers alternate, so a
neighbour's load falls on all of them alike), runs the C load generator (`bload -w put -c 1`,
then `-w pingpong`) against it for D seconds and stops it by its PID. With `--busy`, a process
of our own keeps one core busy for the whole run (as `yes > /dev/null`; stopped by its PID at
the end). Prints, per server and row, the median over the rounds of ops/s, the server's CPU
per op (bload --pid: the server's whole process tree) and the client's.

    python tools/one_client.py --bload /tmp/loadgen-build/bload --rounds 3 --busy \\
        'beanstalkd=beanstalkd -l 127.0.0.1 -p {port}' \\
        'shardq=env PYTHONPATH=. python -m shardq serve -l 127.0.0.1 -p {port}'
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import statistics
import subprocess

log = logging.getLogger("one_client")

ROWS = {"put_c1": ["-w", "put", "-c", "1"], "pingpong": ["-w", "pingpong"]}


def free_port(bload: str) -> int:
    return int(subprocess.run([bload, "--free-port"], capture_output=True, check=True).stdout)


def cell(bload: str, template: str, row: list[str], seconds: float) -> dict[str, float]:
    """One server started afresh, one bload run against it: its JSON result."""
    port = free_port(bload)
    server = subprocess.Popen(  # its own session: stopped with its children by its PID
        shlex.split(template.format(port=port)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        subprocess.run([bload, "-p", str(port), "--wait", "10"], check=True)
        args = [bload, "-p", str(port), *row, "-d", str(seconds), "-W", "0.5", "--json"]
        done = subprocess.run([*args, "--pid", str(server.pid)], capture_output=True, check=True)
        result: dict[str, float] = json.loads(done.stdout)
        return result
    finally:
        subprocess.run(["kill", "--", f"-{server.pid}"], check=False)
        server.wait()


def per_op_us(result: dict[str, float], key: str) -> float:
    """CPU µs per op from a % of one core over the run."""
    return result[key] / 100 / result["ops_s"] * 1e6 if result["ops_s"] else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("servers", nargs="+", help="NAME=command template with {port}")
    parser.add_argument("--bload", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--busy", action="store_true", help="keep one core busy meanwhile")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    servers = dict(s.split("=", 1) for s in args.servers)
    busy = subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) if args.busy else None
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    try:
        for _ in range(args.rounds):
            for row_name, row in ROWS.items():
                for name, template in servers.items():
                    result = cell(args.bload, template, row, args.seconds)
                    results.setdefault((row_name, name), []).append(result)
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()
    log.info("| row | server | ops/s | server CPU µs/op | client CPU µs/op | other CPU % |")
    log.info("|---|---|---:|---:|---:|---:|")
    for (row_name, name), cells in results.items():
        ops = statistics.median(r["ops_s"] for r in cells)
        srv = statistics.median(per_op_us(r, "srv_cpu_pct") for r in cells)
        cli = statistics.median(per_op_us(r, "cli_cpu_pct") for r in cells)
        other = statistics.median(r["other_cpu_pct"] for r in cells)
        log.info("| %s | %s | %.0f | %.1f | %.1f | %.0f |", row_name, name, ops, srv, cli, other)


if __name__ == "__main__":
    main()
