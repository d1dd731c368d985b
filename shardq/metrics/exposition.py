"""A `Gathered` view as Prometheus metric families, and their text format (prometheus-client's
`generate_latest`, so the format is the library's, not ours).

Names (every one starts with ``shardq_``):

* server-wide, from `stats`: ``current_jobs{state}``, ``commands_total{command}`` (the
  ``cmd-*`` counters), ``jobs_total``, ``job_timeouts_total``, ``tubes``,
  ``current_connections{kind}``,
  ``connections_total``, ``limit_hits_total{limit}`` (``limit-connections-refused``,
  ``-connections-denied``, ``-output-closed``, ``-puts-refused``), ``limit_usage{limit}``
  (``limit-jobs``, ``limit-memory``), ``limit_max{limit}`` (the configured limits, 0:
  none), ``binlog_records_written_total``, ``uptime_seconds``, ``info{version,...}``;
* per tube, from every shard: ``tube_current_jobs{tube,state}``,
  ``tube_waiting_connections``,
  ``tube_connections{tube,kind}`` (using, watching), ``tube_jobs_total``,
  ``tube_deletes_total``, ``tube_paused``, ``tube_shard{tube,shard,process}`` (1: where
  the tube lives, and which process runs that shard); histograms ``job_wait_seconds{tube}`` (put →
  first reserve) and ``job_run_seconds{tube}`` (last reserve → delete);
* per shard with ``-b``: ``wal_bytes_written_total{shard}``, ``wal_disk_bytes{shard}``,
  histogram ``wal_fsync_seconds{shard}``;
* per process: ``process_cpu_seconds_total{role}``, ``process_resident_memory_bytes{role}``;
* ``healthy`` (1/0, what /health answers) and ``shards_answered``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client import generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.utils import floatToGoString

from shardq.engine.timing import FSYNC_BOUNDS_S, JOB_BOUNDS_S
from shardq.metrics.gathered import Gathered, job_histograms
from shardq.protocol.stats_keys import CMD_KEYS, JOB_COUNT_KEYS

#: of /metrics: the text format `generate_latest` writes (what prometheus-client's own
#: handler answers a scraper that asks for nothing else)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
P = "shardq_"
NS = 1e9

#: stats key -> the state label of ``current_jobs`` and ``tube_current_jobs``
STATES = {key: key.removeprefix("current-jobs-") for key in JOB_COUNT_KEYS}
LIMIT_HITS = (
    "limit-connections-refused",
    "limit-connections-denied",
    "limit-output-closed",
    "limit-puts-refused",
)
LIMIT_USAGE = ("limit-jobs", "limit-memory")
LIMIT_MAX = (
    "limit-max-connections",
    "limit-max-output-bytes",
    "limit-max-jobs",
    "limit-max-memory",
)
CONNECTIONS = {
    "current-connections": "current",
    "current-producers": "producers",
    "current-workers": "workers",
    "current-waiting": "waiting",
}


def cumulative(bounds_s: tuple[float, ...], counts: list[int]) -> list[tuple[str, float]]:
    """Per-bucket counts (the last: above every bound) as Prometheus's cumulative buckets."""
    buckets, running = [], 0
    for bound, count in zip((*bounds_s, float("inf")), counts, strict=True):
        running += count
        buckets.append((floatToGoString(bound), float(running)))
    return buckets


def present(stats: dict[str, Any], keys: Iterable[str]) -> list[str]:
    """The keys `stats` has: without a hosted shard the serving processes' part is missing
    (gathered.py), and a number that cannot be had is left out, never shown as 0."""
    return [key for key in keys if key in stats]


def server_families(stats: dict[str, Any]) -> Iterator[Metric]:
    jobs = GaugeMetricFamily(
        P + "current_jobs", "Jobs in the server by state (stats)", labels=["state"]
    )
    for key, state in STATES.items():
        jobs.add_metric([state], stats.get(key, 0))
    yield jobs
    commands = CounterMetricFamily(
        P + "commands", "Commands received, by command (the cmd-* stats)", labels=["command"]
    )
    for key in present(stats, CMD_KEYS):
        commands.add_metric([key.removeprefix("cmd-")], stats[key])
    yield commands
    yield CounterMetricFamily(P + "jobs", "Jobs put since start", value=stats.get("total-jobs", 0))
    yield CounterMetricFamily(
        P + "job_timeouts", "Reservations that timed out", value=stats.get("job-timeouts", 0)
    )
    yield GaugeMetricFamily(P + "tubes", "Tubes", value=stats.get("current-tubes", 0))
    connections = GaugeMetricFamily(
        P + "current_connections", "Client connections, by kind (stats)", labels=["kind"]
    )
    for key in present(stats, CONNECTIONS):
        connections.add_metric([CONNECTIONS[key]], stats[key])
    yield connections
    if "total-connections" in stats:
        yield CounterMetricFamily(
            P + "connections", "Connections since start", value=stats["total-connections"]
        )
    yield from limit_families(stats)
    yield CounterMetricFamily(
        P + "binlog_records_written",
        "Write-ahead log records written",
        value=stats.get("binlog-records-written", 0),
    )
    yield GaugeMetricFamily(P + "uptime_seconds", "Seconds since start", value=stats["uptime"])
    info = GaugeMetricFamily(P + "info", "The server", labels=["version", "hostname", "id"])
    info.add_metric([str(stats.get(k, "")) for k in ("version", "hostname", "id")], 1)
    yield info


def limit_families(stats: dict[str, Any]) -> Iterator[Metric]:
    hits = CounterMetricFamily(
        P + "limit_hits", "Times a limit acted (the limit-* stats)", labels=["limit"]
    )
    for key in present(stats, LIMIT_HITS):
        hits.add_metric([key.removeprefix("limit-")], stats[key])
    yield hits
    usage = GaugeMetricFamily(
        P + "limit_usage", "What max_jobs and max_memory count now", labels=["limit"]
    )
    for key in LIMIT_USAGE:
        usage.add_metric([key.removeprefix("limit-")], stats.get(key, 0))
    yield usage
    limits = GaugeMetricFamily(P + "limit_max", "Configured limits (0: none)", labels=["limit"])
    for key in present(stats, LIMIT_MAX):
        limits.add_metric([key.removeprefix("limit-max-")], stats[key])
    yield limits


def tube_families(tubes: dict[str, dict[str, Any]]) -> Iterator[Metric]:
    jobs = GaugeMetricFamily(
        P + "tube_current_jobs", "Jobs in a tube by state (stats-tube)", labels=["tube", "state"]
    )
    waiting = GaugeMetricFamily(
        P + "tube_waiting_connections", "Connections waiting in reserve", labels=["tube"]
    )
    conns = GaugeMetricFamily(
        P + "tube_connections", "Connections using or watching a tube", labels=["tube", "kind"]
    )
    total = CounterMetricFamily(P + "tube_jobs", "Jobs put into a tube", labels=["tube"])
    deletes = CounterMetricFamily(P + "tube_deletes", "Deletes in a tube", labels=["tube"])
    paused = GaugeMetricFamily(P + "tube_paused", "1 while a tube is paused", labels=["tube"])
    for name in sorted(tubes):
        fields = tubes[name]
        for key, state in STATES.items():
            jobs.add_metric([name, state], fields[key])
        waiting.add_metric([name], fields["current-waiting"])
        conns.add_metric([name, "using"], fields["current-using"])
        conns.add_metric([name, "watching"], fields["current-watching"])
        total.add_metric([name], fields["total-jobs"])
        deletes.add_metric([name], fields["cmd-delete"])
        paused.add_metric([name], 1 if fields["pause-time-left"] or fields["pause"] else 0)
    yield from (jobs, waiting, conns, total, deletes, paused)


def home_family(g: Gathered) -> Metric:
    """1 per tube and shard that holds it, labelled with the process that runs the shard
    (`serving 1`: a serving process hosts it; `shard 3`: a process of its own)."""
    home = GaugeMetricFamily(
        P + "tube_shard",
        "1 for the shard that holds a tube and the process that runs that shard",
        labels=["tube", "shard", "process"],
    )
    for name in sorted(g.homes):
        for shard in g.homes[name]:
            home.add_metric([name, str(shard), g.host_of(shard)], 1)
    return home


def histogram_family(
    name: str,
    doc: str,
    label: str,
    series: Iterable[tuple[str, list[Any]]],
    bounds_s: tuple[float, ...],
) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, doc, labels=[label])
    for value, (counts, total_ns) in series:
        family.add_metric([value], cumulative(bounds_s, counts), total_ns / NS)
    return family


def timing_families(g: Gathered) -> Iterator[Metric]:
    for kind, doc in (
        ("wait", "Put (plus delay) to first reserve, per tube"),
        ("run", "Last reserve to delete, per tube"),
    ):
        series = sorted(job_histograms(g.timing, kind).items())
        yield histogram_family(P + f"job_{kind}_seconds", doc, "tube", series, JOB_BOUNDS_S)
    logged = {
        shard: snap for shard, snap in sorted(g.timing.items()) if "wal_bytes_written" in snap
    }
    if not logged:
        return
    written = CounterMetricFamily(
        P + "wal_bytes_written", "Bytes appended to the write-ahead log", labels=["shard"]
    )
    disk = GaugeMetricFamily(
        P + "wal_disk_bytes", "Bytes the write-ahead log's segments hold", labels=["shard"]
    )
    for shard, snap in logged.items():
        written.add_metric([str(shard)], snap["wal_bytes_written"])
        disk.add_metric([str(shard)], snap["wal_disk_bytes"])
    yield from (written, disk)
    series = [(str(shard), snap["fsync"]) for shard, snap in logged.items()]
    yield histogram_family(
        P + "wal_fsync_seconds", "Write-ahead log fsync latency", "shard", series, FSYNC_BOUNDS_S
    )


def process_families(g: Gathered) -> Iterator[Metric]:
    cpu = CounterMetricFamily(
        P + "process_cpu_seconds", "CPU seconds (user + system) by process", labels=["role"]
    )
    rss = GaugeMetricFamily(
        P + "process_resident_memory_bytes", "Resident memory by process", labels=["role"]
    )
    for proc in sorted(g.processes, key=role_order):
        cpu.add_metric([proc.role], proc.cpu_seconds)
        rss.add_metric([proc.role], proc.rss_bytes)
    yield from (cpu, rss)


def role_order(proc: Any) -> tuple[str, int]:
    """supervisor, coordinator, serving processes, shards, metrics; by index within a role."""
    kind, _, index = proc.role.partition(" ")
    return (kind, int(index) if index.isdigit() else -1)


def families(g: Gathered) -> list[Metric]:
    found: list[Metric] = []
    if g.stats is not None:
        found += server_families(g.stats)
    found += tube_families(g.tubes)
    found.append(home_family(g))
    found += timing_families(g)
    found += process_families(g)
    found.append(
        GaugeMetricFamily(
            P + "healthy",
            "1 when every process runs and answered (/health)",
            value=0 if g.problems() else 1,
        )
    )
    found.append(
        GaugeMetricFamily(P + "shards_answered", "Shards that answered", value=len(g.answered))
    )
    return found


class _Families:
    """What `generate_latest` wants: something with a `collect`."""

    def __init__(self, metrics: list[Metric]) -> None:
        self.metrics = metrics

    def collect(self) -> list[Metric]:
        return self.metrics


def render(g: Gathered) -> bytes:
    """The Prometheus text format of a gathered view."""
    return generate_latest(_Families(families(g)))
