"""SIGHUP in the supervisor: read the config file again (the flags still win), and say what
a running server takes from it (`live.Live`: logging, limits, allow, policies; the job
limits through `quota`) and what needs a restart (refused, one line each, kept as it was).

`Reloader` owns how the config is read again (the file and the flags the CLI passed through
the exec); the supervisor passes what it returns on to its children.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any

from shardq.cluster.routing import NAMES
from shardq.config import Config, ConfigError, ConfigWarning, read_config
from shardq.log import setup as setup_logging
from shardq.processes.common import live, quota
from shardq.processes.supervision.children import families_needed

log = logging.getLogger(__name__)


class Reloader:
    """How to read the config again: `how` is the CLI's {config_file, overrides, flags}
    (None: started without the CLI, nothing to read again); `routing` the log's tube
    routing, which some settings need (an old log has no tube families)."""

    def __init__(self, how: dict[str, Any] | None, routing: str) -> None:
        self.how = how
        self.routing = routing

    def read(self) -> Config | None:
        """The config as the file and the flags say now; None (logged) if it cannot serve."""
        if self.how is None:
            log.warning("SIGHUP: started without the CLI, no config file to read again")
            return None
        path = self.how["config_file"]
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ConfigWarning)
                new = read_config(
                    Path(path) if path else None, self.how["overrides"], self.how["flags"]
                )
        except ConfigError as e:
            log.error("SIGHUP: %s; nothing changed", e)
            return None
        moving = families_needed(new.tubes) if self.routing == NAMES else None
        if moving:
            log.error("SIGHUP: tubes.%s.expired_to needs tube families; nothing changed", moving)
            return None
        for w in caught:
            log.warning("SIGHUP: %s", w.message)
        return new

    def reload(self, running: Config) -> tuple[Config, live.Live | None] | None:
        """Read the config again and take from it what a running server can change: the
        config to run with from now on, and the live settings to pass to the children
        (None when only the job limits changed, which `quota` shares with them already);
        None when nothing changes. Each change is logged at INFO (with the new logging
        set up first, so a change of log.level is seen at the level it sets), each
        refusal at WARNING."""
        new = self.read()
        if new is None:
            return None
        applied, refused = live.changes(running, new)
        limits, refused = quota.reload(refused, new)
        for key, before, after in refused:
            log.warning("SIGHUP: %s needs a restart to change (%r -> %r); kept", key, before, after)
        if not applied and not limits:
            if not refused:
                log.info("SIGHUP: the config is as it was; nothing to change")
            return None
        names = (*(quota.LIMIT_FIELDS if limits else ()), *(live.Live._fields if applied else ()))
        config = running.replace(**{name: getattr(new, name) for name in names})
        settings = live.of(config) if applied else None
        if settings is not None:
            setup_logging("supervisor", settings.verbose, settings.log_level, settings.log_format)
        for key, before, after in applied + limits:
            log.info("SIGHUP: %s %r -> %r", key, before, after)
        return config, settings
