"""`shardq analyze` keeps Spark's classes in an archive (shardq/pipeline/classdata.py): the
first run's JVM writes it, the next run's JVM maps it (with -Xshare:on a JVM that cannot map
it does not start), and the results do not change; --no-class-cache writes none."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shardq.pipeline import classdata
from shardq.pipeline.classdata import PREFIX, SUFFIX

from .conftest import REPO, require_spark, spark_env

pytestmark = pytest.mark.spark

#: the first run's JVM writes the archive as it exits, after the command has answered
WRITTEN_WITHIN_S = 120.0


def analyze(events: Path, out: Path, cache: Path, *flags: str, opts: str = "") -> None:
    env = {**os.environ, **spark_env(), "SHARDQ_CACHE_DIR": str(cache)}
    env.pop("SPARK_SUBMIT_OPTS", None)
    env.pop("SPARK_CONF_DIR", None)  # a directory on the class path: Java archives nothing
    if opts:
        env["SPARK_SUBMIT_OPTS"] = opts
    argv = [sys.executable, "-m", "shardq", "analyze", str(events), "--out", str(out), *flags]
    done = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]


def whole_archive(cache: Path) -> Path | None:
    return next((p for p in cache.glob(f"{PREFIX}*{SUFFIX}") if classdata.whole(p)), None)


def test_the_first_run_writes_the_archive_and_the_next_maps_it(tmp_path: Path) -> None:
    require_spark()
    import gen_events  # tools/gen_events.py

    events = tmp_path / "events"
    events.mkdir()
    gen_events.generate(str(events), 1000, seed=3, span=60)
    cache = tmp_path / "cache"
    analyze(events, tmp_path / "plain", cache, "--no-class-cache")
    assert not cache.exists() or not list(cache.iterdir())

    analyze(events, tmp_path / "first", cache)
    deadline = time.monotonic() + WRITTEN_WITHIN_S
    while (archive := whole_archive(cache)) is None and time.monotonic() < deadline:
        time.sleep(0.2)  # the first run's JVM is still writing it
    assert archive is not None, list(cache.iterdir())

    analyze(events, tmp_path / "second", cache, opts="-Xshare:on")  # maps it, or fails
    csv = [(tmp_path / run / "tubes.csv").read_text() for run in ("plain", "first", "second")]
    assert csv[0] == csv[1] == csv[2]
    assert [p.name for p in cache.iterdir()] == [archive.name]
