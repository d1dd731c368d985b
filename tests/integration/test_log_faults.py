"""An I/O error while writing the log does not restart the shard (issue 14, item 5).

A real server runs with an LD_PRELOAD shim (tests/integration/faults/failwal.c, built here
with gcc) that makes every write and fsync of a ``*.wal`` file fail with EIO while a flag
file exists: a disk that fails, then comes back. While it fails, puts answer OUT_OF_MEMORY
and everything else is served on the same connections by the same processes; the fault is
logged once; once the disk is back the shard writes a fresh segment and takes puts again;
after a kill -9 and a restart every acknowledged job that was not deleted is there.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import connect, put_body, read_replies, ready_ids, send

SHIM = Path(__file__).parent / "faults" / "failwal.c"
RECOVER_WITHIN_S = 15.0  #: retries back off to 10 s at most


@pytest.fixture(scope="module")
def shim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    gcc = shutil.which("gcc")
    assert gcc is not None, "gcc is needed to build the fault shim (make test installs it)"
    out = tmp_path_factory.mktemp("shim") / "failwal.so"
    subprocess.run([gcc, "-shared", "-fPIC", "-O2", "-o", str(out), str(SHIM), "-ldl"], check=True)
    return out


@pytest.mark.parametrize(("shards", "serving"), [(1, "1"), (2, "2")], ids=["1shard", "2serving"])
def test_a_failing_log_refuses_puts_serves_the_rest_and_recovers(
    shards: int,
    serving: str,
    shim: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    shardq_server: Callable[..., Any],
) -> None:
    flag = tmp_path / "disk-fails"
    wal = tmp_path / "wal"
    monkeypatch.setenv("LD_PRELOAD", str(shim))
    monkeypatch.setenv("SHARDQ_FAULT_FILE", str(flag))
    server = shardq_server(shards=shards, extra=("-b", str(wal), "--serving", serving))
    pids = server.wait_all_children()
    client = connect(server.port)
    acked = {int(put_body(client, b"before %d" % i).split()[1]) for i in range(5)}

    flag.touch()  # the disk fails
    first = put_body(client, b"as it fails")  # its turn's write fails: -f 50, so it stands
    assert first.startswith(b"INSERTED"), first
    acked.add(int(first.split()[1]))
    assert put_body(client, b"while failing") == b"OUT_OF_MEMORY\r\n"
    send(client, b"reserve\r\n")
    reserved = read_replies(client, 1)[0]
    assert reserved.startswith(b"RESERVED")
    gone = int(reserved.split()[1])
    send(client, b"delete %d\r\nstats-job %d\r\n" % (gone, min(acked - {gone})))
    assert read_replies(client, 2)[0] == b"DELETED\r\n"
    acked.discard(gone)
    assert server.roles() == pids, "a process was restarted"

    flag.unlink()  # the disk is back: a retry writes a fresh segment
    deadline = time.monotonic() + RECOVER_WITHIN_S
    while (reply := put_body(client, b"after")) == b"OUT_OF_MEMORY\r\n":
        assert time.monotonic() < deadline, server.stderr()[-2000:]
        time.sleep(0.1)
    assert reply.startswith(b"INSERTED"), reply
    acked.add(int(reply.split()[1]))
    client.close()
    assert server.roles() == pids, "a process was restarted"
    err = server.stderr()
    assert err.count("cannot write its log") == 1, err[-3000:]
    assert "its log is written again" in err

    os.killpg(server.proc.pid, signal.SIGKILL)  # a crash: nothing gets to sync or close
    server.proc.wait(10)
    monkeypatch.delenv("LD_PRELOAD")
    again = shardq_server(shards=shards, extra=("-b", str(wal), "--serving", serving))
    assert ready_ids(again.port) == acked


def test_a_shard_whose_log_cannot_start_serves_and_takes_puts_once_it_can(
    shim: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    shardq_server: Callable[..., Any],
) -> None:
    """A failing (or full) log disk must not keep the server from starting: it serves
    what the log holds and refuses puts, in one log line per shard, until a segment fits."""
    flag = tmp_path / "disk-fails"
    wal = tmp_path / "wal"
    server = shardq_server(shards=2, extra=("-b", str(wal)))
    client = connect(server.port)
    kept = int(put_body(client, b"kept").split()[1])
    client.close()
    server.proc.send_signal(signal.SIGTERM)
    server.proc.wait(20)
    flag.touch()
    monkeypatch.setenv("LD_PRELOAD", str(shim))
    monkeypatch.setenv("SHARDQ_FAULT_FILE", str(flag))
    again = shardq_server(shards=2, extra=("-b", str(wal)))
    pids = again.wait_all_children()
    client = connect(again.port)
    assert put_body(client, b"refused") == b"OUT_OF_MEMORY\r\n"
    send(client, b"peek %d\r\n" % kept)
    assert read_replies(client, 1)[0] == b"FOUND %d 4\r\nkept\r\n" % kept
    assert again.stderr().count("cannot write its log") == 2  # one line per shard
    flag.unlink()
    deadline = time.monotonic() + RECOVER_WITHIN_S
    while (reply := put_body(client, b"now")) == b"OUT_OF_MEMORY\r\n":
        assert time.monotonic() < deadline, again.stderr()[-2000:]
        time.sleep(0.1)
    assert reply.startswith(b"INSERTED"), reply
    client.close()
    assert again.roles() == pids, "a process was restarted"
