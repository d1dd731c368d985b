"""The supervisor: binds the port, starts every process, restarts the ones that die.

It binds the listening socket itself and passes it to the acceptor, so a restarted
acceptor keeps the same port and `-p 0` is resolved before anything else starts.
Signals become actions: SIGTERM/SIGINT stop everything (children get SIGTERM, then
SIGKILL after a grace period) and remove the ipc socket files; SIGUSR1 puts the
server in drain mode; SIGHUP is logged (reload is not supported yet).
"""

from __future__ import annotations

import dataclasses
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import NoReturn

from shardq.config import Config

STOP_GRACE_S = 3.0  #: how long children get to exit on SIGTERM before SIGKILL
START_TIMEOUT_S = 30.0  #: how long start-up may take before the supervisor gives up
CHECK_PERIOD_S = 0.05  #: how often dead children are looked for
RESTART_BACKOFF_S = (0.0, 0.1, 0.5, 1.0)  #: delay before the n-th quick restart in a row


@dataclass
class Child:
    """One supervised process: how to start it and its current incarnation."""

    name: str
    argv: list[str]
    pass_fds: tuple[int, ...] = ()
    proc: subprocess.Popen | None = None
    started: float = 0.0
    quick_restarts: int = 0
    extra: list[str] = field(default_factory=list)

    def start(self) -> None:
        # Children start with SIGUSR1 blocked and unblock it once their handler is in place,
        # so a drain request during their start-up is delivered, not fatal.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
        try:
            self.proc = subprocess.Popen(self.argv + self.extra, pass_fds=self.pass_fds)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})
        self.started = time.monotonic()


def bind_listener(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.set_inheritable(True)
    return sock


class LayoutError(Exception):
    """The log directory was written with another number of shards."""


def check_layout(wal_dir: str, shards: int) -> None:
    """Tubes are spread by crc32(name) % shards: a log written with N shards needs N shards."""
    path = os.path.join(wal_dir, "layout")
    try:
        with open(path) as f:
            written = int(f.read().split("=")[1])
    except FileNotFoundError:
        with open(path, "w") as f:
            f.write(f"shards={shards}\n")
        return
    if written != shards:
        raise LayoutError(
            f"{wal_dir} holds the log of {written} shards: start with --shards {written}, "
            "or drain the jobs into a new server (re-partitioning a log is not supported yet)"
        )


def child_argv(role: str, *args: object) -> list[str]:
    return [sys.executable, "-m", "shardq.processes.child", role, *map(str, args)]


class Supervisor:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.listener = bind_listener(config.listen, config.port)  # first: it may fail
        self.own_run_dir = config.run_dir is None
        self.run_dir = config.run_dir or tempfile.mkdtemp(prefix="shardq-")
        os.makedirs(self.run_dir, exist_ok=True)
        self.state_dir = config.wal_dir or self.run_dir
        os.makedirs(self.state_dir, exist_ok=True)
        if config.wal_dir is not None:
            check_layout(config.wal_dir, config.shards)
        self.stopping = False
        self.draining = False
        n = config.shards
        self.children = [
            Child(
                "coordinator",
                child_argv("coordinator", self.run_dir, self.state_dir, n, config.segment_bytes),
            )
        ]
        self.children += [
            Child(f"shard {i}", child_argv("shard", i, n, self.run_dir, *self.shard_args(i)))
            for i in range(n)
            if i != self.hosted_shard()
        ]
        fd = self.listener.fileno()
        self.ready_r, self.ready_w = os.pipe()
        argv = self.acceptor_argv(self.ready_w)
        self.acceptor = Child("acceptor", argv, pass_fds=(fd, self.ready_w))
        self.children.append(self.acceptor)

    def hosted_shard(self) -> int | None:
        """The shard the acceptor runs in its own process (`colocate`): shard 0, or none."""
        return 0 if self.config.colocate else None

    def shard_args(self, shard: int) -> list[object]:
        """What a shard needs besides its place: event log directory, server id, log."""
        events = self.config.events_dir or ""
        return [events, self.config.server_id, *self.wal_args(shard)]

    def wal_args(self, shard: int) -> list[object]:
        """A shard's log directory, segment size and fsync policy (-1: never); none without -b."""
        cfg = self.config
        if cfg.wal_dir is None:
            return []
        fsync = -1 if cfg.fsync_ms is None else cfg.fsync_ms
        return [os.path.join(cfg.wal_dir, f"shard-{shard}"), cfg.segment_bytes, fsync]

    def acceptor_argv(self, ready_fd: int) -> list[str]:
        fd, cfg = self.listener.fileno(), self.config
        argv = child_argv("acceptor", fd, self.run_dir, cfg.shards, cfg.max_job_size, ready_fd)
        hosted = self.hosted_shard()
        if hosted is not None:
            argv += ["--host", str(hosted), *map(str, self.shard_args(hosted))]
        return argv

    def log(self, message: str) -> None:
        print(f"shardq: {message}", file=sys.stderr, flush=True)

    def on_signal(self, signum: int, _frame: object) -> None:
        if signum in (signal.SIGTERM, signal.SIGINT):
            self.stopping = True
        elif signum == signal.SIGUSR1:
            self.draining = True
            self.acceptor.extra = ["--draining"]
            if self.acceptor.proc is not None:
                self.acceptor.proc.send_signal(signal.SIGUSR1)
        elif signum == signal.SIGHUP:
            self.log("SIGHUP: configuration reload is not supported yet; ignored")

    def run(self) -> int:
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGHUP):
            signal.signal(signum, self.on_signal)
        try:
            for child in self.children:
                child.start()
            if not self.wait_ready():
                return 1
            host, port = self.listener.getsockname()[:2]
            print(f"shardq listening on {host}:{port}", flush=True)
            if self.config.verbose:
                self.log(f"pid {os.getpid()}, {self.config.shards} shards, run dir {self.run_dir}")
            while not self.stopping:
                time.sleep(CHECK_PERIOD_S)
                self.restart_dead()
        finally:
            self.stop()
        return 0

    def wait_ready(self) -> bool:
        """Wait until the acceptor reaches every process, so "listening" means serving."""
        os.close(self.ready_w)
        # a restarted acceptor has no start-up pipe to write to
        self.acceptor.argv = self.acceptor_argv(-1)
        self.acceptor.pass_fds = (self.listener.fileno(),)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self.stopping and time.monotonic() < deadline:
            ready, _, _ = select.select([self.ready_r], [], [], CHECK_PERIOD_S)
            if ready and os.read(self.ready_r, 64):
                os.close(self.ready_r)
                return True
            self.restart_dead()
        self.log(f"processes did not come up within {START_TIMEOUT_S:.0f} s")
        return False

    def restart_dead(self) -> None:
        for child in self.children:
            if child.proc is None or child.proc.poll() is None or self.stopping:
                continue
            code = child.proc.returncode
            quick = time.monotonic() - child.started < 5.0
            child.quick_restarts = child.quick_restarts + 1 if quick else 0
            delay = RESTART_BACKOFF_S[min(child.quick_restarts, len(RESTART_BACKOFF_S) - 1)]
            self.log(f"{child.name} (pid {child.proc.pid}) exited with status {code}; restarting")
            time.sleep(delay)
            child.start()

    def stop(self) -> None:
        """The acceptor first (no new commands), then the shards (they sync their logs)."""
        deadline = time.monotonic() + STOP_GRACE_S
        for group in ([self.acceptor], [c for c in self.children if c is not self.acceptor]):
            live = [c.proc for c in group if c.proc is not None and c.proc.poll() is None]
            for proc in live:
                proc.send_signal(signal.SIGTERM)
            for proc in live:
                try:
                    proc.wait(max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.listener.close()
        if self.own_run_dir:
            shutil.rmtree(self.run_dir, ignore_errors=True)
        else:
            for name in os.listdir(self.run_dir):
                if name == "coordinator" or name.startswith("shard-"):
                    os.unlink(os.path.join(self.run_dir, name))


def serve(config: Config) -> int:
    os.environ["SHARDQ_SUPERVISOR_PID"] = str(os.getpid())  # children check they are not orphans
    try:
        supervisor = Supervisor(config)
    except LayoutError as e:
        print(f"shardq: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(
            f"shardq: cannot listen on {config.listen}:{config.port}: {e.strerror}", file=sys.stderr
        )
        return 1
    return supervisor.run()


def exec_supervisor(config: Config) -> NoReturn:
    """Become the supervisor: the same process (same pid, so signals and service managers
    see no difference), re-executed without the CLI's libraries, which would otherwise stay
    resident for the server's whole life (≈ 18 MiB of RSS, measured)."""
    sys.stdout.flush()
    sys.stderr.flush()
    argv = [
        sys.executable,
        "-m",
        "shardq.processes.supervisor",
        json.dumps(dataclasses.asdict(config)),
    ]
    os.execv(sys.executable, argv)


if __name__ == "__main__":
    sys.exit(serve(Config(**json.loads(sys.argv[1]))))
