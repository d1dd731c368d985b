"""`shardq serve`'s start-up as a new user meets it: started from any directory, given bad
directories, interrupted, told to become another user, given beanstalkd's -c and -n."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from helpers import connect, read_replies, send

from shardq.bench.procs import kill_group, kill_pids, pids_mentioning, terminate, wait_listening
from shardq.processes.spawn import SAFE_PATH

#: Seconds to wait for the listening line, and for a refused start to exit.
START_TIMEOUT = 20.0
STOP_TIMEOUT = 10.0


def shardq_command() -> list[str]:
    """The `shardq` console script next to this interpreter, as a user runs it; without one,
    this interpreter with -P (neither imports from the working directory)."""
    script = Path(sys.executable).with_name("shardq")
    return [str(script)] if script.is_file() else [sys.executable, SAFE_PATH, "-m", "shardq"]


def put_and_reserve(port: int) -> list[bytes]:
    """put, reserve and delete one job on a fresh connection; the three replies."""
    sock = connect(port)
    try:
        send(sock, b"put 0 0 60 2\r\nhi\r\n")
        [inserted] = read_replies(sock, 1)
        job_id = int(inserted.split()[1])
        send(sock, f"reserve-with-timeout 5\r\ndelete {job_id}\r\n".encode())
        return [inserted, *read_replies(sock, 2, timeout=6)]
    finally:
        sock.close()


def serve_and_use(cwd: Path, run_dir: Path, extra: tuple[str, ...] = ()) -> list[bytes]:
    """Start `shardq serve` in `cwd`, put and reserve a job, stop it; the replies."""
    cmd = [*shardq_command(), "serve", "-l", "127.0.0.1", "-p", "0"]
    cmd += ["--run-dir", str(run_dir), *extra]
    with open(cwd / "stderr.log", "wb") as err:
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            start_new_session=True,
        )
    try:
        port, data = wait_listening(proc, START_TIMEOUT)
        stderr = (cwd / "stderr.log").read_text(errors="replace")
        assert port is not None, f"no listening line (exit {proc.poll()}): {data!r}\n{stderr}"
        return put_and_reserve(port)
    finally:
        terminate(proc, STOP_TIMEOUT, group=True)
        if proc.poll() is None:
            kill_group(proc)
        kill_pids(pids_mentioning(str(run_dir)))
        if proc.stdout is not None:
            proc.stdout.close()


def test_serve_ignores_a_shardq_package_in_the_working_directory(tmp_path: Path) -> None:
    decoy = tmp_path / "shardq"
    decoy.mkdir()
    (decoy / "__init__.py").write_text('raise ImportError("the decoy shardq was imported")\n')
    replies = serve_and_use(tmp_path, tmp_path / "run")
    assert replies[0].startswith(b"INSERTED ")
    job_id = replies[0].split()[1].decode()
    assert replies[1:] == [f"RESERVED {job_id} 2\r\nhi\r\n".encode(), b"DELETED\r\n"]
    assert "decoy" not in (tmp_path / "stderr.log").read_text()
