"""A child process's link to its supervisor: it must never outlive it.

PR_SET_PDEATHSIG (set in child.py) normally delivers SIGTERM when the supervisor dies;
this check is the fallback every process loop runs at least once a second.
"""

from __future__ import annotations

import os
import sys

CHECK_EVERY_S = 1.0  #: process loops wake at least this often to look
_SUPERVISOR = int(os.environ.get("SHARDQ_SUPERVISOR_PID", "0") or 0) or os.getppid()


def check() -> None:
    """Exit (cleanly: finally blocks run) if the supervisor is gone."""
    if os.getppid() != _SUPERVISOR:
        sys.exit(0)
