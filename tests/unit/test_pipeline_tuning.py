"""`shardq analyze`'s Spark settings sized to the input (shardq/pipeline/tuning.py; no JVM):
few shuffle partitions, no web UI, a fast-starting driver JVM and plainly run queries for a
small local input."""

from pathlib import Path

from shardq.pipeline.tuning import (
    BYTES_PER_PARTITION,
    FAST_JVM,
    MAX_PARTITIONS,
    PLAIN_QUERIES,
    SMALL_QUERIES,
    input_bytes,
    tuning_for,
)


def events(tmp_path: Path, size: int) -> Path:
    directory = tmp_path / "events"
    directory.mkdir()
    (directory / "a.jsonl").write_bytes(b"x" * size)
    (directory / "b.jsonl").write_bytes(b"x" * size)
    return directory


def test_a_small_local_input_gets_plain_queries_no_ui_and_the_fast_jvm(tmp_path: Path):
    tuning = tuning_for([str(events(tmp_path, 1000))], None)
    assert tuning.conf == {"spark.ui.enabled": "false", **PLAIN_QUERIES}
    assert tuning.conf["spark.sql.shuffle.partitions"] == "1"
    assert tuning.conf["spark.sql.adaptive.enabled"] == "false"
    assert tuning.conf["spark.sql.codegen.wholeStage"] == "false"
    assert tuning.jvm == FAST_JVM


def test_plain_queries_only_below_the_threshold_and_only_locally(monkeypatch):
    def sized(size: int) -> None:
        monkeypatch.setattr("shardq.pipeline.tuning.input_bytes", lambda paths: size)

    sized(SMALL_QUERIES - 1)
    assert PLAIN_QUERIES.items() <= tuning_for(["x"], None).conf.items()
    assert PLAIN_QUERIES.items() <= tuning_for(["x"], "local[2]").conf.items()
    cluster = tuning_for(["x"], "spark://host:7077").conf
    assert cluster == {"spark.sql.shuffle.partitions": "2"}
    sized(SMALL_QUERIES)
    big = tuning_for(["x"], None)
    assert big.conf == {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"}
    assert big.jvm == FAST_JVM  # still below SMALL_INPUT


def test_partitions_follow_the_input_size(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(
        "shardq.pipeline.tuning.input_bytes", lambda paths: 10 * BYTES_PER_PARTITION
    )
    assert tuning_for(["x"], None).conf["spark.sql.shuffle.partitions"] == "10"
    assert tuning_for(["x"], None).jvm == ""  # 640 MiB: not small
    monkeypatch.setattr("shardq.pipeline.tuning.input_bytes", lambda paths: 10**15)
    assert tuning_for(["x"], None).conf["spark.sql.shuffle.partitions"] == str(MAX_PARTITIONS)


def test_a_cluster_keeps_its_ui_and_jvm_and_verbose_keeps_the_ui(tmp_path: Path):
    path = str(events(tmp_path, 10))
    cluster = tuning_for([path], "spark://host:7077")
    assert cluster.conf == {"spark.sql.shuffle.partitions": "2"} and cluster.jvm == ""
    assert "spark.ui.enabled" not in tuning_for([path], "local[2]", verbose=1).conf


def test_input_behind_a_uri_keeps_sparks_defaults(tmp_path: Path):
    assert input_bytes(["hdfs://nn/events"]) is None
    assert tuning_for(["s3a://bucket/ev/*.jsonl"], None).conf == {}
    assert input_bytes([f"{events(tmp_path, 7)}/*.jsonl"]) == 14
