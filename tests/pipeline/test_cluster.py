"""The pipeline submitted to a real Spark standalone cluster gives the local-mode results.

Starts a master and one small worker on 127.0.0.1 from the installed pyspark, runs
`spark-submit --master spark://127.0.0.1:PORT shardq/pipeline/main.py` (the file, as is),
and compares its output with the session-scoped local run. Both daemons are stopped by PID.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from shardq.bench.procs import free_port, terminate

from .conftest import JVM_FLAGS, REPO, spark_env

pytestmark = pytest.mark.spark

#: Seconds for the master to listen and the worker to register.
START_TIMEOUT = 60.0
#: Seconds a daemon gets to exit on SIGTERM (by its PID: spark-class execs java) before SIGKILL.
STOP_TIMEOUT = 15.0


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def daemon_env(tmp: Path) -> dict[str, str]:
    env = {**os.environ, **spark_env(), "SPARK_HOME": str(spark_home())}
    env["SPARK_DAEMON_MEMORY"] = "256m"
    env["SPARK_DAEMON_JAVA_OPTS"] = JVM_FLAGS
    env["SPARK_WORKER_DIR"] = str(tmp / "work")
    env["SPARK_LOG_DIR"] = str(tmp / "logs")
    return env


def alive_workers(webui: int) -> int:
    with contextlib.suppress(OSError, ValueError):
        with urllib.request.urlopen(f"http://127.0.0.1:{webui}/json/", timeout=2) as r:
            state = json.load(r)
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")
    return 0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[str]:
    """A standalone master and one worker (1 core, 1 GiB); yields the master URL."""
    env = daemon_env(tmp_path)
    spark_class = str(spark_home() / "bin" / "spark-class")
    port, webui = free_port(), free_port()
    url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen[bytes]] = []
    log = open(tmp_path / "daemons.log", "wb")  # noqa: SIM115 (closed below)
    try:
        master = [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1"]
        master += ["--port", str(port), "--webui-port", str(webui)]
        procs.append(subprocess.Popen(master, env=env, stdout=log, stderr=log))
        worker = [spark_class, "org.apache.spark.deploy.worker.Worker", url]
        worker += ["--host", "127.0.0.1", "--cores", "1", "--memory", "1g"]
        worker += ["--webui-port", str(free_port()), "--work-dir", str(tmp_path / "work")]
        procs.append(subprocess.Popen(worker, env=env, stdout=log, stderr=log))
        deadline = time.monotonic() + START_TIMEOUT
        while alive_workers(webui) < 1:
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                log.flush()
                tail = (tmp_path / "daemons.log").read_text(errors="replace")[-3000:]
                pytest.fail(f"the Spark cluster did not come up:\n{tail}")
            time.sleep(0.5)
        yield url
    finally:
        for proc in reversed(procs):
            terminate(proc, STOP_TIMEOUT)
        log.close()


def test_spark_submit_to_standalone_cluster_matches_local(
    cluster, spark, generated, local_result, tmp_path
):
    out = tmp_path / "cluster-out"
    env = {**daemon_env(tmp_path), "PYTHONPATH": ""}
    argv = [str(spark_home() / "bin" / "spark-submit"), "--master", cluster]
    for conf in (
        "spark.ui.enabled=false",
        "spark.ui.showConsoleProgress=false",
        "spark.executor.memory=512m",
        "spark.cores.max=1",
        "spark.sql.shuffle.partitions=2",  # tiny data: fewer tasks, fewer driver round trips
        f"spark.driver.extraJavaOptions={JVM_FLAGS}",
        f"spark.executor.extraJavaOptions={JVM_FLAGS}",
    ):
        argv += ["--conf", conf]
    argv += [str(REPO / "shardq" / "pipeline" / "main.py"), str(generated[0]), "--out", str(out)]
    done = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]

    local_out = local_result[0]
    assert (out / "tubes.csv").read_text() == (local_out / "tubes.csv").read_text()
    for table in ("tubes.parquet", "minutes.parquet"):
        remote = spark.read.parquet(str(out / table)).collect()
        local = spark.read.parquet(str(local_out / table)).collect()
        assert sorted(remote) == sorted(local), table
