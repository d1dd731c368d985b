"""Starting the server, without the CLI library: read the config file, apply the flags,
check the directories and user, lock the directories, bind the listening socket, and
become the supervisor. `shardq serve` (shardq.cli) and `shardqd` (shardq.dropin, beanstalkd's
own command line) both end here; `shardqd` imports nothing more, so it binds within
≈ 0.05 s of being started.

A bad config file or flag, a directory the server could not use or a user it could not
become prints ONE line naming the key or flag and the problem to stderr and exits with
EXIT_CONFIG, before anything is bound or started (shardq.processes.supervision.startup); an address
that cannot be listened on exits with EXIT_LISTEN.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import warnings
from pathlib import Path
from typing import Any

from shardq.config import (
    FIELDS,
    Config,
    ConfigError,
    ConfigWarning,
    read_config,
    split_host_port,
)
from shardq.flags import (  # noqa: F401  (re-exported)
    EXIT_CONFIG,
    EXIT_FAILURE,
    EXIT_LISTEN,
    EXIT_OK,
    FLAGS,
)
from shardq.processes.common.listener import (
    bind_listener,
    close_listener,
    describe,
    tls_context,
    why,
)
from shardq.processes.supervision.startup import (
    LOCK_FILE,
    StartupError,
    check_start,
    lock_dirs,
    make_private,
)


def say(message: str) -> None:
    """One line of the command's own output on stderr: ``shardq: message``."""
    sys.stderr.write(f"shardq: {message}\n")
    sys.stderr.flush()


def build_config(config_file: Path | None, overrides: dict[str, Any]) -> Config:
    """Read the config file (if any), apply flag overrides; ConfigWarnings go to stderr.
    The Config's `source` names the file, or says that the defaults were used."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConfigWarning)
        config = read_config(config_file, overrides, FLAGS)
    for w in caught:
        say(f"warning: {w.message}")
    return config


def setting_name(name: str, overrides: dict[str, Any], config: Config) -> str:
    """How errors name a setting: the flag that set it (as load_config does), else the
    config file and key (a setting that is not a default came from one or the other)."""
    key = FIELDS[name][0]
    return f"flag {FLAGS[name]} ({key})" if name in overrides else f"{config.source}: {key}"


def check_and_bind(
    config: Config, overrides: dict[str, Any], bound: socket.socket | None = None
) -> socket.socket:
    """`shardq.processes.supervision.startup.check_start` on the directories and user of `config`,
    the lock on `-b` and `--run-dir` (one server per directory), held from here on through
    the exec into the supervisor, then the listening socket: bound here, before the
    processes start, so a client that connects at once waits in the backlog instead of
    being refused — or, `bound`, the socket `shardqd` bound already (`dropin.bind_early`).
    StartupError (or OSError from binding) leaves nothing behind."""
    given = {"wal_dir": config.wal_dir, "run_dir": config.run_dir, "events_dir": config.events_dir}
    dirs = [(setting_name(n, overrides, config), p) for n, p in given.items() if p is not None]
    user = None
    if config.user is not None:
        user = (setting_name("user", overrides, config), config.user)
    check_start(dirs, user)
    given = {"wal_dir": config.wal_dir, "run_dir": config.run_dir}
    locked = [p for p in given.values() if p is not None]
    new_dirs = [p for p in locked if not os.path.isdir(p)]
    new_files = [f for f in (os.path.join(p, LOCK_FILE) for p in locked) if not os.path.exists(f)]
    held = lock_dirs(
        [(setting_name(n, overrides, config), p) for n, p in given.items() if p is not None],
        config.user,
    )
    try:
        check_tls(config, overrides)
        check_metrics_port(config, overrides)
        if config.run_dir is not None:
            make_private(setting_name("run_dir", overrides, config), config.run_dir)
        return bind_listener(config.listen, config.port) if bound is None else bound
    except (StartupError, OSError):  # refused after all: leave nothing behind that we made
        for fd in held:
            os.close(fd)
        for path in new_files:
            with contextlib.suppress(OSError):
                os.unlink(path)
        for path in new_dirs:
            with contextlib.suppress(OSError):
                os.rmdir(path)
        raise


class MetricsPortError(OSError):
    """The metrics address cannot be listened on (in use, not allowed): EXIT_LISTEN."""


def check_metrics_port(config: Config, overrides: dict[str, Any]) -> None:
    """The metrics address can be listened on (tried here, for a one-line refusal before
    anything starts; the supervisor binds it for good)."""
    if config.metrics_listen is None:
        return
    try:
        bind_listener(*split_host_port(config.metrics_listen)).close()
    except OSError as e:
        name = setting_name("metrics_listen", overrides, config)
        problem = f"cannot listen on {config.metrics_listen}: {why(e)}"
        raise MetricsPortError(f"{name}: {problem}") from None


def check_cert_pair(
    config: Config, overrides: dict[str, Any], cert_field: str, key_field: str
) -> bool:
    """A certificate and its key given together, and loading; False if neither is given.
    A problem is one ConfigError naming the key."""
    cert, key = getattr(config, cert_field), getattr(config, key_field)
    if cert is None and key is None:
        return False
    if cert is None or key is None:
        given, missing = (key_field, cert_field) if cert is None else (cert_field, key_field)
        raise ConfigError(
            setting_name(given, overrides, config), f"needs {FIELDS[missing][0]} as well"
        )
    try:
        tls_context(cert, key, None)
    except OSError as e:  # ssl.SSLError is one
        reason = getattr(e, "strerror", None) or getattr(e, "reason", None) or str(e)
        raise ConfigError(
            setting_name(cert_field, overrides, config), f"cannot load {cert} / {key}: {reason}"
        ) from None
    return True


def check_tls(config: Config, overrides: dict[str, Any]) -> None:
    """TLS settings that work, or one line naming the key: cert and key go together, and
    each file must load (the serving processes and the metrics process load them again):
    the beanstalk port's (tls.*) and the metrics endpoint's (metrics.tls_*)."""
    check_cert_pair(config, overrides, "metrics_tls_cert", "metrics_tls_key")
    ca = config.tls_client_ca
    if not check_cert_pair(config, overrides, "tls_cert", "tls_key"):
        if ca is not None:
            name = setting_name("tls_client_ca", overrides, config)
            raise ConfigError(name, "needs tls.cert and tls.key")
        return
    if ca is not None:
        cert, key = config.tls_cert, config.tls_key
        assert cert is not None and key is not None  # check_cert_pair said so
        try:
            tls_context(cert, key, ca)
        except OSError as e:  # ssl.SSLError is one
            reason = getattr(e, "strerror", None) or getattr(e, "reason", None) or str(e)
            raise ConfigError(
                setting_name("tls_client_ca", overrides, config), f"cannot load {ca}: {reason}"
            ) from None


def start_server(
    config_file: Path | None,
    overrides: dict[str, Any],
    no_fsync: bool = False,
    ignored: list[str] | None = None,
    in_process: bool = False,
    bound: socket.socket | None = None,
) -> int:
    """Build the config from `config_file` and the flags' `overrides`, check, lock, bind, and
    exec into the supervisor (never returns then), or with `in_process` (a caller that
    loaded no CLI library) become the supervisor without the exec and return its status.
    Returns the exit status on refusal. `no_fsync`: -F (never fsync); `ignored`: flags
    given that beanstalkd 1.12 ignores."""
    try:
        if no_fsync:
            if "fsync_ms" in overrides:
                raise ConfigError("flag -F", "cannot be combined with -f")
            overrides["fsync_ms"] = None
        config = build_config(config_file, overrides)
        listener = check_and_bind(config, overrides, bound)
    except (ConfigError, StartupError) as e:
        if bound is not None:
            close_listener(bound)
        say(str(e))
        return EXIT_CONFIG
    except MetricsPortError as e:
        if bound is not None:
            close_listener(bound)
        say(str(e))
        return EXIT_LISTEN
    except OSError as e:
        say(f"cannot listen on {describe(config.listen, config.port)}: {why(e)}")
        return EXIT_LISTEN
    for flag in ignored or ():
        say(f"warning: {flag} is ignored: the log is always compacted")

    from shardq.processes.supervision.supervisor import (  # lazy: see above
        exec_supervisor,
        run_supervisor,
    )

    reload = {
        "config_file": None if config_file is None else str(config_file),
        "overrides": overrides,
        "flags": FLAGS,
    }
    if in_process:
        return run_supervisor(config, listener, reload)
    exec_supervisor(config, listener, reload)
