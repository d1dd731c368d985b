"""`shardq bench --protocol kestrel|workq` against a live shardq with both front-ends:
counted operations, checked replies, and nothing left in the server after the run.

Throughput is measured for docs/BENCHMARKS.md, never asserted here.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import connect, read_replies, send
from kestrel_server import Raw, launch

from shardq.bench.procs import kestrel_port, kill_group, listening_port, read_lines, workq_port


@pytest.fixture(scope="module")
def ports(tmp_path_factory: pytest.TempPathFactory):
    proc, _run_dir, _err = launch(
        tmp_path_factory.mktemp("bench"), 2, ("--kestrel-port", "0", "--workq-port", "0")
    )
    data = read_lines(proc, 3, 20)
    yield listening_port(data.partition(b"\n")[0] + b"\n"), kestrel_port(data), workq_port(data)
    kill_group(proc)


def bench(port: int, *args: str) -> dict:
    cmd = [sys.executable, "-m", "shardq", "bench", "--port", str(port), "--json", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr + done.stdout
    return json.loads(done.stdout)


def server_stats(port: int) -> dict[str, str]:
    sock = connect(port)
    send(sock, b"stats\r\n")
    body = read_replies(sock, 1)[0].decode()
    sock.close()
    return dict(line.split(": ", 1) for line in body.splitlines()[2:-1] if ": " in line)


@pytest.mark.parametrize("protocol", ["kestrel", "workq", "beanstalk-door"])
@pytest.mark.parametrize("load", ["put", "reserve"])
def test_a_load_through_another_door(ports, protocol: str, load: str) -> None:
    beanstalk, kestrel, workq = ports
    port = {"kestrel": kestrel, "workq": workq, "beanstalk-door": beanstalk}[protocol]
    args = ["--protocol", protocol, "-w", load, "-c", "3", "--pipeline", "4", "-n", "300"]
    result = bench(port, *args, "--prefill", "400")
    assert result["protocol"] == protocol and result["workload"] == load
    assert result["ops"] == 300 and result["ops_per_s"] > 0
    stats = server_stats(beanstalk)
    for state in ("ready", "reserved", "delayed", "buried"):
        assert stats[f"current-jobs-{state}"] == "0", stats  # the run cleaned up after itself


def test_a_wrong_load_is_refused_with_exit_2(ports) -> None:
    _beanstalk, kestrel, _workq = ports
    cmd = [sys.executable, "-m", "shardq", "bench", "--port", str(kestrel)]
    done = subprocess.run(
        [*cmd, "--protocol", "kestrel", "-w", "mixed"], capture_output=True, text=True
    )
    assert done.returncode == 2 and "--protocol" in done.stderr
    assert Raw(kestrel).ask(b"version\r\n").startswith(b"VERSION")
