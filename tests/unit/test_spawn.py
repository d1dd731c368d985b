"""Every Python process shardq executes runs with -P and imports the same shardq as its parent;
children are forked, handed their settings whole."""

from __future__ import annotations

import os
import sys
import types

import pytest

from shardq.bench.limits import stub_command
from shardq.bench.servers import command_argv
from shardq.config import load_config
from shardq.processes.supervision import children
from shardq.processes.supervision.spawn import SAFE_PATH, import_root, pin_import_root, python_m


def test_python_m_drops_the_working_directory() -> None:
    assert python_m("shardq.x", "a") == [sys.executable, "-P", "-m", "shardq.x", "a"]
    assert SAFE_PATH == "-P"


def test_child_arguments_and_bench_servers(monkeypatch: pytest.MonkeyPatch) -> None:
    config = load_config("server: -x\n", {"shards": 2, "serving": 1})
    shard = children.shard_settings(config, "/r", 1)
    assert (shard.label, shard.common.run_dir, shard.store.server_id) == ("shard 1", "/r", "-x")
    again = shard.restarted(children.settle_from(config, None))
    assert isinstance(again, children.ShardSettings) and again.store.settle_from == (0,)
    assert " -P -m shardq.bench.stub " in stub_command()
    monkeypatch.setattr("shardq.bench.servers.shutil.which", lambda _name: None)
    assert command_argv("shardq serve -p {port}", 7)[1:] == [
        "-P",
        "-m",
        "shardq",
        "serve",
        "-p",
        "7",
    ]


@pytest.fixture
def unsafe_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process as if started without -P (the first sys.path entry is honoured)."""
    monkeypatch.setattr(sys, "flags", types.SimpleNamespace(safe_path=False))


@pytest.mark.usefixtures("unsafe_path")
def test_pin_when_shardq_came_from_the_working_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    root = str(import_root())
    monkeypatch.setattr(sys, "path", [root, *sys.path])
    env = {"PYTHONPATH": os.pathsep.join(["/elsewhere", root])}
    assert pin_import_root(env)
    assert env["PYTHONPATH"] == os.pathsep.join([root, "/elsewhere"])


@pytest.mark.usefixtures("unsafe_path")
def test_no_pin_when_shardq_came_from_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", ["/nowhere", *sys.path])
    env = {"PYTHONPATH": "/elsewhere"}
    assert not pin_import_root(env)
    assert env == {"PYTHONPATH": "/elsewhere"}
