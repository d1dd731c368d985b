"""One local SparkSession for the whole pipeline suite, quiet and fast.

Run these apart from the rest, in one process: `pytest -m spark -p no:xdist` (each xdist
worker would start its own JVM). Without pyspark or Java the tests skip locally but FAIL
under CI (env CI set): `make test` installs both, so a skip there would hide a broken setup.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from collections.abc import Iterator

import pytest
from helpers import REPO_ROOT as REPO
from helpers import skip_or_fail

HINT = "needs pyspark and Java: pip install -e '.[pipeline]' (make test does it)"
#: Settings that make a test JVM start faster and smaller; tests and local runs only.
JVM_FLAGS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def spark_env() -> dict[str, str]:
    """Environment for every JVM the tests start (session, spark-submit, master, worker)."""
    return {
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_CONF_DIR": str(REPO / "shardq" / "pipeline" / "spark"),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "TZ": "UTC",
    }


def require_spark() -> None:
    """Skip (locally) or fail (under CI) unless pyspark and a Java runtime are present."""
    missing = importlib.util.find_spec("pyspark") is None
    missing = missing or (shutil.which("java") is None and not os.environ.get("JAVA_HOME"))
    if missing:
        skip_or_fail(HINT)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    require_spark()
    os.environ.update(spark_env())
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("shardq-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("warehouse")))
        .config("spark.driver.extraJavaOptions", JVM_FLAGS)
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def generated(tmp_path_factory: pytest.TempPathFactory):
    """A small generated log (3 servers, one restart, shuffled lines) and its Truth."""
    import gen_events  # tools/gen_events.py (tests/conftest.py puts tools/ on the path)

    directory = tmp_path_factory.mktemp("events")
    truth = gen_events.Truth()
    n = gen_events.generate(str(directory), 20_000, seed=7, truth=truth, span=900, shuffle=True)
    return directory, truth, n


@pytest.fixture(scope="session")
def local_result(spark, generated, tmp_path_factory: pytest.TempPathFactory):
    """The pipeline run once in local mode on `generated`: (out dir, tube rows)."""
    from shardq.pipeline.main import run

    out = tmp_path_factory.mktemp("out")
    rows = run(spark, [str(generated[0])], str(out))
    return out, rows
