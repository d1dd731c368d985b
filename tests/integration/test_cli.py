"""`python -m shardq`: version, help, and start-up errors (none of these start a server)."""

import socket
import subprocess
import sys
import types
from pathlib import Path

import pytest
from typer.testing import CliRunner

import shardq
from shardq.cli import app
from shardq.config import Config
from shardq.start import EXIT_CONFIG


def shardq_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shardq", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.mark.parametrize("args", [["-v"], ["serve", "-v"]])
def test_version_flag(tmp_path, args):
    result = shardq_cli(*args, cwd=tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (
        0,
        f"shardq {shardq.__version__}\n",
        "",
    )


@pytest.mark.parametrize("args", [["-h"], ["serve", "-h"]])
def test_help_flag(tmp_path, args):
    result = shardq_cli(*args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "serve" in result.stdout
    if args[0] == "serve":
        for flag in [
            "-l ADDR",
            "-p PORT",
            "-z BYTES",
            "-V",
            "-b DIR",
            "-f MS",
            "-F",
            "-s BYTES",
            "--shards N",
            "--config FILE",
            "--run-dir DIR",
        ]:
            assert flag in result.stdout


def test_bad_config_file(tmp_path):
    (tmp_path / "bad.yaml").write_text("shards: abc\n")
    result = shardq_cli("serve", "--config", "bad.yaml", cwd=tmp_path)
    assert result.returncode == EXIT_CONFIG
    assert result.stderr.splitlines() == [
        "shardq: bad.yaml: shards: must be an integer between 1 and 64, got 'abc'"
    ]


def test_default_config_file_in_cwd_is_read(tmp_path):
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "shardq.yaml").write_text("wal: {fsync: soon}\n")
    result = shardq_cli("serve", cwd=tmp_path)
    assert result.returncode == EXIT_CONFIG
    [line] = result.stderr.splitlines()
    assert line.startswith("shardq: config/shardq.yaml: wal.fsync: ")


def test_missing_config_file(tmp_path):
    result = shardq_cli("serve", "--config", "nope.yaml", cwd=tmp_path)
    assert result.returncode == EXIT_CONFIG
    [line] = result.stderr.splitlines()
    assert "nope.yaml" in line and "No such file" in line


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["-p", "99999"], "flag -p (port)"),
        (["-pabc"], "flag -p (port)"),
        (["--shards", "0"], "flag --shards (shards)"),
        (["-z", "big"], "flag -z (max_job_size)"),
        (["-f", "-3"], "flag -f (wal.fsync)"),
        (["-f", "5", "-F"], "flag -F"),
    ],
)
def test_bad_flag(tmp_path, args, named):
    result = shardq_cli("serve", *args, cwd=tmp_path)
    assert result.returncode == EXIT_CONFIG
    [line] = result.stderr.splitlines()
    assert line.startswith(f"shardq: {named}: "), line


def test_bad_flag_beats_good_file(tmp_path):
    (tmp_path / "ok.yaml").write_text("port: 11300\n")
    result = shardq_cli("serve", "--config", "ok.yaml", "-p", "70000", cwd=tmp_path)
    assert result.returncode == EXIT_CONFIG
    assert "port" in result.stderr and "70000" in result.stderr


def test_unknown_flag_is_a_usage_error(tmp_path):
    result = shardq_cli("serve", "-x", cwd=tmp_path)
    assert result.returncode == 2
    assert "-x" in result.stderr


@pytest.fixture
def fake_supervisor(monkeypatch):
    """Stand-in for shardq.processes.supervision.supervisor that records the Config it was given."""
    seen: list[Config] = []
    module = types.ModuleType("shardq.processes.supervision.supervisor")

    def exec_supervisor(config: Config, listener: socket.socket, reload: dict) -> None:
        seen.append(config)
        listener.close()
        # what a SIGHUP reads again: the same file, and the same flags winning over it
        assert reload["config_file"] == (config.source if config.source.endswith("yaml") else None)
        assert set(reload["overrides"]) <= set(reload["flags"])

    def run_supervisor(config: Config, listener: socket.socket, reload: dict) -> int:
        raise AssertionError("shardq serve must exec into the supervisor, not run it in process")

    module.exec_supervisor = exec_supervisor  # type: ignore[attr-defined]
    module.run_supervisor = run_supervisor  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "shardq.processes.supervision.supervisor", module)
    return seen


def test_flags_override_file_and_reach_the_supervisor(tmp_path, monkeypatch, fake_supervisor):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "q.yaml").write_text("port: 1\nshards: 3\nwal: {dir: w, fsync: always}\n")
    args = [
        "serve",
        "--config",
        "q.yaml",
        "-l",
        "0.0.0.0",
        "-p",
        "0",
        "-z",
        "100",
        "-VV",
        "-F",
        "-s",
        "4096",
        "--run-dir",
        "r",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert fake_supervisor == [
        Config(
            listen="0.0.0.0",
            port=0,
            max_job_size=100,
            shards=3,
            verbose=2,
            run_dir="r",
            wal_dir="w",
            fsync_ms=None,
            segment_bytes=4096,
            source="q.yaml",
        )
    ]


def test_clamped_job_size_warns_and_starts(tmp_path, monkeypatch, fake_supervisor):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["serve", "-z", "2000000000", "-f0", "-b", "wal", "-p", "0"])
    assert result.exit_code == 0, result.output
    assert "maximum job size was set to 1073741824" in result.stderr
    [config] = fake_supervisor
    assert (config.max_job_size, config.fsync_ms, config.wal_dir) == (1073741824, 0, "wal")
