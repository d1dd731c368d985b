"""The supervisor: binds the port, starts every process, restarts the ones that die.

It binds the listening socket itself and passes it to every serving process (acceptor),
so a restarted one keeps the same port and `-p 0` is resolved before anything else starts.
Signals become actions: SIGTERM/SIGINT stop everything (children get SIGTERM, then
SIGKILL after a grace period) and remove the ipc socket files; SIGUSR1 puts the
server in drain mode; SIGHUP reads the config file again and applies what can change
without a restart (`reload_config`, `processes/live.py`).

It logs through `shardq.log` as ``shardq[supervisor]`` and passes the config's `verbose`
to every child (``--verbose``), so `-V` reaches every process. Its one line on stdout,
``shardq listening on HOST:PORT`` (`LISTENING`), is an interface: tests and tools parse it.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
import select
import shutil
import signal
import socket
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from shardq.config import Config, ConfigError, ConfigWarning, read_config, split_host_port
from shardq.log import setup as setup_logging
from shardq.metrics import ADDRESS_FILE
from shardq.processes import live, quota
from shardq.processes.child import child_argv, preload, run_and_exit
from shardq.processes.forked import Forked, TimeoutExpired, fork_child
from shardq.processes.listener import bind_listener, close_listener, describe, listening_address
from shardq.processes.spawn import python_m
from shardq.processes.startup import LayoutError, StartupError, become, check_layout, find_user

STOP_GRACE_S = 3.0  #: how long children get to exit on SIGTERM before SIGKILL
START_TIMEOUT_S = 30.0  #: how long start-up may take before the supervisor gives up
CHECK_PERIOD_S = 0.05  #: how often dead children are looked for
RESTART_BACKOFF_S = (0.0, 0.1, 0.5, 1.0)  #: delay before the n-th quick restart in a row
#: held from the exec until `run` handles them (SIGHUP would end a process with no handler)
STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
#: children start with these blocked and unblock them once their handlers are in place
CHILD_HELD = {signal.SIGUSR1, signal.SIGHUP}
#: The line on stdout that says the server serves (`shardq.bench.procs.listening_port`).
LISTENING = "shardq listening on {host}:{port}"

log = logging.getLogger(__name__)


@dataclass
class Child:
    """One supervised process: how to start it and its current incarnation."""

    name: str
    argv: list[str]
    pass_fds: tuple[int, ...] = ()
    proc: Forked | None = None
    started: float = 0.0
    quick_restarts: int = 0
    extra: list[str] = field(default_factory=list)
    live_args: list[str] = field(default_factory=list)  # settings changed by a SIGHUP

    def start(self) -> None:
        # Children start with SIGUSR1 and SIGHUP blocked and unblock them once their handlers
        # are in place, so a drain or reload during their start-up is delivered, not fatal.
        signal.pthread_sigmask(signal.SIG_BLOCK, CHILD_HELD)
        try:
            argv = self.argv + self.extra + self.live_args
            self.proc = fork_child(self.name, self.pass_fds, functools.partial(run_and_exit, argv))
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, CHILD_HELD)
        self.started = time.monotonic()


class Supervisor:
    def __init__(
        self, config: Config, listen_fd: int | None = None, reload: dict[str, Any] | None = None
    ) -> None:
        """`listen_fd`: the listening socket the CLI bound before the exec (else bound here).
        `reload`: how to read the config again on SIGHUP (config_file, overrides, flags)."""
        self.config = config
        self.reload = reload
        self.reload_requested = False
        if listen_fd is None:
            self.listener = bind_listener(config.listen, config.port)  # first: it may fail
        else:
            self.listener = socket.socket(fileno=listen_fd)
        self.metrics_listener = None  # the metrics endpoint's HTTP port (metrics.listen)
        if config.metrics_listen is not None:
            self.metrics_listener = bind_listener(*split_host_port(config.metrics_listen))
        if config.user is not None:  # beanstalkd's -u: once bound, before any file is made
            become(find_user(config.user))
        self.own_run_dir = config.run_dir is None
        self.run_dir = config.run_dir or tempfile.mkdtemp(prefix="shardq-")
        os.makedirs(self.run_dir, exist_ok=True)
        self.state_dir = config.wal_dir or self.run_dir
        os.makedirs(self.state_dir, exist_ok=True)
        if config.wal_dir is not None:
            check_layout(config.wal_dir, config.shards)
        self.stopping = False
        self.draining = False
        preload()  # once here, not in every child: they are forked with it imported
        quota.install(config.max_jobs, config.max_memory, config.shards)  # shared by the forks
        coordinator = child_argv(
            "coordinator",
            state_dir=self.state_dir,
            segment_bytes=config.segment_bytes,
            **self.common_options(),
        )
        self.children = [Child("coordinator", coordinator)]
        hosted = {self.hosted_shard(i) for i in range(config.serving)}
        self.children += [
            Child(f"shard {i}", child_argv("shard", i, **self.common_options(), **self.store(i)))
            for i in range(config.shards)
            if i not in hosted
        ]
        fd = self.listener.fileno()
        self.ready_r, self.ready_w = os.pipe()
        self.acceptors = [
            Child(
                "acceptor" if config.serving == 1 else f"acceptor {i}",
                self.acceptor_argv(i, self.ready_w),
                pass_fds=(fd, self.ready_w),
            )
            for i in range(config.serving)
        ]
        self.children += self.acceptors
        if self.metrics_listener is not None:
            self.children.append(self.metrics_child(self.metrics_listener))

    def metrics_child(self, sock: socket.socket) -> Child:
        """The metrics process, given the HTTP port and the roles that must run; the port
        it got is written to RUN_DIR/metrics-address (with port 0, which one) and logged."""
        host, port = listening_address(sock)
        path = os.path.join(self.run_dir, ADDRESS_FILE)
        with open(path + ".tmp", "w") as f:
            f.write(f"{host}:{port}\n")
        os.replace(path + ".tmp", path)
        log.info("metrics on http://%s:%s/", host, port)
        roles = ",".join(child.name for child in self.children)
        options = {"serving": self.config.serving, "roles": roles, **self.common_options()}
        options["no_serving_stats"] = not self.config.colocate  # no hosted shard brings them
        argv = child_argv("metrics", listen_fd=sock.fileno(), **options)
        return Child("metrics", argv, pass_fds=(sock.fileno(),))

    def hosted_shard(self, index: int) -> int | None:
        """The shard serving process `index` runs in its own process (`colocate`): shard
        `index`, or none."""
        return index if self.config.colocate else None

    def common_options(self) -> dict[str, object]:
        """What every child is told: the run directory, the shard count, the -V count."""
        return {
            "run_dir": self.run_dir,
            "shards": self.config.shards,
            "verbose": self.config.verbose,
            "log_level": self.config.log_level,
            "log_format": self.config.log_format,
            "stats_yaml": self.config.stats_yaml,
        }

    def store(self, shard: int) -> dict[str, object]:
        """A shard's options besides its place: event log directory, server id, and its
        write-ahead log (directory, segment size, fsync policy, -1: never) with -b."""
        cfg = self.config
        options: dict[str, object] = {
            "events_dir": cfg.events_dir,
            "server_id": cfg.server_id,
            "metrics": cfg.metrics_listen is not None,  # keep the histograms /metrics serves
        }
        if cfg.wal_dir is not None:
            options["wal_dir"] = os.path.join(cfg.wal_dir, f"shard-{shard}")
            options["segment_bytes"] = cfg.segment_bytes
            options["fsync_ms"] = -1 if cfg.fsync_ms is None else cfg.fsync_ms
        return options

    def acceptor_argv(self, index: int, ready_fd: int) -> list[str]:
        hosted = self.hosted_shard(index)
        return child_argv(
            "acceptor",
            index=index,
            serving=self.config.serving,
            listen_fd=self.listener.fileno(),
            max_job_size=self.config.max_job_size,
            poll_us=self.config.poll_us,
            max_connections=self.config.max_connections,  # each takes ceil(N / serving)
            max_output_bytes=self.config.max_output_bytes,
            allow=",".join(self.config.allow),
            tls_cert=self.config.tls_cert,
            tls_key=self.config.tls_key,
            tls_client_ca=self.config.tls_client_ca,
            ready_fd=ready_fd,
            host=hosted,
            **self.common_options(),
            **(self.store(hosted) if hosted is not None else {}),
        )

    def on_signal(self, signum: int, _frame: object) -> None:
        if signum in (signal.SIGTERM, signal.SIGINT):
            self.stopping = True
        elif signum == signal.SIGUSR1:
            self.draining = True
            for acceptor in self.acceptors:
                acceptor.extra = ["--draining"]
                if acceptor.proc is not None:
                    acceptor.proc.send_signal(signal.SIGUSR1)
        elif signum == signal.SIGHUP:
            self.reload_requested = True  # the main loop reloads: not inside a handler

    def run(self) -> int:
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGHUP):
            signal.signal(signum, self.on_signal)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # held since exec_supervisor
        try:
            for child in self.children:
                child.start()
            if not self.wait_ready():
                return 0 if self.stopping else 1  # stopping: told to stop while starting
            host, port = listening_address(self.listener)
            print(LISTENING.format(host=host, port=port), flush=True)
            log.info(
                "pid %d, %d shards, %d serving processes, run dir %s",
                os.getpid(),
                self.config.shards,
                self.config.serving,
                self.run_dir,
            )
            while not self.stopping:
                time.sleep(CHECK_PERIOD_S)
                if self.reload_requested:
                    self.reload_requested = False
                    self.reload_config()
                self.restart_dead()
        finally:
            self.stop()
        return 0

    def reload_config(self) -> None:
        """SIGHUP: read the config file again (the flags still win); apply what a running
        server can change (`live.Live`: logging, limits, allow), log each change, and
        refuse with one line each what needs a restart."""
        if self.reload is None:
            log.warning("SIGHUP: started without the CLI, no config file to read again")
            return
        path = self.reload["config_file"]
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ConfigWarning)
                new = read_config(
                    Path(path) if path else None, self.reload["overrides"], self.reload["flags"]
                )
        except ConfigError as e:
            log.error("SIGHUP: %s; nothing changed", e)
            return
        for w in caught:
            log.warning("SIGHUP: %s", w.message)
        applied, refused = live.changes(self.config, new)
        limits, refused = quota.reload(refused, new)
        for key, before, after in refused:
            log.warning("SIGHUP: %s needs a restart to change (%r -> %r); kept", key, before, after)
        for key, before, after in applied + limits:
            log.warning("SIGHUP: %s %r -> %r", key, before, after)
        if limits:
            self.config = dataclasses.replace(
                self.config, **{name: getattr(new, name) for name in quota.LIMIT_FIELDS}
            )
        if not applied:
            if not limits:
                log.warning("SIGHUP: nothing to change")
            return
        fields = {name: getattr(new, name) for name in live.Live._fields}
        self.config = dataclasses.replace(self.config, **fields)
        settings = live.of(self.config)
        setup_logging("supervisor", settings.verbose, settings.log_level, settings.log_format)
        live.write(self.run_dir, settings)
        for child in self.children:
            child.live_args = live.argv(settings, acceptor=child in self.acceptors)
            if child.proc is not None and child.proc.poll() is None:
                child.proc.send_signal(signal.SIGHUP)

    def wait_ready(self) -> bool:
        """Wait until every serving process reaches every process, so "listening" means
        serving (each writes one line to the start-up pipe)."""
        os.close(self.ready_w)
        for i, acceptor in enumerate(self.acceptors):
            # a restarted serving process has no start-up pipe to write to
            acceptor.argv = self.acceptor_argv(i, -1)
            acceptor.pass_fds = (self.listener.fileno(),)
        deadline = time.monotonic() + START_TIMEOUT_S
        lines = 0
        while not self.stopping and time.monotonic() < deadline:
            ready, _, _ = select.select([self.ready_r], [], [], CHECK_PERIOD_S)
            if ready:
                lines += os.read(self.ready_r, 4096).count(b"\n")
                if lines >= len(self.acceptors):
                    os.close(self.ready_r)
                    return True
            self.restart_dead()
        if not self.stopping:
            log.error("processes did not come up within %.0f s", START_TIMEOUT_S)
        return False

    def restart_dead(self) -> None:
        for child in self.children:
            if child.proc is None or child.proc.poll() is None or self.stopping:
                continue
            code = child.proc.returncode
            quick = time.monotonic() - child.started < 5.0
            child.quick_restarts = child.quick_restarts + 1 if quick else 0
            delay = RESTART_BACKOFF_S[min(child.quick_restarts, len(RESTART_BACKOFF_S) - 1)]
            log.warning(
                "%s (pid %d) exited with status %s; restarting", child.name, child.proc.pid, code
            )
            time.sleep(delay)
            child.start()

    def stop(self) -> None:
        """The acceptor first (no new commands), then the shards (they sync their logs)."""
        deadline = time.monotonic() + STOP_GRACE_S
        rest = [c for c in self.children if c not in self.acceptors]
        for group in (self.acceptors, rest):
            running = [c.proc for c in group if c.proc is not None and c.proc.poll() is None]
            for proc in running:
                proc.send_signal(signal.SIGTERM)
            for proc in running:
                try:
                    proc.wait(max(0.0, deadline - time.monotonic()))
                except TimeoutExpired:
                    proc.kill()
                    proc.wait()
        close_listener(self.listener)
        if self.metrics_listener is not None:
            self.metrics_listener.close()
        if self.own_run_dir:
            shutil.rmtree(self.run_dir, ignore_errors=True)
        else:
            for name in os.listdir(self.run_dir):
                if name in ("coordinator", ADDRESS_FILE) or name.startswith(("shard-", "handoff-")):
                    os.unlink(os.path.join(self.run_dir, name))


def serve(
    config: Config, listen_fd: int | None = None, reload: dict[str, Any] | None = None
) -> int:
    setup_logging("supervisor", config.verbose, config.log_level, config.log_format)
    log.info("config: %s", config.source)
    os.environ["SHARDQ_SUPERVISOR_PID"] = str(os.getpid())  # children check they are not orphans
    try:
        supervisor = Supervisor(config, listen_fd, reload)
    except (LayoutError, StartupError) as e:
        log.error("%s", e)
        return 2
    except OSError as e:
        log.error("cannot listen on %s: %s", describe(config.listen, config.port), e.strerror)
        return 1
    return supervisor.run()


def hold_stop_signals() -> None:
    """Ctrl-C or SIGTERM before `run` handles them would leave a traceback and the temporary
    run dir: they wait, blocked (a blocked signal stays pending across exec), until then."""
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)


def run_supervisor(config: Config, listener: socket.socket, reload: dict[str, Any]) -> int:
    """Become the supervisor in this process (one that loaded no CLI library: `shardqd`)."""
    hold_stop_signals()
    return serve(config, listener.detach(), reload)


def exec_supervisor(config: Config, listener: socket.socket, reload: dict[str, Any]) -> NoReturn:
    """Become the supervisor: the same process (same pid, so signals and service managers
    see no difference), re-executed without the CLI's libraries, which would otherwise stay
    resident for the server's whole life (≈ 18 MiB of RSS, measured). `listener` (bound by
    the CLI, inheritable) crosses the exec by its descriptor number; `reload` says how to
    read the config again on SIGHUP."""
    sys.stdout.flush()
    sys.stderr.flush()
    hold_stop_signals()
    config_json = json.dumps(dataclasses.asdict(config))
    fd = str(listener.fileno())
    argv = python_m("shardq.processes.supervisor", config_json, fd, json.dumps(reload))
    os.execv(sys.executable, argv)


if __name__ == "__main__":
    fd = int(sys.argv[2]) if len(sys.argv) > 2 else None
    how = json.loads(sys.argv[3]) if len(sys.argv) > 3 else None
    fields = json.loads(sys.argv[1])
    fields["allow"] = tuple(fields["allow"])  # a JSON list
    sys.exit(serve(Config(**fields), fd, how))
