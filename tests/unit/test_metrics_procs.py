"""The metrics process finds the server's processes in /proc: the supervisor and its
children named ``sq <role>``, from the supervisor's ``children`` file or, where the kernel
has none, by scanning /proc; a stopped child shows as stopped (what /health reports)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

import pytest

from shardq.metrics.gathered import Proc
from shardq.processes.metrics import gather as metrics_gather
from shardq.processes.metrics.gather import server_processes
from shardq.processes.supervision.forked import fork_child


def sleep_forever() -> None:
    while True:
        time.sleep(1)


def poll_roles(done: Callable[[dict[str, Proc]], bool]) -> dict[str, Proc]:
    """This process's view as the metrics process takes it, until `done` (5 s at most)."""
    deadline = time.monotonic() + 5
    while True:
        found = {p.role: p for p in server_processes(os.getpid())}
        if done(found):
            return found
        assert time.monotonic() < deadline, found
        time.sleep(0.01)


@pytest.mark.parametrize("children_file", [True, False], ids=["children-file", "scan"])
def test_the_supervisor_and_its_named_children_with_their_state(
    children_file: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not children_file:
        real = metrics_gather.read_text

        def no_children_file(path: str) -> str | None:
            return None if path.endswith("/children") else real(path)

        monkeypatch.setattr(metrics_gather, "read_text", no_children_file)
    child = fork_child("shard 7", (), sleep_forever)
    try:
        found = poll_roles(lambda roles: "shard 7" in roles)  # it has named itself
        assert found["shard 7"].pid == child.pid and found["shard 7"].state != "T"
        assert found["supervisor"].pid == os.getpid()
        assert found["supervisor"].rss_bytes > 1 << 20
        assert found["supervisor"].cpu_seconds > 0
        os.kill(child.pid, signal.SIGSTOP)
        poll_roles(lambda roles: roles["shard 7"].state == "T")
    finally:
        child.kill()
        child.wait(5)
