"""`shardq analyze` on bad input, in the suite's one Spark session (no JVM per test):
malformed lines are counted and skipped with a warning, input with no valid event is exit
status 2 with nothing written, a path only Spark can check is one line and status 2, and the
result line names clean paths."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

GOOD = (
    '{"ts":1.5,"server":"a","shard":0,"tube":"t","job":1,"event":"put","pri":0,'
    '"delay":0,"ttr":1,"bytes":3}'
)


def _errors(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == level]


def test_malformed_lines_are_counted_with_a_warning(spark, tmp_path, caplog, capsys) -> None:
    from shardq.pipeline.main import EXIT_OK, execute

    path = tmp_path / "x.jsonl"
    lines = [GOOD, "not json", "{}", GOOD.replace('"put"', '"explode"'), GOOD[:40], ""]
    path.write_text("\n".join(lines) + "\n")
    with caplog.at_level(logging.WARNING):
        status = execute(spark, [str(path)], f"{tmp_path}/out//")
    assert status == EXIT_OK
    assert _errors(caplog, logging.WARNING) == [
        "skipped 4 lines of 5: malformed JSON or not shardq events"  # the blank line is no line
    ]
    out = capsys.readouterr().out
    assert out.startswith(f"shardq analyze: 1 tube from 1 event -> {tmp_path}/out/tubes.csv, ")
    assert "//" not in out
    assert (tmp_path / "out" / "tubes.csv").read_text().splitlines()[1].startswith("t,1,")


def test_no_valid_event_is_status_2_and_writes_nothing(spark, tmp_path, caplog, capsys) -> None:
    from shardq.pipeline.main import EXIT_INPUT, execute

    path = tmp_path / "bad.jsonl"
    path.write_text("not json\n[1, 2]\n{}\n")
    with caplog.at_level(logging.WARNING):
        status = execute(spark, [str(path)], str(tmp_path / "out"))
    assert status == EXIT_INPUT
    errors = _errors(caplog, logging.ERROR)
    assert len(errors) == 1 and errors[0].startswith(f"no valid event in {path} (3 lines read")
    assert capsys.readouterr().out == ""
    assert not (tmp_path / "out").exists()


def test_a_path_only_spark_can_check_is_one_line_and_status_2(spark, tmp_path, caplog) -> None:
    """A Hadoop glob ({a,b}) is not checked before Spark; Spark's answer becomes one line."""
    from shardq.pipeline.main import EXIT_INPUT, execute

    missing = f"file://{tmp_path}/gone/{{a,b}}.jsonl"
    with caplog.at_level(logging.WARNING):
        status = execute(spark, [missing], str(tmp_path / "out"))
    assert status == EXIT_INPUT
    errors = _errors(caplog, logging.ERROR)
    assert len(errors) == 1 and "\n" not in errors[0], errors
    assert errors[0].startswith("no such input: ") and "gone" in errors[0]


def test_local_paths_are_checked_before_spark(tmp_path: Path) -> None:
    from shardq.pipeline.main import InputError, check_local_paths, clean_path

    (tmp_path / "a.jsonl").write_text("{}\n")
    check_local_paths([str(tmp_path / "a.jsonl"), f"{tmp_path}/*.jsonl", str(tmp_path)])
    check_local_paths(["hdfs://nn/x", f"{tmp_path}/{{x,y}}"])  # left to Spark
    for bad in (tmp_path / "b.jsonl", f"{tmp_path}/*.gz", f"file://{tmp_path}/c"):
        with pytest.raises(InputError):
            check_local_paths([str(bad)])
    assert clean_path("out/") == "out" and clean_path("./a//b/") == "a/b"
    assert clean_path("hdfs://nn/metrics//") == "hdfs://nn/metrics"
