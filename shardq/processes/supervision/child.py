"""The supervised processes' entry: `run_and_exit` with a role's settings
(common/settings.py), in a process the supervisor forked (`supervision/forked.py`).

The supervisor builds every child's settings from the config (`children.py`) and the
forked child is handed the object itself: nothing is written out and parsed back. Each
role's `main` takes its settings whole. A child is named after its role label
(``/proc/PID/comm``: "sq shard 1"); `role_of_pid` reads it back (the tests and tools find
processes that way).

This is the one module that imports the roles (tests/unit/test_layers.py holds it).
"""

from __future__ import annotations

import ctypes
import logging
import os
import resource
import signal
import sys
from collections.abc import Callable
from typing import Any

from shardq.log import setup as setup_logging
from shardq.processes.common import collector, live, memreport
from shardq.processes.common.door import make_gate
from shardq.processes.common.procname import label_of_comm, set_title
from shardq.processes.common.settings import (
    BunqueueSettings,
    CoordinatorSettings,
    KestrelSettings,
    MetricsSettings,
    RoleSettings,
    ServingSettings,
    ShardSettings,
    WorkqSettings,
)
from shardq.protocol.replies import set_yaml_style

PR_SET_PDEATHSIG = 1

log = logging.getLogger(__name__)


def die_with_parent() -> None:
    """Linux: get SIGTERM when the supervisor dies, even by SIGKILL, so no child is orphaned."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        return
    if os.getppid() != int(os.environ.get("SHARDQ_SUPERVISOR_PID", os.getppid())):
        sys.exit(0)  # the supervisor died before prctl took effect


def role_of_pid(pid: int) -> str | None:
    """'coordinator', 'serving' (or 'serving process <i>' with several serving processes) or
    'shard <i>' for a live child of a shardq server; None for any other process."""
    try:
        with open(f"/proc/{pid}/comm") as f:
            return label_of_comm(f.read().rstrip("\n"))
    except OSError:
        return None


# ---------------------------------------------------------------------- the roles


def run_coordinator(settings: Any) -> None:
    from shardq.processes.coordinator import main as coordinator_main

    coordinator_main(settings)


def run_shard(settings: Any) -> None:
    from shardq.processes.shard.process import main as shard_main

    shard_main(settings)


def run_serving(settings: Any) -> None:
    from shardq.processes.serving import main as serving_main
    from shardq.processes.shard.process import open_core

    s: ServingSettings = settings
    hosted = None if s.hosted is None else open_core(s.hosted, s.common)
    serving_main(s, hosted, make_gate(s.door).tls)


def run_kestrel(settings: Any) -> None:
    from shardq.processes.frontends.kestrel import main as kestrel_main

    s: KestrelSettings = settings
    kestrel_main(s, make_gate(s.door), os.getppid())


def run_workq(settings: Any) -> None:
    from shardq.processes.frontends.workq import main as workq_main

    s: WorkqSettings = settings
    workq_main(s, make_gate(s.door))


def run_bunqueue(settings: Any) -> None:
    from shardq.processes.frontends.bunqueue import main as bunqueue_main

    s: BunqueueSettings = settings
    bunqueue_main(s, make_gate(s.door))


def run_metrics(settings: Any) -> None:
    from shardq.processes.metrics.http import MAX_OPEN
    from shardq.processes.metrics.process import main as metrics_main

    s: MetricsSettings = settings
    metrics_main(s, make_gate(s.door, cap=MAX_OPEN))


RUNNERS: dict[str, Callable[[Any], None]] = {
    CoordinatorSettings.ROLE: run_coordinator,
    ShardSettings.ROLE: run_shard,
    ServingSettings.ROLE: run_serving,
    MetricsSettings.ROLE: run_metrics,
    KestrelSettings.ROLE: run_kestrel,
    WorkqSettings.ROLE: run_workq,
    BunqueueSettings.ROLE: run_bunqueue,
}


def raise_fd_limit() -> None:
    """Open-file soft limit up to the hard limit (often 1,024 of 524,288): a serving
    process holds one descriptor per client besides its links to the other processes."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError) as e:
            log.warning("cannot raise the open-file limit from %d to %d: %s", soft, hard, e)


def main(settings: RoleSettings) -> None:
    die_with_parent()
    common, label = settings.common, settings.label
    set_title(f"shardq: {label}")
    setup_logging(label, common.verbose, common.log_level, common.log_format)
    raise_fd_limit()
    log.info("started (pid %d)", os.getpid())
    log.debug("settings: %r", settings)
    collector.tune()
    set_yaml_style(common.stats_yaml)
    live.listen(label, common.run_dir)
    memreport.listen(label, common.run_dir)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGHUP})  # blocked by the supervisor
    if settings.ROLE != ServingSettings.ROLE:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})
    RUNNERS[settings.ROLE](settings)


def run_and_exit(settings: RoleSettings) -> None:
    """Run a role, then leave with os._exit: each role has already closed its sockets and
    synced its log in its own `finally`, and interpreter shutdown must not be able to keep
    a stopped process alive."""
    code = 0
    try:
        main(settings)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if isinstance(e.code, str):
            log.error("%s", e.code)
    except BaseException:
        log.exception("stopped by an unexpected error")
        code = 1
    finally:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
