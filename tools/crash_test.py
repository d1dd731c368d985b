#!/usr/bin/env python3
"""Crash check for a beanstalk server with a binlog: no acknowledged put lost, no
acknowledged delete resurrected, no job duplicated.

Each round: start the server (a command template with {port} and {dir}) on a fresh
log directory; producers put jobs with unique bodies and consumers reserve and delete
them; mid-stream the server is killed with SIGKILL; it is restarted on the same
directory and every job is drained. The ledger of what the server acknowledged
decides:

* an acknowledged put (INSERTED) whose delete was never sent must come back exactly
  once, with the same id ("lost" if missing, "duplicated" if more than once);
* an acknowledged delete (DELETED) must stay deleted ("resurrected" otherwise);
* a put or delete that was sent but not answered before the kill is in doubt: the job
  may be there or not, but never twice.

Kill modes: ``group`` (default) SIGKILLs every process of the server at once (its
process group); ``supervisor`` SIGKILLs only the server's main pid (shardq's children
then stop on their own); ``shard`` SIGKILLs one shardq shard process while the server
keeps running: then clients must see a delay, not an error, no job may be delivered
twice, and the drain runs on the same server; ``serving`` SIGKILLs shardq's serving process
(colocated, it also runs shard 0): its clients lose their connections, the supervisor
restarts it, and the drain runs on the same server.

Examples::

    python tools/crash_test.py --server 'shardq serve -p {port} -b {dir} -f 0 --shards 2'
    python tools/crash_test.py --server 'beanstalkd -l 127.0.0.1 -p {port} -b {dir} -f 0'
    python tools/crash_test.py --kill shard --rounds 5 --seconds 4

The server's output goes to <dir>/../server.log; ``--keep`` keeps the directories.
"""

from __future__ import annotations

import argparse
import os
import random
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from crash_load import Ledger, Load, drain

from shardq.bench.procs import kill_group, role_pids, shard_pids, terminate, wait_group_gone
from shardq.bench.servers import Server as Running

DEFAULT_SERVER = "{python} -m shardq serve -l 127.0.0.1 -p {port} -b {dir} -f 0 --shards 2"
START_TIMEOUT = 30.0  #: seconds a (re)start with replay may take
REPO = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- the server


class Server:
    """One server (in a session of its own) started from a command template with {port},
    {dir} and {python}; it can be killed and started again on the same log directory (on a
    fresh free port each time)."""

    def __init__(self, template: str, log_dir: Path, log_path: Path) -> None:
        self.template = template
        self.log_dir = log_dir
        self.log_path = log_path
        self.running: Running | None = None

    @property
    def proc(self) -> subprocess.Popen[bytes] | None:
        return None if self.running is None else self.running.proc

    @property
    def port(self) -> int:
        return 0 if self.running is None else self.running.port

    def command(self) -> str:
        """The template with {dir} and {python} filled in ({port} is the start's)."""
        return self.template.replace("{dir}", shlex.quote(str(self.log_dir))).replace(
            "{python}", shlex.quote(sys.executable)
        )

    def start(self, timeout: float = START_TIMEOUT) -> None:
        """Start and wait until a command is answered (the port is bound before the log is
        replayed); three tries, as a free port may be taken by someone else meanwhile."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        last = ""
        for _attempt in range(3):
            try:
                self.running = Running(
                    self.command(), timeout, log_path=self.log_path, new_session=True, cwd=REPO
                )
                return
            except RuntimeError as e:
                last = str(e)
        raise RuntimeError(f"server did not come up: {last}")

    def kill_group(self) -> None:
        """SIGKILL every process of the server at once (a crash of the whole server)."""
        if self.proc is not None:
            kill_group(self.proc)

    def kill_main(self) -> None:
        """SIGKILL only the main process; wait until its whole group is gone."""
        assert self.proc is not None
        self.proc.kill()
        wait_group_gone(self.proc)
        self.kill_group()  # whatever did not stop by itself

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM; the exit status, or None if it had to be killed."""
        if self.proc is None:
            return None
        code = terminate(self.proc, timeout, group=True)
        self.kill_group()
        return code


# --------------------------------------------------------------------------- a round


@dataclass
class Result:
    acked_puts: int = 0
    acked_deletes: int = 0
    in_doubt: int = 0
    lost: list[bytes] = field(default_factory=list)
    resurrected: list[bytes] = field(default_factory=list)
    duplicated: list[bytes] = field(default_factory=list)
    unknown: list[bytes] = field(default_factory=list)
    id_changed: list[bytes] = field(default_factory=list)
    delivered_twice: list[bytes] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    max_wait: float = 0.0
    left_in_server: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        bad = (self.lost, self.resurrected, self.duplicated, self.unknown, self.id_changed)
        return (
            not any(bad)
            and not self.delivered_twice
            and not self.errors
            and not any(self.left_in_server.values())
        )

    def line(self, label: str) -> str:
        text = (
            f"{label}: acked puts {self.acked_puts}, acked deletes {self.acked_deletes}, "
            f"in doubt {self.in_doubt}, lost {len(self.lost)}, "
            f"resurrected {len(self.resurrected)}, duplicated {len(self.duplicated)}"
        )
        if self.unknown or self.id_changed:
            text += f", unknown {len(self.unknown)}, id changed {len(self.id_changed)}"
        if self.delivered_twice:
            text += f", delivered twice {len(self.delivered_twice)}"
        text += f", client errors {len(self.errors)}, longest wait {self.max_wait:.2f} s"
        if any(self.left_in_server.values()):
            text += f", left in server {self.left_in_server}"
        return text + ("" if self.ok else "  <-- FAIL")

    def details(self) -> str:
        out = []
        for name in ("lost", "resurrected", "duplicated", "unknown", "id_changed"):
            items = getattr(self, name)
            if items:
                out.append(f"  {name}: {[b.decode(errors='replace') for b in items[:5]]}")
        if self.delivered_twice:
            out.append(f"  delivered twice: {[b.decode() for b in self.delivered_twice[:5]]}")
        out += [f"  client error: {e}" for e in self.errors[:10]]
        return "\n".join(out)


def judge(ledger: Ledger, found: dict[bytes, list[int]], tag: str) -> Result:
    r = Result(errors=list(ledger.errors), max_wait=ledger.max_wait)
    r.acked_puts = len(ledger.put_acked)
    r.acked_deletes = len(ledger.del_acked)
    for body, job_id in ledger.put_acked.items():
        ids = found.get(body, [])
        if body in ledger.del_acked:
            if ids:
                r.resurrected.append(body)
        elif body in ledger.del_sent:
            r.in_doubt += 1
            if len(ids) > 1:
                r.duplicated.append(body)
        elif not ids:
            r.lost.append(body)
        elif len(ids) > 1:
            r.duplicated.append(body)
        if ids and any(i != job_id for i in ids):
            r.id_changed.append(body)
    for body in ledger.put_sent - ledger.put_acked.keys():
        r.in_doubt += 1
        if len(found.get(body, [])) > 1:
            r.duplicated.append(body)
        if body in ledger.del_acked and found.get(body):
            r.resurrected.append(body)
    r.unknown = [b for b in found if b not in ledger.put_sent]
    return r


def run_round(
    template: str,
    seconds: float,
    kill: str = "group",
    producers: int = 6,
    consumers: int = 6,
    workdir: Path | None = None,
    label: str = "round",
    rng: random.Random | None = None,
) -> Result:
    """One round: load, kill, (restart), drain, judge. The server is always stopped."""
    rng = rng or random.Random()
    base = Path(tempfile.mkdtemp(prefix="crash-", dir=workdir))
    server = Server(template, base / "log", base / "server.log")
    ledger = Ledger()
    tag = f"{label}-{base.name}"
    try:
        server.start()
        load = Load(server.port, ledger, tag, producers, consumers)
        load.start()
        if kill == "shard":
            return _shard_round(server, load, ledger, seconds, tag, rng)
        if kill == "serving":
            return _serving_round(server, load, ledger, seconds, tag, rng)
        time.sleep(seconds * rng.uniform(0.6, 1.0))  # the load runs; the kill point varies
        load.killed.set()
        if kill == "supervisor":
            server.kill_main()
        else:
            server.kill_group()
        load.join()
        server.start()
        found, left = drain(server.port)
        result = judge(ledger, found, tag)
        result.left_in_server = left
        _check_stop(server, result)
        return result
    finally:
        server.kill_group()
        if os.environ.get("CRASH_TEST_KEEP") != "1":
            shutil.rmtree(base, ignore_errors=True)


def _shard_round(
    server: Server, load: Load, ledger: Ledger, seconds: float, tag: str, rng: random.Random
) -> Result:
    assert server.proc is not None
    time.sleep(seconds * rng.uniform(0.3, 0.5))
    shards = shard_pids(server.proc.pid)
    if not shards:
        raise RuntimeError("no shard process found (is this a shardq server?)")
    index = rng.choice(sorted(shards))
    victim = shards[index]
    os.kill(victim, signal.SIGKILL)
    killed_at = time.monotonic()
    deadline = killed_at + 10
    while True:  # the supervisor must restart it (the issue: within a second)
        now_pids = shard_pids(server.proc.pid)
        if now_pids.get(index) not in (None, victim):
            break
        if time.monotonic() > deadline:
            ledger.error(f"shard {index} was not restarted within 10 s")
            break
        time.sleep(0.01)
    restarted_in = time.monotonic() - killed_at
    before = len(ledger.put_acked) + len(ledger.del_acked)
    progress_deadline = time.monotonic() + max(2.0, seconds * 0.5)
    while time.monotonic() < progress_deadline:  # the load goes on after the restart
        time.sleep(0.05)
    if len(ledger.put_acked) + len(ledger.del_acked) <= before:
        ledger.error("no progress after the shard restart")
    load.join()
    found, left = drain(server.port)
    result = judge(ledger, found, tag)
    result.left_in_server = left
    result.delivered_twice = [b for b, n in ledger.delivered.items() if n > 1]
    if restarted_in > 1.5:
        result.errors.append(f"shard {index} restarted after {restarted_in:.2f} s")
    _check_stop(server, result)
    return result


def _serving_round(
    server: Server, load: Load, ledger: Ledger, seconds: float, tag: str, rng: random.Random
) -> Result:
    """SIGKILL a serving process (serving process; colocated, it also runs a shard), one picked at
    random when there are several: its clients lose their connections, the supervisor
    restarts it, its shard replays its log; drain that server."""
    assert server.proc is not None
    time.sleep(seconds * rng.uniform(0.6, 1.0))
    serving = {r: p for r, p in role_pids(server.proc.pid).items() if r.startswith("serving")}
    if not serving:
        raise RuntimeError("no serving process found (is this a shardq server?)")
    role = rng.choice(sorted(serving))
    victim = serving[role]
    load.killed.set()
    os.kill(victim, signal.SIGKILL)
    load.join()
    deadline = time.monotonic() + 15
    while role_pids(server.proc.pid).get(role) in (None, victim):
        if time.monotonic() > deadline:
            ledger.error(f"{role} was not restarted within 15 s")
            break
        time.sleep(0.02)
    found, left = drain(server.port)  # waits in the listen backlog until it serves
    result = judge(ledger, found, tag)
    result.left_in_server = left
    _check_stop(server, result)
    return result


def _check_stop(server: Server, result: Result) -> None:
    """shardq's graceful stop exits 0 (beanstalkd simply dies of SIGTERM)."""
    code = server.stop()
    if "shardq" in server.template and code != 0:
        result.errors.append(f"server exit status after SIGTERM: {code}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--server",
        default=DEFAULT_SERVER,
        help="command template with {port} and {dir} (and {python}) [%(default)s]",
    )
    ap.add_argument("--seconds", type=float, default=3.0, help="load time per round [3]")
    ap.add_argument("--rounds", type=int, default=3, help="rounds [3]")
    ap.add_argument("--kill", choices=("group", "supervisor", "shard", "serving"), default="group")
    ap.add_argument("--producers", type=int, default=6)
    ap.add_argument("--consumers", type=int, default=6)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--keep", action="store_true", help="keep the log dirs and server logs")
    ap.add_argument("--workdir", default=None, help="where the per-round dirs go [$TMPDIR]")
    args = ap.parse_args(argv)
    if args.keep:
        os.environ["CRASH_TEST_KEEP"] = "1"
    rng = random.Random(args.seed)
    failed = 0
    total = Result()
    for i in range(1, args.rounds + 1):
        r = run_round(
            args.server,
            args.seconds,
            args.kill,
            args.producers,
            args.consumers,
            Path(args.workdir) if args.workdir else None,
            f"r{i}",
            rng,
        )
        print(r.line(f"round {i}"), flush=True)
        if not r.ok:
            failed += 1
            print(r.details(), flush=True)
        total.acked_puts += r.acked_puts
        total.acked_deletes += r.acked_deletes
        total.in_doubt += r.in_doubt
        total.lost += r.lost
        total.resurrected += r.resurrected
        total.duplicated += r.duplicated
    print(
        f"total: {args.rounds} rounds, {failed} failed; acked puts {total.acked_puts}, "
        f"acked deletes {total.acked_deletes}, lost {len(total.lost)}, "
        f"resurrected {len(total.resurrected)}, duplicated {len(total.duplicated)}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
