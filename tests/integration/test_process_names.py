"""A server's processes as `ps`, `pidof`, `pgrep` and `top` show them: the supervisor is
`shardq` (or `shardqd`), found by `pidof` and `pgrep` as beanstalkd is; every process's
command line is short and says its role (`shardq: shard 3`), as postgres's do."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO_ROOT

from shardq.bench.procs import group_members, terminate, wait_listening


def cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").decode()


def found_by(*command: str) -> set[int]:
    out = subprocess.run(command, capture_output=True, text=True, timeout=10).stdout
    return {int(pid) for pid in out.split()}


@pytest.mark.parametrize("shards", [1, 4])
def test_the_supervisor_is_shardq_and_each_child_says_its_role(shardq_server, shards) -> None:
    srv = shardq_server(shards)
    children = srv.wait_all_children()
    supervisor = srv.proc.pid
    assert Path(f"/proc/{supervisor}/comm").read_text().strip() == "shardq"
    assert cmdline(supervisor) == f"shardq: supervisor 127.0.0.1:{srv.port}"
    mine = set(group_members(supervisor))
    for finder in (("pidof", "shardq"), ("pgrep", "-x", "shardq")):
        assert found_by(*finder) & mine == {supervisor}, finder  # the children are not
    titles = sorted(cmdline(pid) for pid in mine - {supervisor})
    assert titles == sorted(f"shardq: {label}" for label in children)


def test_shardqd_is_found_as_shardqd(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "shardq.dropin", "-l", "127.0.0.1", "-p", "0"]
    command += ["--run-dir", str(tmp_path / "run")]
    proc = subprocess.Popen(
        command,
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        port, _data = wait_listening(proc, 20)
        assert port is not None
        assert Path(f"/proc/{proc.pid}/comm").read_text().strip() == "shardqd"
        assert cmdline(proc.pid) == f"shardqd: supervisor 127.0.0.1:{port}"
        assert proc.pid in found_by("pidof", "shardqd")
    finally:
        assert terminate(proc, 10, group=True) == 0
        if proc.stdout is not None:
            proc.stdout.close()
