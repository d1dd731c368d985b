"""A `-b` directory starts on any machine (issue 22, item 7): the shard count its log was
written with replaces the default shard count, which depends on the host (its cores); a
`shards` flag or key that says otherwise is refused with one line naming it.

The host is simulated where the default is computed: `os.cpu_count` in the process that
reads the config (`python -m shardq serve`, which hands the settled config to the
supervisor), replaced before shardq is imported.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import greenstalk
import pytest
from helpers import REPO_ROOT, shard_key_config, tube_on_shard

from shardq.bench.procs import kill_group, terminate, wait_listening
from shardq.start import EXIT_CONFIG

START_TIMEOUT = 20.0
STOP_TIMEOUT = 10.0


def server_env() -> dict[str, str]:
    """This checkout's shardq first on the path (the server runs in a directory of its own)."""
    path = os.environ.get("PYTHONPATH")
    return dict(os.environ, PYTHONPATH=f"{REPO_ROOT}{os.pathsep}{path}" if path else str(REPO_ROOT))


def serve_on_cores(cores: int, *args: str) -> list[str]:
    """`python -m shardq serve ARGS` on a host that seems to have `cores` cores."""
    code = (
        "import os, runpy, sys\n"
        f"os.cpu_count = lambda: {cores}\n"
        "sys.argv[0] = 'shardq'\n"
        "runpy.run_module('shardq', run_name='__main__')\n"
    )
    return [sys.executable, "-c", code, "serve", "-l", "127.0.0.1", "-p", "0", *args]


class Running:
    """A server started with `serve_on_cores`, stopped by SIGTERM when done with."""

    def __init__(self, argv: list[str], tmp_path: Path) -> None:
        self.proc = subprocess.Popen(
            argv,
            cwd=tmp_path,  # no config/shardq.yaml here: the defaults and the flags
            env=server_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        port, data = wait_listening(self.proc, START_TIMEOUT)
        if port is None:
            kill_group(self.proc)
            _, err = self.proc.communicate(timeout=STOP_TIMEOUT)
            pytest.fail(f"not listening (exit {self.proc.returncode}): {data!r} {err[-2000:]!r}")
        self.port = port

    def client(self, **kwargs: object) -> greenstalk.Client:
        c = greenstalk.Client(("127.0.0.1", self.port), **kwargs)  # type: ignore[arg-type]
        c._sock.settimeout(10)  # a hung server fails the test instead of hanging it
        return c

    def stop(self) -> None:
        assert terminate(self.proc, STOP_TIMEOUT, group=True) == 0


@pytest.fixture
def running(tmp_path: Path) -> Iterator[list[Running]]:
    servers: list[Running] = []
    yield servers
    for server in servers:
        if server.proc.poll() is None:
            terminate(server.proc, STOP_TIMEOUT, group=True)


def start(running: list[Running], tmp_path: Path, cores: int, *args: str) -> Running:
    """A server on a simulated host of `cores` cores; stats-tube names a tube's shard."""
    shown = ("--config", str(shard_key_config(tmp_path)))
    server = Running(serve_on_cores(cores, *shown, *args), tmp_path)
    running.append(server)
    return server


def refused(tmp_path: Path, cores: int, *args: str) -> str:
    """The one line of a start that must be refused."""
    done = subprocess.run(
        serve_on_cores(cores, *args),
        cwd=tmp_path,
        env=server_env(),
        capture_output=True,
        timeout=START_TIMEOUT,
    )
    lines = done.stderr.decode(errors="replace").splitlines()
    assert (done.returncode, done.stdout, len(lines)) == (EXIT_CONFIG, b"", 1), (done, lines)
    return lines[0]


@pytest.mark.parametrize("written", [2, 3])
def test_a_log_starts_with_its_own_shard_count_on_a_bigger_host(
    running: list[Running], tmp_path: Path, written: int
) -> None:
    """Written on a 2-core host (with 2 shards, or 3 set by flag), started with the defaults
    on an 8-core one (the default there was 4 shards: refused, and exit status 2 keeps a
    systemd unit down): it starts, with the log's shard count, and every job is there."""
    wal = str(tmp_path / "wal")
    first = start(running, tmp_path, 2, "-b", wal, *(("--shards", "3") if written == 3 else ()))
    tubes = [tube_on_shard(shard, written, "kept-") for shard in range(written)]
    with first.client() as c:
        ids = {}
        for tube in tubes:
            c.use(tube)
            ids[tube] = c.put(tube)
    first.stop()
    assert (tmp_path / "wal" / "layout").read_text().startswith(f"shards={written}\n")

    again = start(running, tmp_path, 8, "-b", wal)
    with again.client(watch=tubes) as c:
        assert c.stats()["current-jobs-ready"] == written
        for tube in tubes:
            assert c.stats_tube(tube)["shard"] == tubes.index(tube)  # written shards: all there
        got = {c.reserve(timeout=5).body for _ in tubes}
        assert got == set(tubes)
    again.stop()


def test_a_shards_setting_that_disagrees_with_the_log_is_refused(
    running: list[Running], tmp_path: Path
) -> None:
    wal = str(tmp_path / "wal")
    start(running, tmp_path, 2, "-b", wal, "--shards", "3").stop()
    assert refused(tmp_path, 8, "-b", wal, "--shards", "2") == (
        f"shardq: flag --shards (shards): {wal} holds the log of 3 shards, not 2: start with "
        "--shards 3 or with shards unset (the log's count is the default then), or drain its "
        "jobs into a new server (re-partitioning a log is not supported yet)"
    )
    (tmp_path / "q.yaml").write_text(f"shards: 4\nwal:\n  dir: {wal}\n")
    line = refused(tmp_path, 8, "--config", "q.yaml")
    assert line.startswith(f"shardq: q.yaml: shards: {wal} holds the log of 3 shards, not 4: ")
    assert refused(tmp_path, 8, "-b", wal, "--serving", "4") == (
        f"shardq: serving: must not exceed shards (3, the count the log in {wal} was written "
        "with): each hosts one shard"
    )
    (tmp_path / "wal" / "layout").write_text("shards=three\n")
    assert refused(tmp_path, 8, "-b", wal) == (
        f"shardq: flag -b (wal.dir): {wal}/layout: not a layout file ('shards=three\\n')"
    )


def test_the_default_shard_count_does_not_grow_with_the_cores(
    running: list[Running], tmp_path: Path
) -> None:
    """On a 16-core host the default was 8 shards (8 processes, 226 MiB idle); now one per
    serving process: 2."""
    server = start(running, tmp_path, 16, "-b", str(tmp_path / "wal"))
    assert (tmp_path / "wal" / "layout").read_text() == "shards=2\nrouting=spread\n"
    seen = set()
    with server.client() as c:
        for tube in [f"n{i}" for i in range(8)]:
            c.use(tube)
            seen.add(c.stats_tube(tube)["shard"])
    assert seen == {0, 1}
