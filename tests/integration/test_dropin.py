"""``shardqd``: shardq started with beanstalkd 1.12's own command line.

The flags are parsed as beanstalkd's getopt parses them (``-VV``, ``-f0``), -v/-h answer
and exit 0, an unknown flag or a stray argument exits 5 as beanstalkd does; a server
started this way serves, and a client that connects as soon as the port accepts, before
the server says it is listening, is answered rather than refused or lost.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import REPO_ROOT

from shardq import __version__
from shardq.bench.procs import read_line, terminate

DROPIN = [sys.executable, "-m", "shardq.dropin"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*DROPIN, *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=30
    )


def test_version_and_help_exit_0() -> None:
    version = run("-v")
    assert (version.returncode, version.stdout) == (0, f"shardq {__version__}\n")
    usage = run("-h")
    assert usage.returncode == 0
    assert usage.stderr.startswith("Use: shardqd [OPTIONS]") and "-l ADDR" in usage.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [(("-x",), "option -x not recognized"), (("-p", "0", "extra"), "unknown argument: extra")],
)
def test_an_unknown_flag_or_argument_exits_5(args: tuple[str, ...], says: str) -> None:
    result = run(*args)
    assert result.returncode == 5
    assert result.stderr.startswith(f"shardqd: {says}\n")


def test_a_bad_value_is_one_line_naming_the_flag() -> None:
    result = run("-p", "70000")
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "-p" in lines[0] and "70000" in lines[0], lines


def test_beanstalkds_flags_start_a_server_that_answers_early_clients(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    wal = tmp_path / "wal"
    args = ["-l", "127.0.0.1", "-p", str(port), "-b", str(wal), "-f0", "-VV", "-z", "10"]
    args += ["--shards", "2", "--run-dir", str(tmp_path / "run"), "-c"]
    proc = subprocess.Popen(
        [*DROPIN, *args],
        cwd=REPO_ROOT,
        env=dict(os.environ, TMPDIR=str(tmp_path)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 20
        while True:  # connect as soon as the port accepts: before "listening", as a rule
            try:
                early = socket.create_connection(("127.0.0.1", port), timeout=20)
                break
            except ConnectionRefusedError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.005)
        with early:
            early.sendall(b"put 0 0 60 2\r\nhi\r\nput 0 0 60 11\r\nhello world\r\n")
            got = b""
            while got.count(b"\r\n") < 2:
                chunk = early.recv(100)
                assert chunk, got
                got += chunk
            assert got == b"INSERTED 1\r\nJOB_TOO_BIG\r\n"  # -z 10 applied
        assert read_line(proc, 20) == f"shardq listening on 127.0.0.1:{port}\n".encode()
        assert any(p.name.startswith("shard-") for p in wal.iterdir())  # -b applied
    finally:
        assert terminate(proc, 10, group=True) == 0
        out, err_bytes = proc.communicate(timeout=10)
    err = err_bytes.decode()
    assert out == b""  # the listening line was read above
    assert "shardq: warning: -c is ignored: the log is always compacted" in err
    assert "DEBUG" in err or "debug" in err.lower(), err[-2000:]  # -VV: the most verbose


def test_a_start_refused_after_the_early_bind_leaves_no_socket_behind(tmp_path: Path) -> None:
    """shardqd binds -l/-p before its checks run (`dropin.bind_early`); a refusal by a
    later check (here: -b names a file) closes the socket and removes its file again."""
    path = tmp_path / "q.sock"
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    result = run("-l", f"unix:{path}", "-b", str(not_a_dir))
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and str(not_a_dir) in lines[0], lines
    assert not path.exists()


def test_an_address_in_use_is_refused_as_before_the_early_bind() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run("-l", "127.0.0.1", "-p", str(port))
    assert result.returncode == 1
    assert result.stderr == f"shardq: cannot listen on 127.0.0.1:{port}: Address already in use\n"
