"""The client matrix: real, unmodified beanstalk clients in PHP, Ruby and Node drive the
common flows against beanstalkd 1.12 and against shardq with 1 and with 4 shards (one
serving process) and with 4 shards over 2 serving processes.

Each driver (tests/clients/<language>/driver.*) runs the scenario of tests/clients/README.md
through its client's own API, checks every answer as it goes and prints what the client
returned as JSON; here the run must succeed and its checks must equal :func:`expected_checks`,
the one table of expectations for every client and every server.

A missing runtime or client library fails under CI (env ``CI`` set) and is skipped otherwise:
``make test`` installs them all (apt-get for PHP, Ruby and Node, ``npm ci`` for fivebeans).
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from helpers import LAYOUTS, REPO_ROOT, Layout, shard_of_tube, skip_or_fail

from shardq.bench.procs import kill_group, terminate, wait_listening

log = logging.getLogger(__name__)

pytestmark = pytest.mark.clients

HERE = Path(__file__).resolve().parent
#: Seconds one driver run may take (a run takes about 7 s: its delays and sleeps add to 6 s).
DRIVER_TIMEOUT = 90.0
#: Seconds a "is this client installed?" probe may take.
PROBE_TIMEOUT = 30.0
#: Seconds to wait for shardq's "listening" line, and for it to exit on SIGTERM.
SERVER_TIMEOUT = 20.0
#: The job body of the first flow: a CRLF inside checks the clients' framing.
BODY = "hello\r\nworld"


@dataclass(frozen=True)
class Client:
    """One client library: how to run its driver and how to tell it is installed."""

    runtime: str
    driver: list[str]
    probe: list[str]
    hint: str
    #: Where the probe runs (Node resolves ``require`` from there).
    probe_cwd: Path = HERE


CLIENTS: dict[str, Client] = {
    "pheanstalk": Client(
        runtime="php",
        driver=["php", "-d", "display_errors=stderr", str(HERE / "php" / "driver.php")],
        probe=["php", "-r", 'require "Pheanstalk/autoload.php"; new Pheanstalk\\JobId(1);'],
        hint="pheanstalk needs PHP and Debian's php-pda-pheanstalk: "
        "apt-get install -y php-cli php-pda-pheanstalk (make test installs them)",
    ),
    "beaneater": Client(
        runtime="ruby",
        driver=["ruby", str(HERE / "ruby" / "driver.rb")],
        probe=["ruby", "-e", 'require "beaneater"'],
        hint="beaneater needs Ruby and Debian's ruby-beaneater: "
        "apt-get install -y ruby ruby-beaneater (make test installs them)",
    ),
    "fivebeans": Client(
        runtime="node",
        driver=["node", "--no-deprecation", str(HERE / "node" / "driver.js")],
        probe=["node", "-e", 'require("fivebeans")'],
        probe_cwd=HERE / "node",
        hint="fivebeans needs Node.js and npm (apt-get install -y nodejs npm), then "
        "'npm ci' in tests/clients/node (make test does both)",
    ),
}

#: Server name -> shard count (None: the real beanstalkd 1.12).
SERVERS: dict[str, Layout | None] = {
    "beanstalkd": None,
    **{f"shardq-{layout}": layout for layout in LAYOUTS},
}


@cache
def missing(name: str) -> str | None:
    """None when client ``name`` and its runtime are installed, else what is wrong."""
    client = CLIENTS[name]
    if shutil.which(client.runtime) is None:
        return f"{client.runtime} is not installed"
    try:
        probe = subprocess.run(
            client.probe,
            cwd=client.probe_cwd,
            capture_output=True,
            timeout=PROBE_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        return f"{client.probe} did not finish within {PROBE_TIMEOUT} s"
    if probe.returncode != 0:
        return f"{name} cannot be loaded: {probe.stderr.decode(errors='replace')[:500]}"
    return None


def tube_prefix(client: str) -> str:
    """A fresh prefix whose tubes ``<prefix>a`` and ``<prefix>b`` are on different shards of 4
    (`shard_of_tube`, as the server routes), so the tubes flow crosses shards."""
    while True:
        prefix = f"cm-{client}-{uuid.uuid4().hex[:8]}-"
        if shard_of_tube(f"{prefix}a", 4) != shard_of_tube(f"{prefix}b", 4):
            return prefix


def expected_checks(ta: str, tb: str) -> dict[str, Any]:
    """Every check of the scenario (tests/clients/README.md) and the value it must have,
    the same for every client and server; ``ta``/``tb`` are the two tube names."""
    return {
        "use.used": ta,
        "put.stats_job.tube": ta,
        "put.stats_job.state": "ready",
        "put.stats_job.pri": 100,
        "put.stats_job.ttr": 30,
        "put.stats_tube.name": ta,
        "put.stats_tube.current_jobs_ready": 1,
        "put.stats_tube.current_jobs_urgent": 1,
        "put.stats_tube.total_jobs": 1,
        "put.peek_ready.same_id": True,
        "put.peek_ready.body": BODY,
        "put.peek_id.body": BODY,
        "watch.watched": [ta],
        "reserve.same_id": True,
        "reserve.body": BODY,
        "reserve.stats_job.state": "reserved",
        "reserve.stats_job.reserves": 1,
        "reserve.stats_tube.current_jobs_reserved": 1,
        "delete.stats_job.not_found": True,
        "delete.stats_tube.current_jobs_ready": 0,
        "timeout.timed_out": True,
        "timeout.waited": True,
        "delayed.stats_job.state": "delayed",
        "delayed.stats_job.delay": 1,
        "delayed.stats_tube.current_jobs_delayed": 1,
        "delayed.peek_delayed.same_id": True,
        "delayed.peek_ready.none": True,
        "delayed.reserve_before.timed_out": True,
        "delayed.reserve_after.same_id": True,
        "delayed.reserve_after.waited": True,
        "release.stats_job.state": "delayed",
        "release.stats_job.pri": 50,
        "release.stats_job.releases": 1,
        "release.reserve_before.timed_out": True,
        "release.reserve_after.same_id": True,
        "release.reserve_after.waited": True,
        "bury.stats_job.state": "buried",
        "bury.stats_job.pri": 60,
        "bury.stats_job.buries": 1,
        "bury.stats_tube.current_jobs_buried": 1,
        "bury.peek_buried.same_id": True,
        "bury.reserve.timed_out": True,
        "kick.count": 1,
        "kick.stats_job.state": "ready",
        "kick.stats_job.kicks": 1,
        "kick.reserve.same_id": True,
        "kick_job.stats_job.state": "ready",
        "kick_job.stats_job.kicks": 2,
        "touch.reserve.same_id": True,
        "touch.before.time_left": 1,
        "touch.after.time_left": 2,
        "touch.after.state": "reserved",
        "touch.after_first_ttr.state": "reserved",
        "tubes.used": tb,
        "tubes.stats_job.tube": tb,
        "tubes.watched": [ta, tb],
        "tubes.reserve_priority.same_id": True,
        "tubes.ignore.watched": [ta],
        "tubes.ignore_last.not_ignored": True,
        "tubes.reserve.same_id": True,
        "tubes.stats_tube.current_watching": 1,
        "tubes.stats_tube.current_using": 1,
        "tubes.gc.not_found": True,
        "peek.empty.ready": True,
        "peek.empty.delayed": True,
        "peek.empty.buried": True,
        "stats.total_jobs": 5,
        "stats.current_jobs_ready": 0,
        "list_tubes.has_a": True,
    }


def norm(value: Any) -> Any:
    """A value as text, the way the drivers compare: PHP's pheanstalk gives every stats value
    as a string ("100"), the YAML-parsing clients give numbers; a string keeps its quotes."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, list):
        return [norm(item) for item in value]
    return str(value)


def run_driver(name: str, port: int, prefix: str) -> subprocess.CompletedProcess[str]:
    cmd = [*CLIENTS[name].driver, "127.0.0.1", str(port), prefix]
    try:
        return subprocess.run(
            cmd,
            cwd=HERE,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=DRIVER_TIMEOUT,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{name} driver did not finish within {DRIVER_TIMEOUT} s: {cmd}\n{exc}")


@pytest.mark.parametrize("server", list(SERVERS))
@pytest.mark.parametrize("client", list(CLIENTS))
def test_client_flows(
    client: str,
    server: str,
    start_beanstalkd: Callable[[], int],
    start_shardq: Callable[[Layout], int],
) -> None:
    problem = missing(client)
    if problem is not None:
        skip_or_fail(f"{problem}; {CLIENTS[client].hint}")
    shards = SERVERS[server]
    port = start_beanstalkd() if shards is None else start_shardq(shards)
    prefix = tube_prefix(client)

    proc = run_driver(client, port, prefix)
    log.info("%s against %s: exit %s\n%s", client, server, proc.returncode, proc.stderr)
    assert proc.returncode == 0, (
        f"{client} against {server} (port {port}) exited {proc.returncode}\n"
        f"stderr:\n{proc.stderr[-4000:]}\nstdout:\n{proc.stdout[-2000:]}"
    )
    lines = proc.stdout.strip().splitlines()
    assert lines, f"{client} printed no result; stderr:\n{proc.stderr[-2000:]}"
    result = json.loads(lines[-1])
    assert result["client"] == client
    log.info("%s %s against %s", client, result.get("version", ""), server)

    got = {key: norm(value) for key, value in result["checks"].items()}
    want = {key: norm(value) for key, value in expected_checks(f"{prefix}a", f"{prefix}b").items()}
    wrong = {key: (got.get(key), want.get(key)) for key in want.keys() | got.keys()}
    wrong = {key: pair for key, pair in wrong.items() if pair[0] != pair[1]}
    assert not wrong, f"{client} against {server}: (got, expected) per check: {wrong}"
    assert list(got) == list(want), "the driver ran the checks in another order"


@pytest.fixture
def quoted_shardq_port() -> Iterator[int]:
    """A shardq (1 shard) that quotes every stats string value, as beanstalkd 1.13 does."""
    cmd = [sys.executable, "-m", "shardq", "serve", "-l", "127.0.0.1", "-p", "0"]
    cmd += ["--shards", "1", "--stats-yaml", "quoted"]
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            cmd,
            cwd=REPO_ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            start_new_session=True,
        )
        try:
            port, data = wait_listening(proc, SERVER_TIMEOUT)
            if port is None:
                err.seek(0)
                pytest.fail(
                    f"shardq --stats-yaml quoted did not start: {data[:300]!r}\n"
                    f"{err.read().decode(errors='replace')[-3000:]}"
                )
            yield port
        finally:
            if terminate(proc, SERVER_TIMEOUT, group=True) is None:
                kill_group(proc)
            if proc.stdout is not None:
                proc.stdout.close()


def test_matrix_sees_quoted_tube_names(quoted_shardq_port: int) -> None:
    """The control: pheanstalk keeps YAML quotes in a value, so against 1.13-style quoted
    stats its driver must stop at the first tube name read back, quotes and all. This is what
    the matrix's tube-name checks would catch if shardq quoted by default."""
    problem = missing("pheanstalk")
    if problem is not None:
        skip_or_fail(f"{problem}; {CLIENTS['pheanstalk'].hint}")
    prefix = tube_prefix("pheanstalk")
    proc = run_driver("pheanstalk", quoted_shardq_port, prefix)
    assert proc.returncode == 1, f"exit {proc.returncode}; stderr:\n{proc.stderr[-2000:]}"
    quoted = json.dumps(f'"{prefix}a"')
    assert f"MISMATCH: put.stats_job.tube: got {quoted}, expected" in proc.stderr, proc.stderr
