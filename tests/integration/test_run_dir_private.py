"""The run directory (the inter-process sockets) is open to the server's user only, whatever
the umask: a local user who could connect to those sockets could put jobs into a shard
behind every check of the serving processes. A directory of the server's own becomes 0700;
a shared one (sticky, like /tmp) is refused with one line and left as it was.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from helpers import REPO_ROOT

from shardq.bench.procs import terminate, wait_listening
from shardq.start import EXIT_CONFIG


def start(run_dir: Path, tmp_path: Path) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "shardq", "serve", "-p", "0", "--shards", "2"]
    cmd += ["--run-dir", str(run_dir)]
    return subprocess.Popen(
        cmd,
        cwd=REPO_ROOT,
        env=dict(os.environ, TMPDIR=str(tmp_path)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        umask=0,  # everything it creates would be open to everyone, but for the check
        start_new_session=True,
    )


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def serve_and_stop(run_dir: Path, tmp_path: Path) -> list[Path]:
    """Start a server on `run_dir`, check the directory while it serves, stop it; returns
    the socket files it had made."""
    proc = start(run_dir, tmp_path)
    try:
        port, data = wait_listening(proc, 20)
        assert port is not None, data
        assert mode(run_dir) == 0o700
        return [p for p in run_dir.iterdir() if p.is_socket()]
    finally:
        assert terminate(proc, 10, group=True) == 0
        proc.communicate()


def test_a_new_run_dir_is_private_under_umask_0(tmp_path: Path) -> None:
    sockets = serve_and_stop(tmp_path / "new-run", tmp_path)
    assert sockets, "the run directory holds the inter-process sockets"


def test_an_open_run_dir_of_its_own_is_made_private(tmp_path: Path) -> None:
    run_dir = tmp_path / "open-run"
    run_dir.mkdir()
    run_dir.chmod(0o777)
    serve_and_stop(run_dir, tmp_path)
    assert mode(run_dir) == 0o700


def test_a_shared_run_dir_is_refused_with_one_line(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    proc = start(shared, tmp_path)
    out, err = proc.communicate(timeout=20)
    assert (proc.returncode, out) == (EXIT_CONFIG, b"")
    lines = err.decode().splitlines()
    assert lines == [
        f"shardq: flag --run-dir (run_dir): {shared} is shared with other users (mode 0o1777);"
        " give a directory only the server uses"
    ]
    assert mode(shared) == 0o1777
    assert not any(p.is_socket() for p in shared.iterdir())
