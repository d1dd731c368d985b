"""The driver JVM's class-data archive (shardq/pipeline/classdata.py; no JVM): where it
lives, when a run maps it and when it has the JVM write it."""

from __future__ import annotations

from pathlib import Path

from shardq.pipeline import classdata
from shardq.pipeline.classdata import ClassData, cache_dir, for_run


def test_the_cache_directory_is_named_by_the_env_else_xdg_else_home(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cache_dir({"SHARDQ_CACHE_DIR": "/x/y", "XDG_CACHE_HOME": "/z"}) == Path("/x/y")
    assert cache_dir({"XDG_CACHE_HOME": "/z"}) == Path("/z/shardq")
    assert cache_dir({}) == tmp_path / ".cache" / "shardq"


def test_no_archive_yet_has_the_jvm_write_one_and_clears_those_of_another_java(tmp_path):
    stale = tmp_path / "spark-classes-0000.jsa"
    stale.write_bytes(b"\x01" * 64)
    unrelated = tmp_path / "notes.txt"
    unrelated.write_text("kept")
    data = ClassData(tmp_path, "abcd")
    assert data.jvm_options().startswith(f"-XX:ArchiveClassesAtExit={tmp_path}/")
    assert not stale.exists() and unrelated.exists()


def test_a_half_written_archive_is_written_again_a_whole_one_is_mapped(tmp_path):
    data = ClassData(tmp_path, "abcd")
    data.path.write_bytes(bytes(4096))  # the JVM writes the header last: zeros until done
    assert not data.whole()
    assert "-XX:ArchiveClassesAtExit=" in data.jvm_options()
    data.path.write_bytes(bytes.fromhex("a8ab0bf0") + bytes(4092))
    assert data.whole()
    assert data.jvm_options().split()[0] == f"-XX:SharedArchiveFile={data.path}"


def test_another_java_or_spark_is_another_archive(tmp_path):
    java = tmp_path / "java"
    java.write_bytes(b"a java")
    one = classdata.archive_key(str(java), str(tmp_path / "spark-1"))
    assert one == classdata.archive_key(str(java), str(tmp_path / "spark-1"))
    assert one != classdata.archive_key(str(java), str(tmp_path / "spark-2"))
    java.write_bytes(b"another java")
    assert one != classdata.archive_key(str(java), str(tmp_path / "spark-1"))


def test_no_archive_without_java_with_a_conf_dir_or_where_the_launcher_splits_paths(tmp_path):
    java_home = tmp_path / "jdk"
    (java_home / "bin").mkdir(parents=True)
    (java_home / "bin" / "java").write_bytes(b"")
    env = {"JAVA_HOME": str(java_home), "SHARDQ_CACHE_DIR": str(tmp_path / "cache")}
    made = for_run(str(tmp_path), env)
    assert made is not None and made.path.parent == tmp_path / "cache"
    assert for_run(str(tmp_path), {**env, "SHARDQ_CACHE_DIR": str(tmp_path / "a b")}) is None
    no_java = {"JAVA_HOME": str(tmp_path / "nowhere"), "SHARDQ_CACHE_DIR": str(tmp_path)}
    assert for_run(str(tmp_path), {**no_java, "PATH": ""}) is None
    conf = tmp_path / "conf"
    conf.mkdir()
    assert for_run(str(tmp_path), {**env, "SPARK_CONF_DIR": str(conf)}) is not None
    (conf / "log4j2.properties").write_text("")
    assert for_run(str(tmp_path), {**env, "SPARK_CONF_DIR": str(conf)}) is None
