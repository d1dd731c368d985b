"""SIGHUP: the server reads its config file again and applies, without a restart, what can
change live (limits, allow, logging); what needs a restart is refused with one line naming
the key, and the server goes on with the old value. Children started later get the new
values too."""

from __future__ import annotations

import signal
import socket
import time
from pathlib import Path

from helpers import UnexpectedEOF, poll_for, read_replies, send

from shardq.bench.procs import read_line, terminate


def config_text(max_connections: int, poll_us: int, level: str) -> str:
    return (
        f"poll_us: {poll_us}\n"
        f"limits:\n  max_connections: {max_connections}\n"
        f"log:\n  level: {level}\n"
    )


def stats(port: int) -> dict[str, str]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        send(s, b"stats\r\n")
        (reply,) = read_replies(s, 1)
    return dict(line.split(": ", 1) for line in reply.decode().splitlines()[2:] if ": " in line)


def test_sighup_changes_a_limit_live_and_refuses_what_needs_a_restart(
    shardq_launch, tmp_path: Path
) -> None:
    conf = tmp_path / "shardq.yaml"
    conf.write_text(config_text(0, 100, "warning"))
    proc, _run, _tmp, stderr_path = shardq_launch(2, ("--config", str(conf)))
    try:
        line = read_line(proc, 20).decode()
        port = int(line.rsplit(":", 1)[1])
        assert "limit-max-connections" not in stats(port)  # no limit set: beanstalkd's keys

        conf.write_text(config_text(2, 50, "info"))  # a live limit, a restart-only key, logging
        proc.send_signal(signal.SIGHUP)
        poll_for(lambda: stats(port).get("limit-max-connections") == "2", timeout=10)
        err = stderr_path.read_text()
        assert "SIGHUP: limits.max_connections 0 -> 2" in err
        assert "SIGHUP: log.level 'warning' -> 'info'" in err
        assert "SIGHUP: poll_us needs a restart to change (100 -> 50); kept" in err

        # the stats connections above may not all be seen closed yet: one that is still
        # counted can get a new connection refused; count those and try again
        held, early = [], 0
        while len(held) < 2:
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            send(s, b"list-tube-used\r\n")
            try:
                assert read_replies(s, 1) == [b"USING default\r\n"]
                held.append(s)
            except (UnexpectedEOF, ConnectionResetError):
                s.close()
                early += 1
                assert early < 50, "connections refused although under the limit"
                time.sleep(0.02)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as third:
            assert third.recv(100) == b""  # closed at accept: the new limit holds
        send(held[0], b"stats\r\n")  # on a connection that is in (a new one might not be)
        (reply,) = read_replies(held[0], 1)
        assert f"\nlimit-connections-refused: {early + 1}\n".encode() in reply
        for s in held:
            s.close()
        # the serving process logs at INFO now (log.level applied in the children too)
        applied = "shardq[serving] INFO SIGHUP: settings applied"
        poll_for(lambda: applied in stderr_path.read_text(), timeout=10)
    finally:
        assert terminate(proc, 10, group=True) == 0
