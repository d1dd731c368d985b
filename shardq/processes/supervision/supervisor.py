"""The supervisor: binds the port, starts every process, restarts the ones that die.

It binds the listening sockets first (ports.py) and passes them to the children: every
serving process gets the beanstalk port, so a restarted one keeps it and `-p 0` is
resolved before anything else starts.
Signals become actions: SIGTERM/SIGINT stop everything (children get SIGTERM, then
SIGKILL after a grace period) and remove the ipc socket files; SIGUSR1 puts the
server in drain mode; SIGHUP reads the config file again and applies what can change
without a restart (`reload_config`, `processes/common/live.py`).

It logs through `shardq.log` as ``shardq[supervisor]`` and passes the config's `verbose`
to every child (``--verbose``), so `-V` reaches every process. Its one line on stdout,
``shardq listening on HOST:PORT`` (`ports.LISTENING`), is an interface: tests and tools
parse it.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import select
import signal
import socket
import sys
import time
from typing import Any, NoReturn

from shardq.cluster.routing import SPREAD
from shardq.config import Config
from shardq.log import setup as setup_logging
from shardq.metrics import ADDRESS_FILE
from shardq.processes.common import live, quota
from shardq.processes.common.listener import describe, listening_address, why
from shardq.processes.common.procname import set_name, set_title
from shardq.processes.common.settings import ServingSettings
from shardq.processes.supervision import children as roles
from shardq.processes.supervision.children import Child, LayoutError, log_routing, preload
from shardq.processes.supervision.forked import TimeoutExpired
from shardq.processes.supervision.ports import ListenError, Ports
from shardq.processes.supervision.reload import Reloader
from shardq.processes.supervision.spawn import python_m
from shardq.processes.supervision.startup import (
    StartupError,
    become,
    find_user,
    private_temp_dir,
)

STOP_GRACE_S = 3.0  #: how long children get to exit on SIGTERM before SIGKILL
START_TIMEOUT_S = 30.0  #: how long start-up may take before the supervisor gives up
CHECK_PERIOD_S = 0.05  #: how often dead children are looked for
RESTART_BACKOFF_S = (0.0, 0.1, 0.5, 1.0)  #: delay before the n-th quick restart in a row
#: held from the exec until `run` handles them (SIGHUP would end a process with no handler)
STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}

log = logging.getLogger(__name__)


def serving_of(child: Child) -> ServingSettings:
    """A serving process's settings (the supervisor keeps those children apart)."""
    assert isinstance(child.settings, ServingSettings)
    return child.settings


class Supervisor:
    def __init__(
        self, config: Config, listen_fd: int | None = None, reload: dict[str, Any] | None = None
    ) -> None:
        """`listen_fd`: the listening socket the CLI bound before the exec (else bound here).
        `reload`: how to read the config again on SIGHUP (config_file, overrides, flags)."""
        self.config = config
        self.reload_requested = False
        self.stopped_by = ""  # the signal that stops the server
        self.ports = ports = Ports(config, listen_fd)  # first: it may fail
        if config.user is not None:  # beanstalkd's -u: once bound, before any file is made
            become(find_user(config.user))
        self.own_run_dir = config.run_dir is None
        self.run_dir = config.run_dir or private_temp_dir("shardq-")
        os.makedirs(self.run_dir, exist_ok=True)
        self.state_dir = config.wal_dir or self.run_dir
        os.makedirs(self.state_dir, exist_ok=True)
        #: how tubes are spread (cluster/routing.py): SPREAD, or what an old log recorded
        self.routing = SPREAD if config.wal_dir is None else log_routing(config)
        self.reloader = Reloader(reload, self.routing)  # SIGHUP
        self.stopping = False
        self.draining = False
        try:
            ports.bind_fronts(config, self.run_dir)
        except ListenError:
            if self.own_run_dir:
                remove_tree(self.run_dir)
            raise
        quota.install(config.max_jobs, config.max_memory, config.shards)  # shared by the forks
        coordinator = roles.coordinator_settings(config, self.run_dir, self.state_dir)
        self.children = [Child(coordinator)]
        hosted = {roles.hosted_shard(config, i) for i in range(config.serving)}
        self.children += [
            Child(
                roles.shard_settings(config, self.run_dir, i),
                settle_from=roles.settle_from(config, None),
            )
            for i in range(config.shards)
            if i not in hosted
        ]
        self.ready_r, self.ready_w = os.pipe()
        self.serving_procs = [
            Child(
                self.serving_settings(i, self.ready_w),
                pass_fds=(*ports.serving_fds(), self.ready_w),
                settle_from=roles.settle_from(config, i) if i in hosted else (),
            )
            for i in range(config.serving)
        ]
        self.children += self.serving_procs
        self.frontends: list[Child] = []  # stopped with the serving processes, before the shards
        for name, sock in ports.fronts.items():
            fd = sock.fileno()
            self.frontends.append(
                Child(
                    roles.front_settings(roles.FRONT_SETTINGS[name], config, self.run_dir, fd),
                    (fd,),
                )
            )
        self.children += self.frontends
        #: the children that accept clients: their limits and allow-list change on SIGHUP
        self.doors = self.serving_procs + self.frontends
        if ports.metrics is not None:
            self.doors.append(self.metrics_child(ports.metrics))
            self.children.append(self.doors[-1])
        # once here, not in every child: they are forked with it imported
        preload(child.settings.ROLE for child in self.children)

    def metrics_child(self, sock: socket.socket) -> Child:
        """The metrics process, last: the HTTP port and the roles that must run. The port is
        written to RUN_DIR/metrics-address (with port 0, which one); `run` prints it too."""
        self.ports.write_metrics_address(self.run_dir)
        names = [child.name for child in self.children]
        settings = roles.metrics_settings(self.config, self.run_dir, sock.fileno(), names)
        return Child(settings, (sock.fileno(),))

    def serving_settings(self, index: int, ready_fd: int) -> ServingSettings:
        fds = (self.ports.listener.fileno(), self.ports.private_fd(), ready_fd)
        return roles.serving_settings(self.config, self.run_dir, index, fds, self.routing)

    def on_signal(self, signum: int, _frame: object) -> None:
        if signum in (signal.SIGTERM, signal.SIGINT):
            self.stopping = True
            self.stopped_by = signal.Signals(signum).name
        elif signum == signal.SIGUSR1:
            self.draining = True
            for serving_proc in self.serving_procs:
                serving_proc.settings = serving_of(serving_proc).drained()
                if serving_proc.proc is not None:
                    serving_proc.proc.send_signal(signal.SIGUSR1)
        elif signum == signal.SIGHUP:
            self.reload_requested = True  # the main loop reloads: not inside a handler

    def run(self) -> int:
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGHUP):
            signal.signal(signum, self.on_signal)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # held since exec_supervisor
        try:
            for child in self.children:
                if not self.stopping:  # told to stop while starting: start no more
                    child.start()
            gc.enable()  # off since `preload`
            if not self.wait_ready():
                return 0 if self.stopping else 1  # stopping: told to stop while starting
            self.ports.say_listening(self.config.log_format)
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
            log.info("stopping (%s)", self.stopped_by or "a failure")
            self.stop()
            log.info("stopped")
        return 0

    def reload_config(self) -> None:
        """SIGHUP: read the config again (`Reloader`); pass what changed live on to every
        child (`RUN_DIR/live.json` and a SIGHUP; later starts get it in their settings)."""
        reloaded = self.reloader.reload(self.config)
        if reloaded is None:
            return
        self.config, settings = reloaded
        if settings is None:
            return  # only the job limits: `quota` shares them with the children already
        live.write(self.run_dir, settings)
        for child in self.children:
            child.settings = child.settings.with_live(settings)
            if child.proc is not None and child.proc.poll() is None:
                child.proc.send_signal(signal.SIGHUP)

    def wait_ready(self) -> bool:
        """Wait until every serving process reaches every process, so "listening" means
        serving (each writes one line to the start-up pipe)."""
        os.close(self.ready_w)
        for serving_proc in self.serving_procs:
            # a restarted serving process has no start-up pipe to write to
            serving_proc.settings = serving_of(serving_proc).started()
            serving_proc.pass_fds = self.ports.serving_fds()
        deadline = time.monotonic() + START_TIMEOUT_S
        lines = 0
        while not self.stopping and time.monotonic() < deadline:
            ready, _, _ = select.select([self.ready_r], [], [], CHECK_PERIOD_S)
            if ready:
                lines += os.read(self.ready_r, 4096).count(b"\n")
                if lines >= len(self.serving_procs):
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
            child.start(again=True)
            assert child.proc is not None
            log.info("%s restarted (pid %d)", child.name, child.proc.pid)

    def stop(self) -> None:
        """The serving process first (no new commands), then the shards (they sync their logs)."""
        deadline = time.monotonic() + STOP_GRACE_S
        first = self.serving_procs + self.frontends
        rest = [c for c in self.children if c not in first]
        for group in (first, rest):
            running = [c.proc for c in group if c.proc is not None and c.proc.poll() is None]
            for proc in running:
                proc.send_signal(signal.SIGTERM)
            for proc in running:
                try:
                    proc.wait(max(0.0, deadline - time.monotonic()))
                except TimeoutExpired:
                    log.warning("pid %d did not stop within %.0f s; killed", proc.pid, STOP_GRACE_S)
                    proc.kill()
                    proc.wait()
        self.ports.close()
        if self.own_run_dir:
            remove_tree(self.run_dir)
        else:
            for name in os.listdir(self.run_dir):
                if name in ("coordinator", ADDRESS_FILE) or name.startswith(("shard-", "handoff-")):
                    os.unlink(os.path.join(self.run_dir, name))


def remove_tree(path: str) -> None:
    """Remove the run directory we made, whatever is left in it."""
    import shutil  # at the end only: not at every start (with zlib, bz2, lzma: ≈ 2 ms)

    shutil.rmtree(path, ignore_errors=True)


def serve(
    config: Config,
    listen_fd: int | None = None,
    reload: dict[str, Any] | None = None,
    program: str = "shardq",
) -> int:
    """Supervise a server of `config` on the bound `listen_fd` (None: bind it), named as
    `program` (procname.py); `reload`: how to read the config again on SIGHUP."""
    set_name(program)  # for pidof and pgrep from the start; the title once the port is known
    setup_logging("supervisor", config.verbose, config.log_level, config.log_format)
    log.info("config: %s", config.source)
    os.environ["SHARDQ_SUPERVISOR_PID"] = str(os.getpid())  # children check they are not orphans
    try:
        supervisor = Supervisor(config, listen_fd, reload)
    except (LayoutError, StartupError) as e:
        log.error("%s", e)
        return 2
    except ListenError as e:
        log.error("%s", e)
        return 1
    except OSError as e:
        log.error("cannot listen on %s: %s", describe(config.listen, config.port), why(e))
        return 1
    address = ":".join(listening_address(supervisor.ports.listener))
    set_title(f"{program}: supervisor {address}")
    return supervisor.run()


def hold_stop_signals() -> None:
    """Ctrl-C or SIGTERM before `run` handles them would leave a traceback and the temporary
    run dir: they wait, blocked (a blocked signal stays pending across exec), until then."""
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)


def run_supervisor(config: Config, listener: socket.socket, reload: dict[str, Any]) -> int:
    """Become the supervisor in this process (one that loaded no CLI library: `shardqd`)."""
    hold_stop_signals()
    return serve(config, listener.detach(), reload, program="shardqd")


def exec_supervisor(config: Config, listener: socket.socket, reload: dict[str, Any]) -> NoReturn:
    """Become the supervisor: the same process (same pid, so signals and service managers
    see no difference), re-executed without the CLI's libraries, which would otherwise stay
    resident for the server's whole life (≈ 18 MiB of RSS, measured). `listener` (bound by
    the CLI, inheritable) crosses the exec by its descriptor number; `reload` says how to
    read the config again on SIGHUP."""
    sys.stdout.flush()
    sys.stderr.flush()
    hold_stop_signals()
    config_json = json.dumps(config.as_dict())
    fd = str(listener.fileno())
    argv = python_m("shardq.processes.supervision.supervisor", config_json, fd, json.dumps(reload))
    os.execv(sys.executable, argv)


if __name__ == "__main__":
    fd = int(sys.argv[2]) if len(sys.argv) > 2 else None
    how = json.loads(sys.argv[3]) if len(sys.argv) > 3 else None
    fields = json.loads(sys.argv[1])
    fields["allow"] = tuple(fields["allow"])  # a JSON list
    sys.exit(serve(Config(**fields), fd, how))
