"""How soon a freshly launched server answers its first command (README, "Using it from a
beanstalk client"; issue 22, item 9).

Each round picks a free port, launches the server in an empty working directory (so no
config/shardq.yaml is read), connects as soon as the port accepts (retrying a refused
connect every 0.2 ms), sends one command and times the complete answer from the moment of
the launch; then stops the server (SIGTERM to its process group) and waits for it to end.
Prints the median, the quartiles, min and max of each, and, per process of the server (by
its name, `ps -o comm`), the CPU time it had used when the answer came and how long it had
waited for a CPU (/proc/PID/schedstat).

    python tools/startup_time.py -n 20                  # shardqd, then beanstalkd
    python tools/startup_time.py -n 20 --server shardqd --code /old/clone --code .

With several `--code` checkouts (each run through PYTHONPATH) the rounds alternate between
them (A, B, A, B …), so a machine that others load changes both alike. Each checkout's
bytecode is compiled first (`compileall`), as an installed package's is: with
PYTHONDONTWRITEBYTECODE set, every launch would compile every module again. `--busy N` keeps N
processes spinning on the CPU meanwhile; `--extra` adds flags (e.g. "--shards 4").
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import multiprocessing
import os
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

from shardq.bench.procs import group_members

HERE = Path(__file__).resolve().parent.parent
PY = sys.executable
SERVERS = {
    "shardqd": [PY, "-m", "shardq.dropin"],
    "serve": [PY, "-m", "shardq", "serve"],
    "beanstalkd": ["beanstalkd"],
}
COMMANDS = {"stats": b"stats\r\n", "put": b"put 0 0 60 2\r\nhi\r\n"}
RETRY_S = 0.0002

PHASES = [PY, str(Path(__file__).resolve().parent / "startup_phases.py")]

#: one round: seconds to the first accepted connect, to the first complete answer, per
#: process name the seconds on a CPU and waiting for one at that moment, and (--phases) per
#: step of the launched process's start-up the seconds from the launch and its CPU seconds
Round = tuple[float, float, dict[str, tuple[float, float]], dict[str, tuple[float, float]]]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def answered(sock: socket.socket, command: bytes) -> bool:
    """Send `command` and read its whole answer (True), or the connection closed (False)."""
    sock.sendall(command)
    got = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return False
        got += chunk
        head, crlf, rest = got.partition(b"\r\n")
        if not crlf:
            continue
        if not head.startswith(b"OK "):  # a one-line answer
            return True
        if len(rest) >= int(head.split()[1]) + 2:  # stats: its body too
            return True


def cpu_by_process(pgid: int) -> dict[str, tuple[float, float]]:
    """Name -> (seconds on a CPU, seconds waiting for one) of each process of the group."""
    found = {}
    for pid in group_members(pgid):
        try:
            with open(f"/proc/{pid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/schedstat") as f:
                run_ns, wait_ns, _ = f.read().split()
        except OSError:
            continue
        found["(launched)" if pid == pgid else name] = (int(run_ns) / 1e9, int(wait_ns) / 1e9)
    return found


def phases_of(stderr: IO[bytes], started: float) -> dict[str, tuple[float, float]]:
    """The ``phases`` line of tools/startup_phases.py: step -> (seconds from `started`, CPU
    seconds of the launched process then)."""
    stderr.seek(0)
    for line in stderr.read().decode(errors="replace").splitlines():
        if line.startswith("phases "):
            steps = (word.partition("=") for word in line.split()[1:])
            times = {name: value.split("/") for name, _, value in steps}
            return {n: (float(wall) - started, float(cpu)) for n, (wall, cpu) in times.items()}
    return {}


def one_round(argv: list[str], command: bytes, env: dict[str, str], cwd: str) -> Round:
    with tempfile.TemporaryFile() as stderr:
        port = free_port()
        started = time.monotonic()
        proc = subprocess.Popen(
            [*argv, "-l", "127.0.0.1", "-p", str(port)],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )
        try:
            connected, answer, cpu = served(proc, port, command, argv, started)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(20)
        return connected, answer, cpu, phases_of(stderr, started)


def served(
    proc: subprocess.Popen[bytes], port: int, command: bytes, argv: list[str], started: float
) -> tuple[float, float, dict[str, tuple[float, float]]]:
    """Connect as soon as the port accepts, send `command`, read its answer: the seconds
    from `started` to each, and the server's processes' CPU then."""
    while True:
        sock = socket.socket()
        try:
            sock.connect(("127.0.0.1", port))
            break
        except ConnectionRefusedError:
            sock.close()
            if proc.poll() is not None:
                raise SystemExit(f"{shlex.join(argv)} exited: {proc.returncode}") from None
            time.sleep(RETRY_S)
    connected = time.monotonic() - started
    with sock:
        sock.settimeout(20)
        if not answered(sock, command):
            raise SystemExit("the connection was closed before the answer")
        answer = time.monotonic() - started
        return connected, answer, cpu_by_process(proc.pid)


def spin() -> None:
    while True:
        pass


def summary(label: str, values: list[float]) -> str:
    ms = sorted(v * 1000 for v in values)
    q1, median, q3 = statistics.quantiles(ms, n=4) if len(ms) > 1 else (ms[0],) * 3
    return (
        f"{label}: median {median:.1f} ms (quartiles {q1:.1f}-{q3:.1f}, "
        f"min {ms[0]:.1f}, max {ms[-1]:.1f}, n={len(ms)})"
    )


def report(label: str, command: str, rounds: list[Round]) -> None:
    print(summary(f"{label} connect", [r[0] for r in rounds]))
    print(summary(f"{label} first answer ({command})", [r[1] for r in rounds]))
    for process in sorted({p for r in rounds for p in r[2]}):
        seen = [r[2][process] for r in rounds if process in r[2]]
        run = statistics.median(s[0] for s in seen) * 1000
        wait = statistics.median(s[1] for s in seen) * 1000
        print(f"  {process}: {run:.1f} ms on a CPU, {wait:.1f} ms waiting for one (median)")
    steps = list(rounds[0][3])
    if steps:
        print("  launched process, from the launch (median ms, wall / its CPU):")
    for name in steps:
        seen = [r[3][name] for r in rounds if name in r[3]]
        wall = statistics.median(s[0] for s in seen) * 1000
        cpu = statistics.median(s[1] for s in seen) * 1000
        print(f"    {name}: {wall:.1f} / {cpu:.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=20, help="launches per server and checkout")
    ap.add_argument("--server", choices=SERVERS, action="append", help="[shardqd, beanstalkd]")
    ap.add_argument("--code", action="append", help="a shardq checkout to run [this one]")
    ap.add_argument("--command", choices=COMMANDS, default="stats")
    ap.add_argument("--extra", default="", help="more flags for the server, one string")
    ap.add_argument("--busy", type=int, default=0, help="processes spinning meanwhile")
    ap.add_argument("--phases", action="store_true", help="time each step of shardqd's start")
    args = ap.parse_args()
    codes = [str(Path(c).resolve()) for c in args.code or [HERE]]
    for code in codes:
        compileall.compile_dir(os.path.join(code, "shardq"), quiet=1)
    busy = [multiprocessing.Process(target=spin, daemon=True) for _ in range(args.busy)]
    for p in busy:
        p.start()
    try:
        with tempfile.TemporaryDirectory() as cwd:
            for name in args.server or ["shardqd", "beanstalkd"]:
                if name == "beanstalkd" and shutil.which("beanstalkd") is None:
                    print("beanstalkd: not installed")
                    continue
                server = PHASES if args.phases and name == "shardqd" else SERVERS[name]
                argv = server + shlex.split(args.extra)
                variants = codes if name != "beanstalkd" else codes[:1]
                rounds: dict[str, list[Round]] = {code: [] for code in variants}
                for _ in range(args.n):
                    for code in variants:
                        env = dict(os.environ, PYTHONPATH=code)
                        rounds[code].append(one_round(argv, COMMANDS[args.command], env, cwd))
                for code, done in rounds.items():
                    label = name if len(variants) == 1 else f"{name} ({code})"
                    report(label, args.command, done)
    finally:
        for p in busy:
            p.terminate()


if __name__ == "__main__":
    main()
