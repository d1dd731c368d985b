"""`log.level` and `log.format`: every process logs at the level asked for, as text lines or
as one JSON object a line (for log collectors), naming its role."""

from __future__ import annotations

import json
import re
import signal

from helpers import poll_for

from shardq.start import EXIT_CONFIG


def test_json_lines_from_every_process(shardq_server) -> None:
    srv = shardq_server(2, ("--log-format", "json", "--log-level", "info"))
    children = srv.wait_all_children()
    srv.proc.send_signal(signal.SIGTERM)
    assert srv.proc.wait(10) == 0
    lines = srv.stderr().splitlines()
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all(set(r) >= {"ts", "role", "level", "logger", "msg"} for r in records)
    assert {r["level"] for r in records} <= {"INFO", "WARNING", "ERROR"}
    roles = {r["role"] for r in records}
    assert roles >= {"supervisor", *children}, (roles, children)
    assert any(r["role"] == "supervisor" and r["msg"].startswith("pid ") for r in records)


def test_log_level_wins_over_v(shardq_server) -> None:
    srv = shardq_server(2, ("-VV", "--log-level", "error"))
    srv.wait_all_children()
    srv.proc.send_signal(signal.SIGTERM)
    assert srv.proc.wait(10) == 0
    assert srv.stderr() == ""  # nothing went wrong, and -VV's INFO/DEBUG lines are off


#: a text line: its time (UTC, ms), the process's role, the level
TEXT_LINE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z shardq\[[a-z0-9 ]+\] [A-Z]+ ")


def test_text_lines_have_a_time_and_name_the_role_and_a_stop_is_said(shardq_server) -> None:
    srv = shardq_server(2, ("--log-level", "info"))
    poll_for(lambda: "shardq[supervisor] INFO pid " in srv.stderr(), timeout=10)
    srv.proc.send_signal(signal.SIGTERM)
    assert srv.proc.wait(10) == 0
    lines = srv.stderr().splitlines()
    assert all(TEXT_LINE.match(line) for line in lines), lines
    said = [line.split(" ", 1)[1] for line in lines if "[supervisor]" in line]
    assert said[-2:] == [
        "shardq[supervisor] INFO stopping (SIGTERM)",
        "shardq[supervisor] INFO stopped",
    ]


def test_a_bad_log_setting_is_one_line_naming_the_flag(shardq_launch) -> None:
    proc, *_rest, stderr_path = shardq_launch(1, ("--log-format", "xml"))
    out, _ = proc.communicate(timeout=20)
    assert (proc.returncode, out) == (EXIT_CONFIG, b"")
    assert stderr_path.read_text().splitlines() == [
        "shardq: flag --log-format (log.format): must be one of text, json, not 'xml'"
    ]
