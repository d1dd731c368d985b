"""When a `shardq bench` run ends, with either load engine (the compiled core, the Python
loop):

* a run bounded by --jobs ends once its jobs are done. Mixed loads' consumers used to keep
  a `reserve-with-timeout` open after the last delete, so the run waited out its 600 s
  limit;
* a run bounded by --duration with nothing answered at its deadline (a server slow to
  answer its first request; a 0.3 s cell of `bench compare` on a busy machine) waits for
  its first answer and reports a rate, not 0.0.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from shardq.bench.servers import Server
from shardq.bench.stub import Stub

ENGINES = ["c", "python"]
RUN_TIMEOUT_S = 60  #: far below the 600 s a bounded run waited out; far above its work


def bench(port: int, *args: str) -> dict:
    cmd = [sys.executable, "-m", "shardq", "bench", "--port", str(port), "--json", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert done.returncode == 0, done.stderr + done.stdout
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    server = Server("shardq serve -p {port} --shards 2")
    yield server.port
    server.stop()


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(
    "load",
    [
        ("-w", "mixed", "-c", "4"),
        ("-w", "mixed", "-c", "8", "-P", "2"),
        ("-w", "multitube", "-c", "8", "-t", "4"),
    ],
    ids=["mixed", "mixed-2-processes", "multitube"],
)
def test_a_bounded_mixed_load_ends_when_its_jobs_are_done(
    port: int, engine: str, load: tuple[str, ...]
) -> None:
    jobs = 600
    result = bench(port, *load, "--jobs", str(jobs), "--engine", engine)
    assert result["errors"] == 0, result["error_samples"]
    assert {op: o["count"] for op, o in result["ops"].items()} == {
        "put": jobs,
        "reserve": jobs,
        "delete": jobs,
    }
    assert result["cleanup"]["left"] == 0


HOLD_S = 0.6  #: how long the slow server holds its first answer: 3 times the run's seconds


class SlowFirstAnswer(Stub):
    """The stub, but slow to answer its first put (a fresh server reached on a busy
    machine): it answers it `HOLD_S` after it came, well past the run's deadline."""

    held = False

    def answer(self, c: object, buf: bytes | bytearray) -> tuple[int, bytes]:
        if not self.held and bytes(buf[:4]) == b"put ":
            self.held = True
            time.sleep(HOLD_S)  # the slowness under test, not a wait for another party
        return super().answer(c, buf)  # type: ignore[arg-type]


@pytest.fixture
def slow_port() -> Iterator[int]:
    stub = SlowFirstAnswer(0)
    child = mp.get_context("fork").Process(target=stub.serve_forever, daemon=True)
    child.start()
    stub.listener.close()  # the child's copy listens
    yield stub.port
    child.kill()
    child.join()


@pytest.mark.parametrize("engine", ENGINES)
def test_a_run_with_nothing_answered_at_its_deadline_waits_for_its_first_answer(
    slow_port: int, engine: str
) -> None:
    result = bench(slow_port, "-w", "pingpong", "-d", str(HOLD_S / 3), "--engine", engine)
    assert result["errors"] == 0, result["error_samples"]
    assert result["cycles"]["count"] >= 1 and result["cycles"]["per_sec"] > 0
    assert result["elapsed_s"] >= HOLD_S


def test_a_bounded_mixed_load_that_leaves_a_process_without_a_consumer_is_refused(
    port: int,
) -> None:
    """-c 3 -P 2: one load process would put its share and see it taken by the other
    (which has no producer): neither could end before the time limit."""
    cmd = [sys.executable, "-m", "shardq", "bench", "--port", str(port)]
    cmd += ["-w", "mixed", "-c", "3", "-P", "2", "--jobs", "10"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert done.returncode == 2
    assert "needs at least 4 connections" in done.stderr
