"""Parsing /proc/PID/stat and /proc/PID/status (Linux): a process's parent, state, CPU
seconds and resident memory. Pure: the caller reads the files."""

from __future__ import annotations

import os
from typing import NamedTuple

#: clock ticks per second, the unit of utime and stime in /proc/PID/stat
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class ProcStat(NamedTuple):
    ppid: int
    state: str  #: R, S, D, T (stopped), t (traced), Z (zombie), ...
    cpu_seconds: float  #: user + system


def parse_stat(text: str) -> ProcStat | None:
    """/proc/PID/stat's text; None when it is not one. The name (field 2) is in parentheses
    and may hold spaces and parentheses itself: the fields start after the last ')'."""
    end = text.rfind(")")
    if end < 0:
        return None
    fields = text[end + 2 :].split()
    if len(fields) < 13:
        return None
    try:
        ppid = int(fields[1])
        ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    except ValueError:
        return None
    return ProcStat(ppid, fields[0], ticks / CLOCK_TICKS)


def parse_rss(status: str) -> int:
    """Resident memory in bytes from /proc/PID/status (VmRSS), 0 if absent (a zombie)."""
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                return int(parts[1]) * 1024
    return 0


#: states in which a process does not answer: stopped, traced, zombie, dead
NOT_RUNNING = {"T": "stopped", "t": "stopped", "Z": "exited", "X": "exited"}
