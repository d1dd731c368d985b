"""Process plumbing for everything that starts servers: `shardq bench`, the tests, tools/.

The one place for: a free loopback port; the ``shardq listening on HOST:PORT`` line a
server prints when it serves; reading processes from /proc (state, parent, process group,
command line, the shardq child role); and stopping a process or a whole process group.
Everything here is by pid, never by a broad name match.

Linux only (/proc). Children are found by scanning /proc: ``/proc/<pid>/task/*/children``
needs CONFIG_PROC_CHILDREN, which not every kernel has.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import selectors
import signal
import socket
import subprocess
import threading
import time
from typing import IO

from shardq.processes.supervision.child import role_of_pid
from shardq.processes.supervision.ports import FRONT_LISTENING, LISTENING, METRICS_LISTENING

#: ``shardq listening on HOST:PORT`` (`supervision.ports.LISTENING`), then an optional line end.
_LISTENING = re.compile(
    re.escape(LISTENING.split("{", 1)[0]) + r"(?P<host>\S+):(?P<port>\d+)\r?\n?\Z"
)


def _line_pattern(template: str) -> re.Pattern[str]:
    """A line the supervisor prints after the first, e.g. ``shardq kestrel listening on
    HOST:PORT`` (`supervision.ports.FRONT_LISTENING`), found anywhere in its first lines."""
    return re.compile(
        re.escape(template.split("{", 1)[0]) + r"(?P<host>\S+):(?P<port>\d+)\r?$", re.M
    )


_KESTREL_LISTENING = _line_pattern(FRONT_LISTENING.replace("{name}", "kestrel"))
_WORKQ_LISTENING = _line_pattern(FRONT_LISTENING.replace("{name}", "workq"))
_BUNQUEUE_LISTENING = _line_pattern(FRONT_LISTENING.replace("{name}", "bunqueue"))
_METRICS_LISTENING = _line_pattern(METRICS_LISTENING)  #: with --metrics


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (another process may take it meanwhile)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


# ---------------------------------------------------------------------- the listening line


def as_text(data: bytes | str) -> str:
    """A server's output as text lines: a JSON line (``--log-format json``) as its `msg`."""
    text = data.decode(errors="replace") if isinstance(data, bytes) else data
    if "{" not in text:
        return text
    lines = []
    for line in text.splitlines(keepends=True):
        if line.startswith("{"):
            with contextlib.suppress(ValueError, TypeError, KeyError):
                line = str(json.loads(line)["msg"]) + "\n"
        lines.append(line)
    return "".join(lines)


def listening_port(line: bytes | str, host: str = "127.0.0.1") -> int | None:
    """The port of a ``shardq listening on HOST:PORT`` line for `host`, else None."""
    match = _LISTENING.match(as_text(line))
    if match is None or match["host"] != host:
        return None
    return int(match["port"])


def _port_in(pattern: re.Pattern[str], data: bytes | str, host: str) -> int | None:
    match = pattern.search(as_text(data))
    if match is None or match["host"] != host:
        return None
    return int(match["port"])


def kestrel_port(data: bytes | str, host: str = "127.0.0.1") -> int | None:
    """The Kestrel port in a server's first stdout lines (``shardq kestrel listening on
    HOST:PORT``) for `host`, else None."""
    return _port_in(_KESTREL_LISTENING, data, host)


def workq_port(data: bytes | str, host: str = "127.0.0.1") -> int | None:
    """The Workq port in a server's first stdout lines (``shardq workq listening on
    HOST:PORT``) for `host`, else None."""
    return _port_in(_WORKQ_LISTENING, data, host)


def bunqueue_port(data: bytes | str, host: str = "127.0.0.1") -> int | None:
    """The bunqueue port in a server's first stdout lines (``shardq bunqueue listening on
    HOST:PORT``) for `host`, else None."""
    return _port_in(_BUNQUEUE_LISTENING, data, host)


def metrics_port(data: bytes | str, host: str = "127.0.0.1") -> int | None:
    """The metrics port in a server's first stdout lines (``shardq metrics listening on
    HOST:PORT``) for `host`, else None."""
    return _port_in(_METRICS_LISTENING, data, host)


def read_lines(proc: subprocess.Popen[bytes], count: int, timeout: float) -> bytes:
    """The first `count` lines of a server's stdout (the listening lines), waiting at most
    `timeout` s; what arrived so far if they did not all come."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    data = b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while data.count(b"\n") < count:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not sel.select(remaining):
                break
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
    return data


def read_line(proc: subprocess.Popen[bytes], timeout: float) -> bytes:
    """The first line of a server's stdout (its "listening" line), waiting at most `timeout`
    s; what arrived so far if no full line did."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    data = b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while b"\n" not in data:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not sel.select(remaining):
                break
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
    return data


def drain_stream(stream: IO[bytes] | None) -> None:
    """Read a server's stdout to the end so it never blocks on a full pipe."""
    if stream is None:
        return
    try:
        while stream.read(65536):
            pass
    except (OSError, ValueError):
        pass


def wait_listening(proc: subprocess.Popen[bytes], timeout: float) -> tuple[int | None, bytes]:
    """(port, first stdout bytes) once a server started with ``stdout=PIPE`` printed its
    listening line, whose rest of stdout is then drained in a thread; (None, what it
    printed) if no such line came within `timeout` s."""
    data = read_line(proc, timeout)
    port = listening_port(data.partition(b"\n")[0] + b"\n")
    if port is not None:
        threading.Thread(target=drain_stream, args=(proc.stdout,), daemon=True).start()
    return port, data


# ---------------------------------------------------------------------- /proc


def stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (0: state, 1: parent pid,
    2: process group, 11/12: user/system ticks), or None if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rindex(b")") + 2 :].decode().split()


def proc_state(pid: int) -> str | None:
    """The one-letter state of `pid` from /proc, or None if there is no such process."""
    fields = stat_fields(pid)
    return None if fields is None else fields[0]


def is_alive(pid: int) -> bool:
    """True if `pid` exists and is not a zombie."""
    state = proc_state(pid)
    return state is not None and state not in ("Z", "X")


def cmdline(pid: int) -> list[str]:
    """The command line of `pid` ([] if it is gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def live_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _live_where(field: int, value: int) -> list[int]:
    """Live processes whose stat field `field` (1: parent pid, 2: process group, 3: session)
    is `value`."""
    out = []
    for pid in live_pids():
        fields = stat_fields(pid)
        if fields and fields[0] not in ("Z", "X") and int(fields[field]) == value:
            out.append(pid)
    return out


def children_of(pid: int) -> list[int]:
    """Live (non-zombie) direct children of `pid`."""
    return _live_where(1, pid)


def group_members(pgid: int) -> list[int]:
    """Live processes of the process group `pgid`."""
    return _live_where(2, pgid)


def tree(root: int) -> list[int]:
    """`root` and all its live descendants (those that are still alive)."""
    parent: dict[int, int] = {}
    for pid in live_pids():
        fields = stat_fields(pid)
        if fields is not None and fields[0] not in ("Z", "X"):
            parent[pid] = int(fields[1])
    out, frontier = [root], [root]
    while frontier:
        frontier = [p for p, pp in parent.items() if pp in frontier]
        out.extend(frontier)
    return [p for p in out if p in parent]


def session_members(sid: int) -> list[int]:
    """Live processes of the session `sid`: a server started in a session of its own
    (``start_new_session``) and every process it made, even one its supervisor left behind
    (a server's processes name themselves by role: their command lines do not say whose
    they are). The kernel does not give a session's number to another process while one of
    its members lives."""
    return _live_where(3, sid)


def tracer_pid(pid: int) -> int:
    """The pid of the process tracing `pid` (strace, a debugger), 0 if none."""
    with contextlib.suppress(OSError), open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("TracerPid:"):
                return int(line.split()[1])
    return 0


def is_listening(port: int) -> bool:
    """True if some socket listens on 127.0.0.1:`port`.

    Reads /proc/net/tcp instead of connecting, so the probe does not show up in the
    server's ``total-connections``.
    """
    want_local = f"0100007F:{port:04X}"
    try:
        with open("/proc/net/tcp") as f:
            next(f)
            for line in f:
                fields = line.split()
                if fields[1] == want_local and fields[3] == "0A":
                    return True
    except OSError:
        return False
    return False


# ---------------------------------------------------------------------- shardq's children


def child_role(pid: int) -> str | None:
    """'coordinator', 'serving' or 'shard <i>' for a shardq child process, else None."""
    return role_of_pid(pid)


def role_pids(server_pid: int) -> dict[str, int]:
    """Role -> pid of a shardq server's live children."""
    out = {}
    for pid in children_of(server_pid):
        role = child_role(pid)
        if role is not None:
            out[role] = pid
    return out


def shard_pids(server_pid: int) -> dict[int, int]:
    """Shard index -> pid of a shardq server's live shard processes."""
    return {
        int(role.split()[1]): pid
        for role, pid in role_pids(server_pid).items()
        if role.startswith("shard ")
    }


# ---------------------------------------------------------------------- stopping


def terminate(proc: subprocess.Popen[bytes], timeout: float, group: bool = False) -> int | None:
    """SIGTERM `proc` (by its own pid) and wait `timeout` s for it; past that SIGKILL it (its
    whole process group with `group`: it was started in a session of its own). Returns the
    exit status, or None if it had to be killed."""
    if proc.poll() is not None:
        return proc.returncode
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pass
    proc.kill()
    if group:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=timeout)
    return None


def kill_pids(pids: list[int]) -> None:
    """SIGKILL each of `pids` that still exists."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def wait_group_gone(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> bool:
    """Wait until `proc` has exited and no process of its group (pgid = its pid) is left;
    False if some still are after `timeout` s."""
    proc.wait(timeout=timeout)
    deadline = time.monotonic() + timeout
    while group_members(proc.pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def kill_group(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """SIGKILL every process of `proc`'s group at once (a crash of a whole server started in
    a session of its own), and any member that shows up later, until none is left."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=timeout)
    deadline = time.monotonic() + timeout
    while (left := group_members(proc.pid)) and time.monotonic() < deadline:
        kill_pids(left)
        time.sleep(0.02)
