"""The pipeline on a generated log against the generator's own answers (local mode)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .expect import percentile_ok, read_tubes_csv

pytestmark = pytest.mark.spark

HEADER = (
    "tube,puts,reserves,releases,buries,kicks,timeouts,deletes,"
    "wait_p50_ms,wait_p99_ms,run_p50_ms,run_p99_ms"
)
COUNTS = {
    "puts": "put",
    "reserves": "reserve",
    "releases": "release",
    "buries": "bury",
    "kicks": "kick",
    "timeouts": "timeout",
    "deletes": "delete",
}


def test_tubes_csv_counts_are_exact(local_result, generated):
    out, _ = local_result
    _, truth, n = generated
    assert (out / "tubes.csv").read_text().splitlines()[0] == HEADER
    rows = read_tubes_csv(out / "tubes.csv")
    assert [r["tube"] for r in rows] == sorted(truth.counts)
    for row in rows:
        expected = {col: truth.counts[row["tube"]][event] for col, event in COUNTS.items()}
        assert {col: int(row[col]) for col in COUNTS} == expected, row["tube"]
    touches = sum(c["touch"] for c in truth.minutes.values())
    assert sum(int(r[c]) for r in rows for c in COUNTS) == n - touches


@pytest.mark.parametrize("kind", ["wait", "run"])
def test_percentiles_match_plain_python(local_result, generated, kind):
    out, _ = local_result
    samples = getattr(generated[1], f"{kind}s")
    for row in read_tubes_csv(out / "tubes.csv"):
        values = samples[row["tube"]]
        assert len(values) > 100, "the generator should give every tube enough jobs"
        for p, col in ((0.5, f"{kind}_p50_ms"), (0.99, f"{kind}_p99_ms")):
            assert percentile_ok(values, float(row[col]), p), (row["tube"], col, row[col])


def test_minute_series_parquet_is_exact(spark, local_result, generated):
    out, _ = local_result
    truth = generated[1]
    got = {
        (r.tube, int(r.minute.timestamp())): (r.puts, r.reserves, r.deletes, r.timeouts)
        for r in spark.read.parquet(str(out / "minutes.parquet")).collect()
    }
    want = {
        key: (c["put"], c["reserve"], c["delete"], c["timeout"])
        for key, c in truth.minutes.items()
        if c["put"]
        or c["reserve"]
        or c["delete"]
        or c["timeout"]
        or c["release"]
        or c["bury"]
        or c["kick"]
    }
    assert got == want


def test_tubes_parquet_equals_csv(spark, local_result):
    out, rows = local_result
    parquet = [r.asDict() for r in spark.read.parquet(str(out / "tubes.parquet")).collect()]
    assert sorted(parquet, key=lambda r: r["tube"]) == rows
    assert [r["tube"] for r in read_tubes_csv(out / "tubes.csv")] == [r["tube"] for r in rows]


def test_report_has_table_and_charts(local_result, generated):
    page = (local_result[0] / "report.html").read_text()
    assert page.startswith("<!doctype html>")
    for tube in generated[1].counts:
        assert f"<td>{tube}</td>" in page
    assert page.count("<svg") == 4  # puts/min, deletes/min, wait and run percentiles
    assert "<polyline" in page


def test_paths_may_be_files_globs_and_directories(spark, generated, tmp_path):
    from shardq.pipeline.main import read_events

    directory, _, n = generated
    files = sorted(str(p) for p in directory.iterdir())
    assert read_events(spark, [str(directory)]).count() == n
    assert read_events(spark, [f"{directory}/srv0-*.jsonl", f"{directory}/srv[12]-*"]).count() == n
    first = Path(files[0]).read_text().splitlines()
    assert read_events(spark, files[:1]).count() == len(first)


def test_malformed_lines_are_dropped(spark, tmp_path):
    from shardq.pipeline.main import read_events

    good = '{"ts":1.5,"server":"a","shard":0,"tube":"t","job":1,"event":"put","pri":0,'
    good += '"delay":0,"ttr":1,"bytes":3}'
    path = tmp_path / "x.jsonl"
    path.write_text(f"{good}\nnot json\n{{}}\n{good.replace('put', 'explode')}\n{good[:40]}")
    assert read_events(spark, [str(path)]).count() == 1


def test_same_job_id_on_two_servers_and_after_restart_are_separate_jobs(spark, tmp_path):
    from shardq.pipeline import metrics
    from shardq.pipeline.main import read_events

    def line(ts, server, job, event, delay=0):
        return (
            f'{{"ts":{ts},"server":"{server}","shard":0,"tube":"t","job":{job},'
            f'"event":"{event}","pri":0,"delay":{delay},"ttr":1,"bytes":1}}'
        )

    rows = [
        line(10.0, "a", 1, "put"),
        line(10.0, "a", 1, "reserve"),  # same ts as its put: a waiting worker
        line(10.5, "a", 1, "delete"),
        line(20.0, "b", 1, "put", delay=2),
        line(23.0, "b", 1, "reserve"),
        line(23.5, "b", 1, "touch"),
        line(24.0, "b", 1, "delete"),
        line(100.0, "a", 1, "put"),  # server a restarted: job 1 again, a new job
        line(101.0, "a", 1, "reserve"),
        line(101.5, "a", 1, "release"),  # then deleted while ready: no run time
        line(102.0, "a", 1, "delete"),
    ]
    (tmp_path / "late.jsonl").write_text("\n".join(reversed(rows[6:])) + "\n")
    (tmp_path / "early.jsonl").write_text("\n".join(reversed(rows[:6])) + "\n")
    jobs = metrics.jobs(read_events(spark, [str(tmp_path)]))
    got = sorted((r.server, r.life, r.wait_ms, r.run_ms) for r in jobs.collect())
    assert got == [("a", 1, 0.0, 500.0), ("a", 2, 1000.0, None), ("b", 1, 1000.0, 1000.0)]


def test_report_charts_bins_sized_to_the_span(local_result, generated):
    """The generated log spans 40 minutes (15 of puts, then the jobs run out): per-minute
    buckets drew each line as 41 points; bins sized to the span (30 s: at most
    report.CHART_BINS) draw it as 81."""
    import re

    from shardq.pipeline.report import CHART_BINS

    out, _ = local_result
    page = (out / "report.html").read_text()
    lines = re.findall(r"<polyline [^>]*points='([^']*)'", page)
    assert lines
    assert all(60 <= len(points.split()) <= CHART_BINS + 1 for points in lines)
    assert "per second (mean over 30 s bins)" in page
