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
twice, and the drain runs on the same server; ``acceptor`` SIGKILLs shardq's acceptor
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
import contextlib
import os
import random
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

TUBES = ("crash-a", "crash-b", "crash-c", "crash-d", "crash-e")
DEFAULT_SERVER = "{python} -m shardq serve -l 127.0.0.1 -p {port} -b {dir} -f 0 --shards 2"
START_TIMEOUT = 30.0  #: seconds a (re)start with replay may take
OP_TIMEOUT = 15.0  #: a single reply may take this long (a shard restart is a delay)
DRAIN_TIMEOUT = 30.0


# --------------------------------------------------------------------------- processes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rindex(b")") + 2 :].decode().split()


def _live_where(field: int, value: int) -> list[int]:
    """Live processes whose /proc stat field (1: parent pid, 2: process group) is ``value``."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            fields = _stat_fields(int(name))
            if fields and fields[0] not in "ZX" and int(fields[field]) == value:
                out.append(int(name))
    return out


def children_of(pid: int) -> list[int]:
    """Live direct children of ``pid`` (scans /proc: task/*/children is not everywhere)."""
    return _live_where(1, pid)


def group_members(pgid: int) -> list[int]:
    return _live_where(2, pgid)


def cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def role_pids(server_pid: int) -> dict[str, int]:
    """Role ('acceptor', 'coordinator', 'shard <i>') -> pid of a shardq server's children."""
    out = {}
    for pid in children_of(server_pid):
        args = cmdline(pid)
        if "shardq.processes.child" in args:
            rest = args[args.index("shardq.processes.child") + 1 :]
            if len(rest) > 1:
                out[f"shard {rest[1]}" if rest[0] == "shard" else rest[0]] = pid
    return out


def shard_pids(server_pid: int) -> dict[int, int]:
    """shard index -> pid of a shardq server's live shard processes."""
    return {
        int(role.split()[1]): pid
        for role, pid in role_pids(server_pid).items()
        if role.startswith("shard ")
    }


class Server:
    """One server process (in a session of its own) started from a command template."""

    def __init__(self, template: str, log_dir: Path, log_path: Path) -> None:
        self.template = template
        self.log_dir = log_dir
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    def argv(self, port: int) -> list[str]:
        words = shlex.split(self.template)
        argv = [w.format(port=port, dir=self.log_dir, python=sys.executable) for w in words]
        if argv[0] == "shardq" and shutil.which("shardq") is None:
            argv[:1] = [sys.executable, "-m", "shardq"]
        return argv

    def start(self, timeout: float = START_TIMEOUT) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        last = ""
        for _attempt in range(3):  # a free port may be taken by someone else meanwhile
            self.port = free_port()
            with open(self.log_path, "ab") as log:
                self.proc = subprocess.Popen(
                    self.argv(self.port),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    start_new_session=True,
                    cwd=Path(__file__).resolve().parents[1],
                )
            if self.wait_ready(timeout):
                return
            last = self.log_path.read_text(errors="replace")[-2000:]
            self.kill_group()
        raise RuntimeError(f"server did not come up: {self.argv(self.port)}\n{last}")

    def wait_ready(self, timeout: float) -> bool:
        """Until a command is answered (the port is bound before the log is replayed)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                return False
            with contextlib.suppress(OSError):
                c = Client(self.port, timeout=max(0.1, deadline - time.monotonic()))
                try:
                    if c.cmd(b"list-tubes-watched").startswith(b"OK"):
                        return True
                finally:
                    c.close()
            time.sleep(0.05)
        return False

    def kill_group(self) -> None:
        """SIGKILL every process of the server at once (a crash of the whole server)."""
        if self.proc is None:
            return
        pgid = self.proc.pid
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        deadline = time.monotonic() + 10
        while (left := group_members(pgid)) and time.monotonic() < deadline:
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.02)

    def kill_main(self) -> None:
        """SIGKILL only the main process; wait until its whole group is gone."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(timeout=10)
        deadline = time.monotonic() + 10
        while group_members(self.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        self.kill_group()  # whatever did not stop by itself

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM; the exit status, or None if it had to be killed."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
        self.kill_group()
        return code


# --------------------------------------------------------------------------- client


class Client:
    """A blocking beanstalk connection with a timeout on every reply."""

    def __init__(self, port: int, timeout: float = OP_TIMEOUT) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.f = self.sock.makefile("rb")
        self.last_body = b""

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.f.close()
            self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def line(self) -> bytes:
        got = self.f.readline()
        if not got.endswith(b"\r\n"):
            raise ConnectionError(f"connection closed (got {got!r})")
        return got[:-2]

    def cmd(self, data: bytes) -> bytes:
        self.send(data + b"\r\n")
        head = self.line()
        self.last_body = b""  # the body of a reply that has one
        if head.startswith(b"OK "):
            self.last_body = self.body(int(head.split()[1]))
        elif head.startswith((b"RESERVED ", b"FOUND ")):
            self.last_body = self.body(int(head.split()[2]))
        return head

    def body(self, size: int) -> bytes:
        data = self.f.read(size + 2)
        if len(data) != size + 2:
            raise ConnectionError("connection closed in a body")
        return data[:-2]

    def stats(self, what: bytes = b"stats") -> dict[str, str]:
        self.send(what + b"\r\n")
        head = self.line()
        if not head.startswith(b"OK "):
            raise RuntimeError(f"{what!r}: {head!r}")
        text = self.body(int(head.split()[1])).decode()
        return {k.strip(): v.strip() for k, v in (ln.split(":", 1) for ln in text.splitlines()[1:])}


# --------------------------------------------------------------------------- the ledger


@dataclass
class Ledger:
    """What the clients sent and what the server acknowledged, by job body."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    put_sent: set[bytes] = field(default_factory=set)
    put_acked: dict[bytes, int] = field(default_factory=dict)
    del_sent: set[bytes] = field(default_factory=set)
    del_acked: set[bytes] = field(default_factory=set)
    delivered: dict[bytes, int] = field(default_factory=dict)  # reserves seen by consumers
    errors: list[str] = field(default_factory=list)
    max_wait: float = 0.0  # the longest a client waited for one reply

    def note_wait(self, seconds: float) -> None:
        with self.lock:
            self.max_wait = max(self.max_wait, seconds)

    def error(self, text: str) -> None:
        with self.lock:
            if len(self.errors) < 50:
                self.errors.append(text)


class Load:
    """Producer and consumer threads against one server."""

    def __init__(self, port: int, ledger: Ledger, tag: str, producers: int, consumers: int):
        self.port = port
        self.ledger = ledger
        self.tag = tag
        self.stop = threading.Event()
        self.killed = threading.Event()  # set just before a kill: errors after it are expected
        self.threads = [
            threading.Thread(target=self._producer, args=(i,), daemon=True)
            for i in range(producers)
        ] + [threading.Thread(target=self._consumer, daemon=True) for _ in range(consumers)]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def join(self, timeout: float = OP_TIMEOUT + 5) -> None:
        self.stop.set()
        deadline = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.0, deadline - time.monotonic()))
        alive = [t for t in self.threads if t.is_alive()]
        if alive:
            self.ledger.error(f"{len(alive)} client thread(s) still blocked after {timeout} s")

    def _failed(self, what: str, e: BaseException) -> None:
        if not self.killed.is_set():
            self.ledger.error(f"{what}: {e!r}")

    def _timed(self, c: Client, data: bytes) -> bytes:
        t0 = time.monotonic()
        c.send(data)
        head = c.line()
        self.ledger.note_wait(time.monotonic() - t0)
        return head

    def _producer(self, k: int) -> None:
        led = self.ledger
        try:
            c = Client(self.port)
        except OSError as e:
            return self._failed("connect", e)
        try:
            tube = TUBES[k % len(TUBES)].encode()
            if c.cmd(b"use " + tube) != b"USING " + tube:
                raise RuntimeError("use failed")
            n = 0
            while not self.stop.is_set():
                n += 1
                body = f"{self.tag}-p{k}-{n}-".encode() + os.urandom(8).hex().encode()
                with led.lock:
                    led.put_sent.add(body)
                head = self._timed(c, b"put %d 0 120 %d\r\n%s\r\n" % (n % 3, len(body), body))
                if head.startswith(b"INSERTED "):
                    with led.lock:
                        led.put_acked[body] = int(head.split()[1])
                else:
                    led.error(f"put answered {head!r}")
                    if head != b"OUT_OF_MEMORY":
                        return
        except (OSError, ConnectionError, RuntimeError) as e:
            self._failed("producer", e)
        finally:
            c.close()

    def _consumer(self) -> None:
        led = self.ledger
        try:
            c = Client(self.port)
        except OSError as e:
            return self._failed("connect", e)
        try:
            for tube in TUBES:
                c.cmd(b"watch " + tube.encode())
            c.cmd(b"ignore default")
            while not self.stop.is_set():
                head = self._timed(c, b"reserve-with-timeout 1\r\n")
                if head in (b"TIMED_OUT", b"DEADLINE_SOON"):
                    continue
                if not head.startswith(b"RESERVED "):
                    led.error(f"reserve answered {head!r}")
                    return
                _, job_id, size = head.split()
                body = c.body(int(size))
                with led.lock:
                    led.delivered[body] = led.delivered.get(body, 0) + 1
                    led.del_sent.add(body)
                head = self._timed(c, b"delete %s\r\n" % job_id)
                if head == b"DELETED":
                    with led.lock:
                        led.del_acked.add(body)
                else:
                    led.error(f"delete {int(job_id)} answered {head!r}")
        except (OSError, ConnectionError) as e:
            self._failed("consumer", e)
        finally:
            c.close()


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


def drain(port: int, deadline_s: float = DRAIN_TIMEOUT) -> tuple[dict[bytes, list[int]], dict]:
    """Reserve and delete every job of the test tubes: body -> ids it was found under."""
    found: dict[bytes, list[int]] = {}
    c = Client(port)
    try:
        for tube in TUBES:
            c.cmd(b"watch " + tube.encode())
        c.cmd(b"ignore default")
        deadline = time.monotonic() + deadline_s
        left: dict[str, int] = {}
        while time.monotonic() < deadline:
            head = c.cmd(b"reserve-with-timeout 0")
            if head.startswith(b"RESERVED "):
                job_id = head.split()[1]
                found.setdefault(c.last_body, []).append(int(job_id))
                if c.cmd(b"delete " + job_id) != b"DELETED":
                    raise RuntimeError(f"drain: delete {job_id!r} failed")
                continue
            if head not in (b"TIMED_OUT", b"DEADLINE_SOON"):
                raise RuntimeError(f"drain: reserve answered {head!r}")
            left = {}
            for tube in TUBES:
                st = c.stats(b"stats-tube " + tube.encode())
                if st.get("name") is None:
                    continue
                for key in ("ready", "reserved", "delayed", "buried"):
                    left[key] = left.get(key, 0) + int(st.get(f"current-jobs-{key}", "0"))
            if not any(left.values()):
                break
            time.sleep(0.05)  # reserved by a connection that is going away, or delayed
        return found, left
    finally:
        c.close()


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
        if kill == "acceptor":
            return _acceptor_round(server, load, ledger, seconds, tag, rng)
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


def _acceptor_round(
    server: Server, load: Load, ledger: Ledger, seconds: float, tag: str, rng: random.Random
) -> Result:
    """SIGKILL the acceptor (which, colocated, also runs shard 0): its clients lose their
    connections, the supervisor restarts it, shard 0 replays its log; drain that server."""
    assert server.proc is not None
    time.sleep(seconds * rng.uniform(0.6, 1.0))
    victim = role_pids(server.proc.pid).get("acceptor")
    if victim is None:
        raise RuntimeError("no acceptor process found (is this a shardq server?)")
    load.killed.set()
    os.kill(victim, signal.SIGKILL)
    load.join()
    deadline = time.monotonic() + 15
    while role_pids(server.proc.pid).get("acceptor") in (None, victim):
        if time.monotonic() > deadline:
            ledger.error("the acceptor was not restarted within 15 s")
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
    ap.add_argument("--kill", choices=("group", "supervisor", "shard", "acceptor"), default="group")
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
