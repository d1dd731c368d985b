"""Is the load tool, not the server, the limit of a row of `shardq bench compare`?

Three signs, any flags the side (A or B) of a row:

* ``L``: its ops/s are within `NEAR_L` of what the same load reached against the stub
  (`shardq.bench.stub`, the "L" column), which does no work at all: the server could not
  have been much faster, because the tool could not.
* ``cpu``: the load processes used at least `TOOL_BUSY` of the CPU they could have had,
  ``min(load processes, cores - server - other processes)``: the tool was full; or other
  processes used more than `NOISY` of a core and left less than `IDLE_LEFT` of the cores
  idle: the tool was starved by its neighbours. (The first test alone misses that when the
  tool's share is small: beside a process that takes a whole core, a tool at 0.44 of a core
  with 0.06 idle is under 90 % of its 0.5; a CI run beside a profiler took the stub's put
  row against itself for a result. A machine saturated by the server itself says nothing
  of the tool: beanstalkd at a full core with the tool at 0.85 is beanstalkd's limit.)
  This
  catches servers that answer in smaller batches than the stub, where the tool pays more
  system calls per operation and saturates below its stub ceiling.
* ``rt``: one request in flight (one connection, no pipelining: put 1 conn, pingpong),
  and the load tool used at least `RT_SHARE` of the server's CPU. With one request at a
  time the round trip is the sum of the tool's time, the server's and the wake-ups between
  them (not the larger of the two, as with many connections); when the tool's share is as
  large as the server's, a faster server cannot shorten it much. Here L is a weak sign:
  on a 2-vCPU VM a round trip takes 4-7x longer when the scheduler puts the tool and the
  server on different cores than on the same one, so L varies several-fold between runs.

A row where other processes used more than `NOISY` of a core is also marked noisy (``!``),
as the C load generator's compare.sh does; on a busy machine "cpu" then fires for servers
that were not the limit either (the machine was): the flag errs towards "do not trust".

A flagged ratio understates the faster server, and the report lists such rows apart, as not
results (docs/BENCHMARKS.md). The compiled load core (`--engine c`, the default) is the
yardstick for them: the Python load loop (`--engine python`) is flagged in most rows against
beanstalkd (docs/BENCHMARKS.md, "Is the load tool the limit?").
"""

from __future__ import annotations

import os
import shlex
from typing import Any

from shardq.processes.supervision.spawn import python_m

#: A side at this fraction of the stub's ops/s or more is flagged "L": within 25 %, the noise
#: of a shared 2-vCPU machine (beanstalkd against itself gives 0.84-1.21 per row, loadgen's
#: README), which the stub's own cost (about beanstalkd's, see the stub) does not widen.
NEAR_L = 0.75
#: Load processes busy for this share of the CPU left to them are flagged "cpu".
TOOL_BUSY = 0.90
#: A machine with less than this share of its cores idle during a cell, with neighbours
#: (other processes) busy, was saturated by them: the tool could not have had more,
#: whatever its share ("cpu").
IDLE_LEFT = 0.10
#: One request in flight: the tool's CPU at least this share of the server's flags "rt" (the
#: tool then takes at least a third of the CPU of each round trip). The stub, the cheapest
#: Python server, gives 0.85 on a quiet machine and 0.78-0.86 beside the test suite's load
#: (its CPU and the tool's drop by different amounts when both wait for a core): a cut at
#: 0.80 sat inside that spread and left stub-against-stub pingpong unflagged on a loaded CI
#: machine, so it sits well below it.
RT_SHARE = 0.50
#: Cores used by other processes during a cell above which its row is marked noisy.
NOISY = 0.25

LEGEND = (
    "tool limit: the load tool, not the server, limited that side (A/B): L = its ops/s within"
    f" {100 - round(NEAR_L * 100)} % of the stub's (column L: the same load against a server"
    f" that does nothing), cpu = the load processes used >= {round(TOOL_BUSY * 100)} % of"
    " the CPU the server and other processes left them, or other processes left less than"
    f" {round(IDLE_LEFT * 100)} % of the CPU idle, rt = one request in flight and the"
    f" tool used >= {round(RT_SHARE * 100)} % of the server's CPU; ! = other processes used"
    f" more than {round(NOISY * 100)} % of a core meanwhile (noisy); kops/cpu-s = thousand"
    " ops per server CPU-second; CPU in % of one core."
)


def stub_command(size: int = 100) -> str:
    """The L server: this interpreter's stub, answering reserves with `size`-byte bodies."""
    python = " ".join(map(shlex.quote, python_m("shardq.bench.stub")))
    return f"{python} -p {{port}} -s {size}"


def cores() -> int:
    return os.cpu_count() or 1


def kops_per_cpu_s(ops_per_sec: float, cpu_cores: float) -> float:
    """Thousand operations per CPU-second of the server (0 when it used no measurable CPU)."""
    return ops_per_sec / cpu_cores / 1000.0 if cpu_cores > 0 else 0.0


def reasons(side: dict[str, Any], ceiling: float | None, nproc: int) -> list[str]:
    """Why the load tool limited this side: any of "L", "cpu", "rt" (see the module)."""
    out = []
    if ceiling and side["value"] >= NEAR_L * ceiling:
        out.append("L")
    left = nproc - side["cpu_cores"] - side.get("other_cores", 0.0)
    room = max(0.0, min(float(side.get("load_processes", 1)), left))
    client, other = side.get("client_cores", 0.0), side.get("other_cores", 0.0)
    if client >= TOOL_BUSY * room or (other > NOISY and left - client < IDLE_LEFT * nproc):
        out.append("cpu")
    if side.get("in_flight") == 1 and side.get("client_cores", 0.0) >= RT_SHARE * side["cpu_cores"]:
        out.append("rt")
    return out


def flag_row(row: dict[str, Any], nproc: int) -> None:
    """Set row["tool_limit"] ({"a": [...], "b": [...]}) and row["tool_limited"] (any), and
    each side's "vs_l" (its value / L's) on a throughput row; memory rows get no flag."""
    if row["kind"] == "memory":
        return
    ceiling = row["l"]["value"] if row.get("l") else None
    limit: dict[str, list[str]] = {}
    for side in ("a", "b"):
        if ceiling:
            row[side]["vs_l"] = row[side]["value"] / ceiling
        limit[side] = reasons(row[side], ceiling, nproc)
    row["tool_limit"] = limit
    row["tool_limited"] = any(limit.values())
    # A loaded row's neighbours are meant: only what comes on top of them is noise.
    noise = NOISY + row.get("busy", 0)
    row["noisy"] = any(row[s].get("other_cores", 0.0) > noise for s in ("a", "b", "l") if s in row)


def flag_scaling(scaling: list[dict[str, Any]], rows: list[dict[str, Any]], nproc: int) -> None:
    """The same flag for the scaling cells, against the L of the same row of the matrix."""
    ceilings = {r["key"]: r["l"]["value"] for r in rows if r.get("l")}
    for s in scaling:
        s["tool_limit"] = reasons(s, ceilings.get(s["key"]), nproc)
        s["noisy"] = s.get("other_cores", 0.0) > NOISY


def flag_text(row: dict[str, Any]) -> str:
    """Who was limited by the tool, "A:L,cpu B:cpu" ("" if nobody); "!" first if noisy."""
    limit = row.get("tool_limit") or {}
    text = " ".join(f"{k.upper()}:{','.join(v)}" for k, v in limit.items() if v)
    return f"! {text}".strip() if row.get("noisy") else text
