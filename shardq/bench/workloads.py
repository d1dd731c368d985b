"""Workload definitions: which role each connection plays and the bytes it sends.

Roles, not workloads, drive the load loop: a *producer* pipelines puts, a *consumer*
pipelines reserves and deletes what it gets, a *drainer* does the same with
`reserve-with-timeout 0` and stops at the first TIMED_OUT (the pre-filled `reserve` load),
and a *pingpong* connection does one put -> reserve -> delete at a time.
Every request is pre-built bytes; only `delete <id>` is assembled per job.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

#: Every workload and what it does (the order of `bench --help`).
WORKLOAD_HELP = {
    "put": "producers only: every connection puts --size-byte jobs into one tube, --pipeline"
    " requests in flight; measures put throughput and latency",
    "reserve": "puts --jobs (or --prefill) jobs first, untimed, then every connection reserves"
    " and deletes them until the tube is empty or --duration is up",
    "mixed": "half the connections put, the other half reserve and delete, on one tube;"
    " producers pause while more than --backlog jobs are ready",
    "multitube": "mixed spread over --tubes tubes: each producer uses one, every consumer"
    " watches them all",
    "pingpong": "one job at a time per connection: put, reserve, delete, then the next; the"
    " cycle's rate and latency (a client waiting on every reply)",
}
WORKLOADS = tuple(WORKLOAD_HELP)

#: `bench compare --matrix` choices (the rows are `shardq.bench.compare.matrix`'s).
MATRIX_HELP = {
    "standard": "what `make bench` runs: put (1 conn; 50 conns x16 pipelined), reserve+delete"
    " (50 conns, 250,000 jobs pre-filled), mixed (50 and 200 conns), multitube (16 tubes, 64"
    " conns), pingpong (1 client), 5 s each; put (1 conn) and pingpong again with one core"
    " busy; memory: RSS holding 1,000,000 ready jobs",
    "quick": "a smoke test of half a minute (33 s on 2 busy cores; 29 runs, each on a fresh"
    " server): put 50x16, mixed 50, pingpong, 0.5 s each, 3 rounds, and memory with 20,000 jobs",
    "memory": "only the memory row: each server's RSS (MiB) and bytes per job holding"
    " 1,000,000 ready 100-byte jobs",
    "loaded": "only the loaded rows: put (1 conn) and pingpong while another process keeps"
    " one core busy",
}
PRODUCER, CONSUMER, DRAINER, PINGPONG = "producer", "consumer", "drainer", "pingpong"


def counted(n: int, noun: str, nouns: str | None = None) -> str:
    """`1 connection`, `2 connections`: a count with its noun in the right number (`nouns`,
    the plural, when it is not the noun plus s)."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {nouns or noun + 's'}"


@dataclass
class Spec:
    """Everything one `shardq bench` run needs; picklable, so it crosses process boundaries."""

    workload: str = "put"
    host: str = "127.0.0.1"
    port: int = 11300
    connections: int = 1
    pipeline: int = 1
    size: int = 100
    duration: float | None = 5.0
    jobs: int | None = None
    processes: int = 1
    tubes: int = 1
    backlog: int = 5000  # mixed/multitube: producers wait above this many ready jobs
    prefill: int = 200_000  # reserve with --duration: jobs put before the clock starts
    prefix: str = "bench"  # tube name prefix; compare gives each cell its own
    ttr: int = 60
    engine: str = "c"  # "c": the compiled load core (bench/core.py); "python": loadgen.py
    extra: dict[str, object] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass
class ConnPlan:
    """One connection: its role, the tube it puts into and the tubes it watches."""

    index: int
    role: str
    use: str | None
    watch: list[str]


def plan(spec: Spec) -> list[ConnPlan]:
    """Roles for every connection. Mixed loads: first half producers, second half consumers,
    so a round-robin split over processes gives each process both kinds (when there are as
    many of each as processes: `split_problem`)."""
    n, p = spec.connections, spec.prefix
    if spec.workload == "put":
        return [ConnPlan(i, PRODUCER, p, []) for i in range(n)]
    if spec.workload == "reserve":
        return [ConnPlan(i, DRAINER, None, [p]) for i in range(n)]
    if spec.workload == "pingpong":
        return [ConnPlan(i, PINGPONG, f"{p}-pp{i}", [f"{p}-pp{i}"]) for i in range(n)]
    if spec.workload in ("mixed", "multitube"):
        tubes = [p] if spec.workload == "mixed" else [f"{p}-{t}" for t in range(spec.tubes)]
        producers = max(1, n // 2)
        out = [ConnPlan(i, PRODUCER, tubes[i % len(tubes)], []) for i in range(producers)]
        out += [ConnPlan(i, CONSUMER, None, tubes) for i in range(producers, max(n, 2))]
        return out
    raise ValueError(f"unknown workload {spec.workload!r}; one of {', '.join(WORKLOADS)}")


def split_problem(spec: Spec) -> str | None:
    """Why `spec` cannot run, or None: a mixed load bounded by --jobs puts and takes each
    process's share of the jobs in that process, so each needs a producer and a consumer
    (without, the run waited out its time limit)."""
    if spec.jobs is None or spec.workload not in ("mixed", "multitube"):
        return None
    if spec.connections >= 2 * spec.processes:
        return None
    return (
        f"-w {spec.workload} with --jobs over "
        f"{counted(spec.processes, 'load process', 'load processes')} needs at least "
        f"{2 * spec.processes} connections (a producer and a consumer in each process)"
    )


def setup_commands(c: ConnPlan) -> list[tuple[bytes, bytes]]:
    """(request, expected reply prefix) pairs sent before the clock starts."""
    cmds: list[tuple[bytes, bytes]] = []
    if c.use and c.use != "default":
        cmds.append((b"use %s\r\n" % c.use.encode(), b"USING "))
    if c.watch:
        for t in c.watch:
            cmds.append((b"watch %s\r\n" % t.encode(), b"WATCHING "))
        if "default" not in c.watch:
            cmds.append((b"ignore default\r\n", b"WATCHING "))
    return cmds


def body_of(size: int) -> bytes:
    """Every job's body: 'a' + i % 26, what the stub's RESERVED carries and the compiled core
    checks in every RESERVED."""
    return bytes(97 + i % 26 for i in range(size))


def put_request(spec: Spec) -> bytes:
    body = body_of(spec.size)
    return b"put 0 0 %d %d\r\n%s\r\n" % (spec.ttr, len(body), body)


def reserve_request(role: str) -> bytes:
    """Drainers must see an empty queue at once; consumers wait a little for the next job."""
    if role == DRAINER:
        return b"reserve-with-timeout 0\r\n"
    return b"reserve-with-timeout 1\r\n"
