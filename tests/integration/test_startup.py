"""`shardq serve`'s start-up as a new user meets it: started from any directory, given bad
directories, interrupted, told to become another user, given beanstalkd's -c and -n."""

from __future__ import annotations

import os
import pwd
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import connect, poll_for, read_replies, send

from shardq.bench.procs import (
    cmdline,
    kill_group,
    kill_pids,
    role_pids,
    session_members,
    terminate,
    wait_listening,
)
from shardq.config import DEFAULT_CONFIG
from shardq.processes.supervision.spawn import SAFE_PATH
from shardq.start import EXIT_CONFIG
from shardq.storage.layout import FILE as LAYOUT_FILE

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
        kill_pids(session_members(proc.pid))
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


def run_cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`shardq ARGS` to the end (a refused start, or -h)."""
    return subprocess.run(
        [*shardq_command(), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT,
    )


def snapshot(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.fixture
def refused(tmp_path: Path) -> Callable[..., str]:
    """``refused(*serve_args) -> the one stderr line`` of a start that must be refused before
    anything is bound, leaving nothing new under tmp_path or the (empty) TMPDIR."""
    tmp_dir = tmp_path / "tmp"
    tmp_dir.mkdir()
    (tmp_path / "afile").write_text("not a directory\n")

    def run(*args: str) -> str:
        before = snapshot(tmp_path)
        env = dict(os.environ, TMPDIR=str(tmp_dir))
        result = run_cli("serve", "-l", "127.0.0.1", "-p", "0", *args, cwd=tmp_path, env=env)
        assert result.returncode == EXIT_CONFIG, result
        assert result.stdout == ""
        lines = result.stderr.splitlines()
        assert len(lines) == 1, result.stderr
        assert snapshot(tmp_path) == before, "a refused start left something behind"
        return lines[0]

    return run


@pytest.mark.parametrize("flag", ["-b", "--run-dir", "--events"])
def test_a_file_given_as_a_directory_is_named(refused, flag: str) -> None:
    key = {"-b": "wal.dir", "--run-dir": "run_dir", "--events": "events.dir"}[flag]
    assert refused(flag, "afile") == (
        f"shardq: flag {flag} ({key}): afile exists but is not a directory"
    )


def test_a_directory_under_a_file_cannot_be_created(refused, tmp_path: Path) -> None:
    line = refused("--run-dir", "ok/new", "--events", "afile/events")
    assert line == (
        f"shardq: flag --events (events.dir): afile/events cannot be created: "
        f"{tmp_path / 'afile'} is not a directory"
    )


def test_a_directory_the_system_refuses_cannot_be_created(refused) -> None:
    line = refused("-b", "new/wal", "--events", "/proc/shardq-test/events")
    assert line.startswith(
        "shardq: flag --events (events.dir): /proc/shardq-test/events cannot be created: "
    ), line


def test_a_directory_from_the_config_file_is_named_by_its_key(refused, tmp_path: Path) -> None:
    (tmp_path / "q.yaml").write_text("wal: {dir: afile}\n")
    assert refused("--config", "q.yaml") == (
        "shardq: q.yaml: wal.dir: afile exists but is not a directory"
    )


def test_a_log_of_another_shard_count_is_refused_before_binding(refused, tmp_path: Path) -> None:
    (tmp_path / "wal").mkdir()
    (tmp_path / "wal" / LAYOUT_FILE).write_text("shards=3\n")
    line = refused("-b", "wal", "--shards", "2")
    assert line.startswith("shardq: flag --shards (shards): wal holds the log of 3 shards, "), line
    assert "start with --shards 3" in line


def test_a_directory_that_is_not_writable_is_named(refused) -> None:
    with tempfile.TemporaryDirectory(dir="/tmp") as base:
        os.chmod(base, 0o755)  # others may look in: -u nobody reaches the directory
        locked = Path(base, "locked")
        locked.mkdir(mode=0o555)
        # root writes anywhere: it is asked to become a user that may not write there
        extra = ("-u", "nobody") if os.geteuid() == 0 else ()
        line = refused("-b", str(locked), *extra)
    assert line == f"shardq: flag -b (wal.dir): {locked} is not writable: Permission denied"


def test_unknown_user_is_refused(refused) -> None:
    assert refused("-u", "no-such-user-here") == (
        "shardq: flag -u (user): no such user 'no-such-user-here'"
    )


@pytest.mark.parametrize("config_file", [False, True], ids=["defaults", "file"])
def test_the_log_names_the_config_file(tmp_path: Path, config_file: bool) -> None:
    extra: tuple[str, ...] = ("-V",)
    if config_file:
        (tmp_path / "q.yaml").write_text("poll_us: 50\n")
        extra += ("--config", "q.yaml")
    serve_and_use(tmp_path, tmp_path / "run", extra)
    stderr = (tmp_path / "stderr.log").read_text()
    expected = "q.yaml" if config_file else f"defaults (no --config, no {DEFAULT_CONFIG} in"
    assert f"shardq[supervisor] INFO config: {expected}" in stderr, stderr


def start_serving_in(
    tmp_path: Path, tmp_dir: Path, stdout: int, extra: tuple[str, ...] = ()
) -> subprocess.Popen[bytes]:
    """`shardq serve -p 0` started in tmp_path, with TMPDIR=tmp_dir (created here) and its
    stderr in tmp_path/stderr.log, in a session of its own."""
    tmp_dir.mkdir()
    cmd = [*shardq_command(), "serve", "-l", "127.0.0.1", "-p", "0", *extra]
    with open(tmp_path / "stderr.log", "wb") as err:
        return subprocess.Popen(
            cmd,
            cwd=tmp_path,
            env=dict(os.environ, TMPDIR=str(tmp_dir)),
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=err,
            start_new_session=True,
        )


def test_sigint_while_starting_stops_quietly(tmp_path: Path) -> None:
    """Ctrl-C before the server serves: a clean stop, not "did not come up within 30 s".
    The server is held before it serves, for as long as the test wants: the coordinator
    reads its id-block table (`-b DIR`: DIR/id-blocks) before it answers anyone, and here
    that table is a FIFO nobody writes, so its open() waits (as on a disk that hangs) and
    no serving process becomes ready. (Before, the test stopped the coordinator with
    SIGSTOP once it saw it, and on a loaded machine the server could come up first: a try
    that proved nothing, retried up to five times.) The supervisor handles signals before
    it starts its first child, the coordinator, so once that runs, SIGINT is handled."""
    log_dir = tmp_path / "wal"
    log_dir.mkdir()
    os.mkfifo(log_dir / "id-blocks")
    tmp_dir = tmp_path / "tmp"
    proc = start_serving_in(tmp_path, tmp_dir, subprocess.PIPE, ("-b", str(log_dir)))
    try:
        poll_for(lambda: role_pids(proc.pid).get("coordinator"), timeout=10)
        os.kill(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=STOP_TIMEOUT)
    finally:
        if proc.poll() is None:
            kill_group(proc)
    stderr = (tmp_path / "stderr.log").read_text()
    assert out == b"", "the server came up: the id-block table did not hold it"
    assert "did not come up" not in stderr, stderr
    assert "Traceback" not in stderr, stderr
    assert proc.returncode == 0, stderr
    assert list(tmp_dir.iterdir()) == [], "the temporary run dir was left behind"


def test_help_shows_whole_descriptions(tmp_path: Path) -> None:
    env = dict(os.environ, COLUMNS="80")
    top = run_cli("--help", cwd=tmp_path, env=env)
    assert top.returncode == 0, top.stderr
    commands = top.stdout.split("Commands:")[1]
    assert "..." not in commands, top.stdout
    text = " ".join(commands.split())
    assert "serve Run the server (accepts beanstalkd's flags; flags override the config file)." in (
        text
    )
    assert "report.html under --out." in text
    bench = run_cli("bench", "--help", cwd=tmp_path, env=env)
    assert bench.returncode == 0, bench.stderr
    assert "..." not in bench.stdout.split("Commands:")[1], bench.stdout
    serve = run_cli("serve", "--help", cwd=tmp_path, env=env)
    for flag in ("-u USER", "-c ", "-n "):
        assert f"  {flag}" in serve.stdout, serve.stdout


def test_c_and_n_are_accepted_and_ignored_as_by_beanstalkd(tmp_path: Path) -> None:
    replies = serve_and_use(tmp_path, tmp_path / "run", ("-c", "-n"))
    assert replies[-1] == b"DELETED\r\n"
    assert (tmp_path / "stderr.log").read_text().splitlines() == [
        "shardq: warning: -c is ignored: the log is always compacted",
        "shardq: warning: -n is ignored: the log is always compacted",
    ]


def uids(pid: int) -> list[int]:
    """Real, effective, saved and filesystem user ids of `pid`."""
    with open(f"/proc/{pid}/status") as f:
        line = next(line for line in f if line.startswith("Uid:"))
    return [int(x) for x in line.split()[1:]]


def runs_as(user: pwd.struct_passwd, argv: list[str]) -> bool:
    """True if `argv` runs to a clean exit as `user` (we are root)."""
    try:
        result = subprocess.run(argv, user=user.pw_uid, group=user.pw_gid, timeout=STOP_TIMEOUT)
    except PermissionError:
        return False
    return result.returncode == 0


def test_u_becomes_the_user_once_bound(tmp_path: Path) -> None:
    nobody = pwd.getpwnam("nobody")
    refusal = None
    if os.geteuid() != 0:  # what beanstalkd cannot do either
        refusal = "only root can become another user ('nobody')"
    elif not runs_as(nobody, [sys.executable, "-c", ""]):  # e.g. a Python under /root
        refusal = f"user 'nobody' cannot run {sys.executable}"
    if refusal is not None:  # refused before binding, in one line
        result = run_cli("serve", "-p", "0", "-u", "nobody", cwd=tmp_path)
        assert (result.returncode, result.stderr) == (
            EXIT_CONFIG,
            f"shardq: flag -u (user): {refusal}\n",
        )
        return
    with tempfile.TemporaryDirectory(dir="/tmp") as name:
        base = Path(name)
        base.chmod(0o777)  # nobody makes the run dir and the log here
        cmd = [*shardq_command(), "serve", "-l", "127.0.0.1", "-p", "0", "-u", "nobody"]
        cmd += ["--run-dir", str(base / "run"), "-b", str(base / "wal")]
        with open(tmp_path / "stderr.log", "wb") as err:
            proc = subprocess.Popen(
                cmd,
                cwd=base,
                env=dict(os.environ, TMPDIR=str(base)),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
                start_new_session=True,
            )
        try:
            port, data = wait_listening(proc, START_TIMEOUT)
            stderr = (tmp_path / "stderr.log").read_text()
            assert port is not None, f"no listening line (exit {proc.poll()}): {data!r}\n{stderr}"
            assert put_and_reserve(port)[-1] == b"DELETED\r\n"
            everyone = [proc.pid, *role_pids(proc.pid).values()]
            assert len(everyone) >= 3
            assert {tuple(uids(pid)) for pid in everyone} == {(nobody.pw_uid,) * 4}
            assert (base / "wal").stat().st_uid == nobody.pw_uid
            assert (base / "run").stat().st_uid == nobody.pw_uid
        finally:
            terminate(proc, STOP_TIMEOUT, group=True)
            if proc.poll() is None:
                kill_group(proc)
            kill_pids(session_members(proc.pid))
            if proc.stdout is not None:
                proc.stdout.close()
        assert proc.returncode == 0, (tmp_path / "stderr.log").read_text()


def test_sigint_right_after_the_re_exec_stops_quietly(tmp_path: Path) -> None:
    """Ctrl-C while the re-executed supervisor is still importing: held until it can stop
    cleanly, not a KeyboardInterrupt traceback and a temporary run dir left behind."""
    tmp_dir = tmp_path / "tmp"
    proc = start_serving_in(tmp_path, tmp_dir, subprocess.DEVNULL)
    try:
        poll_for(lambda: "shardq.processes.supervision.supervisor" in cmdline(proc.pid), 10, 0.001)
        os.kill(proc.pid, signal.SIGINT)
        proc.wait(timeout=STOP_TIMEOUT)
    finally:
        if proc.poll() is None:
            kill_group(proc)
    stderr = (tmp_path / "stderr.log").read_text()
    assert "Traceback" not in stderr, stderr
    assert proc.returncode == 0, stderr
    assert list(tmp_dir.iterdir()) == [], "the temporary run dir was left behind"
