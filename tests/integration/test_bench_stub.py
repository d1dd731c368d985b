"""The stub server (`shardq.bench.stub`) and the load tool's ceiling in `shardq bench compare`:
the stub answers every workload, compare reports the L column, CPU and kops per CPU-second,
and flags rows where the load tool, not the server, was the limit.

Performance itself is never asserted; the flag is checked where its answer is known (the
stub measured as A: the tool is the limit by construction) and on made-up figures.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from shardq.bench.limits import cores, reasons, stub_command
from shardq.bench.servers import Server

SIZE = 100


@pytest.fixture(scope="module")
def stub() -> Iterator[Server]:
    server = Server(stub_command(SIZE))
    yield server
    server.stop()


def _bench(port: int, *args: str) -> dict:
    cmd = [sys.executable, "-m", "shardq", "bench", "--port", str(port), "--json", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr + done.stdout
    return json.loads(done.stdout)


def _ask(sock: socket.socket, data: bytes, want: int) -> bytes:
    """Send `data`, read until `want` reply lines (a RESERVED body counts as one more)."""
    sock.sendall(data)
    buf = b""
    deadline = time.monotonic() + 5
    while buf.count(b"\r\n") < want and time.monotonic() < deadline:
        buf += sock.recv(65536)
    return buf


def test_stub_answers_like_nullsrv(stub: Server) -> None:
    """The replies of the C stub (nullsrv.c), byte for byte, including a put whose body
    arrives in a later read and a line without CR."""
    body = bytes(97 + i % 26 for i in range(SIZE))
    with socket.create_connection(("127.0.0.1", stub.port), timeout=5) as s:
        s.sendall(b"put 0 0 60 5\r\nab")
        time.sleep(0.05)
        got = _ask(s, b"cde\r\nuse t1\r\nwatch t1\r\nwatch t2\r\nignore default\r\n", 5)
        assert got.startswith(b"INSERTED ")
        assert got.split(b"\r\n")[1:5] == [b"USING t1", b"WATCHING 2", b"WATCHING 3", b"WATCHING 2"]
        got = _ask(s, b"reserve-with-timeout 0\r\n", 2)
        head, rest = got.split(b"\r\n", 1)
        assert head.startswith(b"RESERVED ") and head.endswith(b" %d" % SIZE)
        assert rest == body + b"\r\n"
        job_id = head.split()[1]
        assert _ask(s, b"delete %s\r\nreserve\r\n" % job_id, 3).startswith(b"DELETED\r\nRESERVED ")
        got = _ask(s, b"stats\nkick 1\r\nignore t1\r\nignore t2\r\nignore t3\r\n", 5)
        assert got.split(b"\r\n")[:5] == [b"UNKNOWN_COMMAND"] * 2 + [b"WATCHING 1"] * 3


@pytest.mark.parametrize(
    ("args", "ops"),
    [
        (("-w", "put", "-c", "8", "--pipeline", "16", "-P", "2"), ("put",)),
        (("-w", "reserve", "-c", "8", "--prefill", "2000", "-P", "2"), ("reserve", "delete")),
        (("-w", "mixed", "-c", "10", "-P", "2"), ("put", "reserve", "delete")),
        (("-w", "multitube", "-c", "8", "-t", "4"), ("put", "reserve", "delete")),
        (
            (
                "-w",
                "pingpong",
            ),
            ("put", "reserve", "delete"),
        ),
    ],
    ids=["put", "reserve", "mixed", "multitube", "pingpong"],
)
def test_stub_answers_every_workload(stub: Server, args: tuple[str, ...], ops: tuple) -> None:
    result = _bench(stub.port, *args, "-d", "0.5")
    assert result["errors"] == 0, result["error_samples"]
    for op in ops:
        assert result["ops"][op]["count"] > 0 and result["ops"][op]["errors"] == 0


def _compare(tmp_path, a: str, b: str) -> tuple[dict, str]:
    report = tmp_path / "BENCH.md"
    cmd = [
        sys.executable, "-m", "shardq", "bench", "compare", "--matrix", "quick",
        "--rounds", "1", "--duration", "0.5", "--json", "--report", str(report),
        "--a", a, "--b", b,
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout), report.read_text()


def test_compare_flags_each_row_by_its_own_figures(tmp_path) -> None:
    """A and B are the stub itself. Whether a half-second cell of the stub comes within
    25 % of another half-second cell of it is the machine's, not the report's: on this VM
    the host takes up to a third of the CPU time for seconds at a time (vmstat's `st`), and
    a cell taken then runs at half the rate of one taken before. (This test asserted "every
    row flagged", and failed so on a clean run of the suite.) So what the whole command is
    checked for is that each row carries the flags its own measured figures give (`reasons`;
    the rule itself, the stub against itself included, is checked on known figures below)
    and the report files each row by them; and each row has L, CPU and kops per CPU-second."""
    stub_cmd = stub_command(SIZE)
    result, text = _compare(tmp_path, stub_cmd, stub_cmd)
    assert result["l"] == stub_cmd
    rows = [r for r in result["rows"] if r["kind"] != "memory"]
    assert [r["key"] for r in rows] == ["put-50x16", "mixed-50", "pingpong-1"]
    for row in rows:
        assert row["l"]["value"] > 0 and row["l"]["errors"] == 0
        for side in ("a", "b"):
            s = row[side]
            assert s["errors"] == 0 and s["value"] > 0
            assert s["cpu_pct"] > 0 and s["kops_per_cpu_s"] > 0 and s["client_cores"] > 0
            assert s["vs_l"] == s["value"] / row["l"]["value"]
            assert row["tool_limit"][side] == reasons(s, row["l"]["value"], cores()), row
        assert row["tool_limited"] == any(row["tool_limit"].values())
    memory = next(r for r in result["rows"] if r["kind"] == "memory")
    assert "l" not in memory and "tool_limit" not in memory
    assert "tool limit:" in text  # the legend
    header = next(
        line
        for line in text.splitlines()
        if line.startswith("| row (unit of A, B, L) | A | B | L |")
    )
    col = [c.strip() for c in header.split("|")].index("tool limit")
    results, not_results = text.split("**Not results: the load tool set the pace**")
    for row in rows:
        section = not_results if row["tool_limited"] else results
        line = next(x for x in section.splitlines() if x.startswith(f"| {row['label']} ("))
        if row["tool_limited"]:
            assert [c.strip() for c in line.split("|")][col].strip("! "), line
            assert f"({row['ratio']:.2f})" in line  # B/A shown, but not as a result
        else:
            assert f"**{row['ratio']:.2f}**" in line


def _side(value: float, server: float, tool: float, procs: int = 2, in_flight: int = 50) -> dict:
    return {
        "value": value,
        "cpu_cores": server,
        "client_cores": tool,
        "load_processes": procs,
        "in_flight": in_flight,
    }


def test_tool_limit_reasons_on_known_figures() -> None:
    """Each sign fires on its own, and none fires for a saturated server far below L."""
    # the stub against itself: at L (here 0.93 of it), whatever the CPU figures
    assert "L" in reasons(_side(93_000, 0.6, 0.7), 100_000, 2)
    assert "L" in reasons(_side(9_300, 0.6, 0.4, 1, 1), 10_000, 2)
    # shardq-like: server at a full core, tool half idle, 40 % of L: the server is the limit
    assert reasons(_side(40_000, 1.0, 0.5), 100_000, 2) == []
    assert reasons(_side(90_000, 1.0, 0.5), 100_000, 2) == ["L"]
    # beanstalkd-like: the server at 0.7 core, the tool using all the 1.3 cores it had left
    assert reasons(_side(50_000, 0.7, 1.25), 100_000, 2) == ["cpu"]
    assert reasons(_side(50_000, 0.7, 1.25), None, 2) == ["cpu"]
    # one request in flight: the tool's CPU against the server's
    assert reasons(_side(5_000, 0.3, 0.45, 1, 1), 20_000, 2) == ["rt"]
    assert reasons(_side(5_000, 0.99, 0.4, 1, 1), 20_000, 2) == []
    # the stub beside other work (measured: 0.42 of a core, the tool 0.33), far below L
    assert reasons(_side(38_268, 0.42, 0.33, 1, 1), 51_795, 2) == ["rt"]
    # a neighbour takes a whole core of two, the server and the tool share the other and
    # leave 0.06 of a core idle: the machine set the pace, though the tool's 0.44 is under
    # 90 % of the 0.5 left to it (a CI run beside a profiler took such a row for a result)
    starved = {**_side(60_000, 0.5, 0.44, 1), "other_cores": 1.0}
    assert reasons(starved, 100_000, 2) == ["cpu"]
    # the server itself saturates the machine (beanstalkd at a full core, the tool at 0.85;
    # shardq's two serving processes at 1.62, the tool 0.22): the server's limit, no flag
    assert reasons(_side(94_000, 1.0, 0.85, 1), 513_000, 2) == []
    assert reasons(_side(31_000, 1.62, 0.22, 1), 100_000, 2) == []


def test_the_report_says_when_the_machine_was_not_quiet() -> None:
    """Most rows marked noisy: a warning with the largest other CPU; a quiet run: none."""
    from shardq.bench.report import busy_machine

    def row(noisy: bool, other: float, busy: int = 0) -> dict:
        side = {"other_cores": other}
        return {"kind": "ops", "noisy": noisy, "busy": busy, "a": side, "b": side}

    assert busy_machine([row(False, 0.1), row(True, 0.5), row(False, 1.1, busy=1)]) == []
    warning = " ".join(busy_machine([row(True, 0.5), row(True, 1.9, busy=1), row(False, 0.0)]))
    assert "Not a quiet machine" in warning and "in 2 of 3 rows" in warning
    assert "up to 90 %" in warning  # the loaded row's own neighbour is not counted
