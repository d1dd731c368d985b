"""A process's memory, on request: SIGUSR2 to any child writes RUN_DIR/memory-ROLE.json.

RSS mixes three things: the objects alive, the memory the allocators keep free for later
(fragmentation: it levels off) and growth that never stops (a leak). The report tells
them apart, for the churn test (tests/integration/test_churn.py) or an operator:

* ``blocks``: Python's allocated blocks after a full collection (`sys.getallocatedblocks`),
  i.e. the objects alive;
* ``malloc_in_use``: bytes glibc's malloc has handed out and not got back (`mallinfo2`:
  ``uordblks + hblkhd``), what C code (msgpack, large Python objects) holds;
* ``malloc_held``: bytes malloc holds from the kernel (``arena + hblkhd``), in use or free;
* ``rss``: resident bytes (/proc/self/statm).

The malloc fields are null where the C library has no `mallinfo2` (not glibc ≥ 2.33).
The report is written from the signal handler (Python runs it in the main thread between
two bytecodes, so at a safe point), atomically (a reader never sees half a file); nothing
runs unless asked.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import signal
import sys
from typing import Any

PAGE = os.sysconf("SC_PAGE_SIZE")
#: the fields of glibc's struct mallinfo2, in order
MALLINFO2 = ["arena", "ordblks", "smblks", "hblks", "hblkhd"]
MALLINFO2 += ["usmblks", "fsmblks", "uordblks", "fordblks", "keepcost"]

log = logging.getLogger(__name__)

_path = ""
_mallinfo2: Any = None  #: libc's mallinfo2 once bound; False: there is none


def report_path(run_dir: str, role: str) -> str:
    return os.path.join(run_dir, f"memory-{role.replace(' ', '-')}.json")


def listen(role: str, run_dir: str) -> None:
    """In a child: answer SIGUSR2 with a report in the run directory."""
    global _path
    _path = report_path(run_dir, role)
    signal.signal(signal.SIGUSR2, on_sigusr2)


def on_sigusr2(_signum: int, _frame: object) -> None:
    try:
        write(_path)
    except OSError as e:  # raised here, it would end whatever the loop was doing
        log.warning("SIGUSR2: cannot write the memory report %s: %s", _path, e)


def mallinfo2() -> dict[str, int] | None:
    """glibc's malloc statistics over every arena; None without mallinfo2."""
    global _mallinfo2
    if _mallinfo2 is None:
        _mallinfo2 = _bind_mallinfo2()
    if _mallinfo2 is False:
        return None
    info = _mallinfo2()
    return {name: int(getattr(info, name)) for name in MALLINFO2}


def _bind_mallinfo2() -> Any:
    """libc's mallinfo2, typed (once: a ctypes type made per call would stay alive), or
    False where there is none."""
    import ctypes  # only when asked: a report is rare, and ctypes costs every start

    try:
        call = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        return False

    class Mallinfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in MALLINFO2]

    call.restype = Mallinfo2
    call.argtypes = []
    return call


def measure() -> dict[str, Any]:
    gc.collect()
    with open("/proc/self/statm") as f:
        rss = int(f.read().split()[1]) * PAGE
    info = mallinfo2()
    return {
        "pid": os.getpid(),
        "blocks": sys.getallocatedblocks(),
        "malloc_in_use": None if info is None else info["uordblks"] + info["hblkhd"],
        "malloc_held": None if info is None else info["arena"] + info["hblkhd"],
        "rss": rss,
    }


def write(path: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(measure(), f)
    os.replace(tmp, path)
