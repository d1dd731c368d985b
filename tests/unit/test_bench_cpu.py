"""`shardq bench` reads a server's CPU time per process to the nanosecond (its process CPU
clock), not in /proc/PID/stat's whole 10 ms ticks: a four-process server that used 6 ms in a
0.3 s cell of `bench compare` read 0.0 CPU (tests/integration/test_bench.py failed so)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from shardq.bench.servers import CpuWindow, cpu_delta, cpu_ns


def test_a_process_cpu_time_is_read_to_the_nanosecond() -> None:
    """This process's clock read by pid lies between two reads of its own clock."""
    pid = os.getpid()
    before = time.process_time_ns()
    read = cpu_ns([pid])[pid]
    after = time.process_time_ns()
    assert before <= read <= after


def test_a_gone_process_is_left_out() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # reaped: its pid names no process
    assert cpu_ns([child.pid]) == {}


def test_a_window_counts_less_than_a_tick() -> None:
    """A window over this process in which it used well under 10 ms reports that time."""
    pid = os.getpid()
    window = CpuWindow([pid])
    window.start()
    start = time.process_time_ns()
    while time.process_time_ns() - start < 2_000_000:  # 2 ms of CPU
        pass
    got = window.stop()
    assert 0.002 <= got["cpu_s"] == got["per_pid"][pid] < 1.0
    assert cpu_delta({pid: 5}, {pid: 2_000_000_005, 7: 3}) == {pid: 2.0, 7: 3e-09}
