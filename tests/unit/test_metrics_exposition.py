"""The metrics endpoint's pure parts (shardq/metrics/): the Prometheus text of a gathered
view (parsed back with prometheus-client's own parser), health, the dashboard JSON, the
`stats` body and /proc parsing, and the metrics.listen key."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from shardq.config import ConfigError, load_config
from shardq.engine.timing import FSYNC_BOUNDS_S, JOB_BOUNDS_S
from shardq.metrics.exposition import render
from shardq.metrics.gathered import Gathered, Proc, job_histograms, parse_stats
from shardq.metrics.procstat import CLOCK_TICKS, parse_rss, parse_stat
from shardq.metrics.summary import quantile, summary
from shardq.protocol.stats_keys import SERVING_KEYS, STATS_TUBE_KEYS

STATS = (
    b"---\ncurrent-jobs-ready: 3\ncmd-put: 7\ncmd-delete: 2\ntotal-jobs: 7\nuptime: 12\n"
    b"current-connections: 2\nlimit-puts-refused: 4\nlimit-connections-denied: 1\n"
    b'version: "0.1.0"\nhostname: vm\nid: abc\nrusage-utime: 0.120000\n'
)


def tube(**values: int) -> dict[str, int]:
    return {key: values.get(key.replace("-", "_"), 0) for key in STATS_TUBE_KEYS[1:]}


def hist(*counts: int, size: int = len(JOB_BOUNDS_S) + 1) -> list[object]:
    padded = list(counts) + [0] * (size - len(counts))
    return [padded, 1_500_000_000]


def view(**over: object) -> Gathered:
    fields: dict[str, object] = {
        "stats": parse_stats(STATS),
        "tubes": {"a": tube(current_jobs_ready=3, total_jobs=7, cmd_delete=2), "b": tube()},
        "timing": {
            0: {"wait": {"a": hist(1, 1)}, "run": {"a": hist(0, 0, 2)}, "fsync": hist(size=1)},
            1: {
                "wait": {},
                "run": {},
                "fsync": [[1] + [0] * len(FSYNC_BOUNDS_S), 50_000],
                "wal_bytes_written": 900,
                "wal_disk_bytes": 1200,
            },
        },
        "answered": {0, 1},
        "shards": 2,
        "processes": [
            Proc("supervisor", 10, "S", 1.5, 4096),
            Proc("shard 1", 12, "S", 0.25, 8192),
            Proc("serving", 11, "R", 2.0, 8192),
        ],
        "expected": ("serving", "shard 1"),
    }
    fields.update(over)
    return Gathered(**fields)  # type: ignore[arg-type]


def samples(text: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text.decode()):
        for s in family.samples:
            found[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return found


def test_exposition_parses_and_carries_the_stats_tubes_and_histograms() -> None:
    got = samples(render(view()))
    assert got[("shardq_current_jobs", (("state", "ready"),))] == 3
    assert got[("shardq_commands_total", (("command", "put"),))] == 7
    assert got[("shardq_commands_total", (("command", "delete"),))] == 2
    commands = {labels[0][1] for name, labels in got if name == "shardq_commands_total"}
    assert commands == {"put", "delete"}  # those the stats had
    assert got[("shardq_limit_hits_total", (("limit", "puts-refused"),))] == 4
    assert got[("shardq_limit_hits_total", (("limit", "connections-denied"),))] == 1
    assert got[("shardq_tube_current_jobs", (("state", "ready"), ("tube", "a")))] == 3
    assert got[("shardq_tube_jobs_total", (("tube", "a"),))] == 7
    assert got[("shardq_tube_deletes_total", (("tube", "a"),))] == 2
    assert got[("shardq_job_wait_seconds_count", (("tube", "a"),))] == 2
    assert got[("shardq_job_wait_seconds_bucket", (("le", "0.001"), ("tube", "a")))] == 1
    assert got[("shardq_job_wait_seconds_bucket", (("le", "0.005"), ("tube", "a")))] == 2
    assert got[("shardq_job_run_seconds_bucket", (("le", "+Inf"), ("tube", "a")))] == 2
    assert got[("shardq_job_run_seconds_sum", (("tube", "a"),))] == 1.5
    assert got[("shardq_wal_bytes_written_total", (("shard", "1"),))] == 900
    assert got[("shardq_wal_disk_bytes", (("shard", "1"),))] == 1200
    assert got[("shardq_wal_fsync_seconds_count", (("shard", "1"),))] == 1
    assert ("shardq_wal_fsync_seconds_count", (("shard", "0"),)) not in got  # no log there
    assert got[("shardq_process_cpu_seconds_total", (("role", "serving"),))] == 2.0
    assert got[("shardq_process_resident_memory_bytes", (("role", "shard 1"),))] == 8192
    assert got[("shardq_info", (("hostname", "vm"), ("id", "abc"), ("version", "0.1.0")))] == 1
    assert got[("shardq_healthy", ())] == 1


def test_health_names_each_problem() -> None:
    assert view().problems() == []
    stopped = [Proc("serving", 11, "T", 0, 0), Proc("coordinator", 13, "Z", 0, 0)]
    problems = view(
        stats=None,
        answered={0},
        processes=stopped,
        expected=("serving", "coordinator", "shard 1"),
    ).problems()
    assert problems == [
        "serving (pid 11): stopped",
        "coordinator (pid 13): exited",
        "shard 1: not running",
        "coordinator: stats not answered in time",
        "shard 1: not answered in time",
    ]
    got = samples(render(view(stats=None, answered={0})))
    assert got[("shardq_healthy", ())] == 0
    assert not any(name == "shardq_current_jobs" for name, _ in got)  # nothing made up


def test_numbers_that_cannot_be_had_are_left_out_not_zero() -> None:
    stats = {k: v for k, v in parse_stats(STATS).items() if k not in SERVING_KEYS}
    got = samples(render(view(stats=stats)))
    assert not any(name == "shardq_commands_total" for name, _ in got)
    assert not any(name == "shardq_current_connections" for name, _ in got)
    assert ("shardq_limit_hits_total", (("limit", "puts-refused"),)) in got  # the quota's
    assert got[("shardq_current_jobs", (("state", "ready"),))] == 3


def test_histograms_of_the_same_tube_from_two_shards_add_up() -> None:
    timing = {0: {"wait": {"*other*": [[1, 0], 5]}}, 1: {"wait": {"*other*": [[2, 3], 7]}}}
    assert job_histograms(timing, "wait") == {"*other*": [[3, 3], 12]}


def test_quantile_interpolates_within_its_bucket() -> None:
    bounds = (1.0, 2.0, 4.0)
    assert quantile(0.5, bounds, [0, 0, 0, 0]) is None
    assert quantile(0.5, bounds, [2, 2, 0, 0]) == 1.0
    assert quantile(0.75, bounds, [2, 2, 0, 0]) == 1.5
    assert quantile(0.5, bounds, [0, 0, 0, 4]) == 4.0  # beyond the last bound: the last bound


def test_summary_has_tubes_processes_and_server() -> None:
    data = summary(view(), shards=2, serving=1)
    assert data["healthy"] is True and data["problems"] == []
    assert data["server"]["version"] == "0.1.0" and data["server"]["shards"] == 2
    assert data["totals"]["cmd-put"] == 7
    rows = {row["name"]: row for row in data["tubes"]}
    assert rows["a"]["current-jobs-ready"] == 3 and rows["a"]["wait-count"] == 2
    assert rows["b"]["wait-p50"] is None
    assert [p["role"] for p in data["processes"]] == ["serving", "shard 1", "supervisor"]


def test_parse_stats_reads_numbers_and_both_string_styles() -> None:
    values = parse_stats(STATS + b"name: plain\n")
    assert values["cmd-put"] == 7 and values["rusage-utime"] == 0.12
    assert values["version"] == "0.1.0" and values["name"] == "plain"


def test_proc_stat_with_parentheses_in_the_name() -> None:
    line = "42 (sq (odd) x) S 7 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0 5 1000 300\n"
    stat = parse_stat(line)
    assert stat is not None
    assert (stat.ppid, stat.state) == (7, "S")
    assert stat.cpu_seconds == 300 / CLOCK_TICKS  # utime 250 + stime 50 ticks
    assert parse_stat("garbage") is None
    assert parse_rss("Name:\tx\nVmRSS:\t  2048 kB\n") == 2048 * 1024
    assert parse_rss("Name:\tzombie\n") == 0


@pytest.mark.parametrize(
    ("given", "stored"),
    [("9100", "127.0.0.1:9100"), (":0", "127.0.0.1:0"), ("0.0.0.0:80", "0.0.0.0:80"),
     ("[::1]:9100", "[::1]:9100"), (9100, "127.0.0.1:9100")],
)  # fmt: skip
def test_metrics_listen_values(given: object, stored: str) -> None:
    assert load_config(None, {"metrics_listen": given}).metrics_listen == stored


@pytest.mark.parametrize("bad", ["x", "1.2.3.4:70000", "::1:9100", "a b:1", True])
def test_metrics_listen_refuses_with_one_line_naming_the_key(bad: object) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(f"metrics:\n  listen: {bad}\n", {})
    assert str(info.value).startswith("config: metrics.listen: ")
    assert "\n" not in str(info.value)


def test_metrics_is_off_by_default_and_a_section_of_the_file() -> None:
    assert load_config(None, {}).metrics_listen is None
    assert load_config("metrics:\n  listen: 127.0.0.1:9200\n", {}).metrics_listen == (
        "127.0.0.1:9200"
    )


def test_each_tube_names_its_shard_and_the_process_that_runs_it() -> None:
    procs = [Proc("serving 0", 11, "S", 0, 1), Proc("serving 1", 12, "S", 0, 1)]
    procs.append(Proc("shard 2", 13, "S", 0, 1))
    homes = {"a": [1], "b": [2], "default": [0, 1, 2]}
    g = view(homes=homes, serving=2, shards=3, answered={0, 1, 2}, processes=procs)
    got = samples(render(g))
    homes_seen = {
        (dict(labels)["tube"], dict(labels)["shard"], dict(labels)["process"])
        for name, labels in got
        if name == "shardq_tube_shard"
    }
    assert homes_seen == {
        ("a", "1", "serving 1"),
        ("b", "2", "shard 2"),
        ("default", "0", "serving 0"),
        ("default", "1", "serving 1"),
        ("default", "2", "shard 2"),
    }
    rows = {row["name"]: row for row in summary(g, 3, 2)["tubes"]}
    assert (rows["a"]["shards"], rows["a"]["hosts"]) == ([1], ["serving 1"])
    assert (rows["b"]["shards"], rows["b"]["hosts"]) == ([2], ["shard 2"])


def test_one_serving_process_is_plain_serving_and_no_colocate_is_the_shard_process() -> None:
    one = view(serving=1, processes=[Proc("serving", 11, "S", 0, 1)])
    assert one.host_of(0) == "serving" and one.host_of(1) == "shard 1"
    apart = view(serving=1, processes=[Proc("shard 0", 12, "S", 0, 1)])
    assert apart.host_of(0) == "shard 0"
