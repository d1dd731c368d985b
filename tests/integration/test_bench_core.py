"""The load loops check every reply: a scripted server answers with wrong replies in a known
pattern, and both engines (the compiled core, `--engine c`, and the Python loop, `--engine
python`) must count exactly those as errors and nothing else as a success.

Behaviour only: no figure of speed is asserted.
"""

from __future__ import annotations

import itertools
import json
import socketserver
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator

import pytest

from shardq.bench.workloads import body_of

SIZE = 100
GOOD_BODY = body_of(SIZE)
ENGINES = ("c", "python")


class Script:
    """The replies of the scripted server: each kind of command takes the next reply from its
    own cycle (shared by every connection); `use`, `watch` and `ignore` answer as beanstalkd."""

    def __init__(self, put: list[bytes], reserve: list[bytes], delete: list[bytes]) -> None:
        self.cycles = {
            b"put": itertools.cycle(put),
            b"reserve-with-timeout": itertools.cycle(reserve),
            b"delete": itertools.cycle(delete),
        }
        self.lock = threading.Lock()
        self.close_after: int | None = None  # close each connection after this many puts

    def reply(self, verb: bytes, args: list[bytes]) -> bytes:
        if verb == b"use":
            return b"USING %s\r\n" % args[0]
        if verb in (b"watch", b"ignore"):
            return b"WATCHING 1\r\n"
        cycle = self.cycles.get(verb)
        if cycle is None:
            return b"UNKNOWN_COMMAND\r\n"
        with self.lock:
            return next(cycle)


class Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        script: Script = self.server.script  # type: ignore[attr-defined]
        puts = 0
        while line := self.rfile.readline():
            verb, *args = line.split()
            if verb == b"put":
                self.rfile.read(int(args[-1]) + 2)
                puts += 1
                if script.close_after is not None and puts > script.close_after:
                    return
            self.wfile.write(script.reply(verb, args))
            self.wfile.flush()


@pytest.fixture
def scripted() -> Iterator[Callable[[Script], int]]:
    """Start a scripted server on a free port; returns its port."""
    servers: list[socketserver.ThreadingTCPServer] = []

    def start(script: Script) -> int:
        server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        server.script = script  # type: ignore[attr-defined]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        port: int = server.server_address[1]
        return port

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _bench(port: int, engine: str, *args: str) -> tuple[int, dict, str]:
    cmd = [
        sys.executable, "-m", "shardq", "bench", "--port", str(port), "--json", "--keep",
        "--engine", engine, *args,
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    result = json.loads(done.stdout) if done.stdout.startswith("{") else {}
    return done.returncode, result, done.stderr


def _reserved(body: bytes, size: int | None = None) -> bytes:
    return b"RESERVED 7 %d\r\n%s\r\n" % (len(body) if size is None else size, body)


@pytest.mark.parametrize("engine", ENGINES)
def test_every_wrong_put_reply_is_an_error(scripted, engine: str) -> None:
    """Of 30 pipelined puts, one in three is answered `INSERTED <digits>`; `INSERTED 5x` and
    `OUT_OF_MEMORY` are errors, shown verbatim, and the run fails."""
    script = Script([b"INSERTED 1\r\n", b"INSERTED 5x\r\n", b"OUT_OF_MEMORY\r\n"], [], [])
    port = scripted(script)
    code, result, err = _bench(port, engine, "-w", "put", "--pipeline", "4", "-n", "30")
    assert code == 1, err
    assert result["ops"]["put"]["count"] == 10
    assert result["ops"]["put"]["errors"] == 20
    assert result["errors"] == 20
    samples = " ".join(result["error_samples"])
    assert "INSERTED 5x" in samples and "OUT_OF_MEMORY" in samples


@pytest.mark.parametrize("engine", ENGINES)
def test_every_wrong_reserve_and_delete_reply_is_an_error(scripted, engine: str) -> None:
    """Pingpong, 8 cycles: of every four reserves one carries the body that was put; a wrong
    size, a wrong body, a malformed line and TIMED_OUT (an error for pingpong) are not
    successes, and no delete follows them; of the two deletes one is answered NOT_FOUND."""
    reserves = [
        _reserved(GOOD_BODY),
        _reserved(GOOD_BODY[:-1]),
        _reserved(b"x" * SIZE),
        b"RESERVED 7\r\n",
        _reserved(GOOD_BODY),
        b"TIMED_OUT\r\n",
    ]
    script = Script([b"INSERTED 7\r\n"], reserves, [b"DELETED\r\n", b"NOT_FOUND\r\n"])
    port = scripted(script)
    code, result, err = _bench(port, engine, "-w", "pingpong", "-n", "6")
    assert code == 1, err
    ops = result["ops"]
    assert (ops["put"]["count"], ops["put"]["errors"]) == (6, 0)
    assert (ops["reserve"]["count"], ops["reserve"]["errors"]) == (2, 4)
    assert (ops["delete"]["count"], ops["delete"]["errors"]) == (1, 1)
    assert result["cycles"]["count"] == 1
    samples = " ".join(result["error_samples"])
    assert "RESERVED 7 99" in samples and "TIMED_OUT" in samples and "NOT_FOUND" in samples


@pytest.mark.parametrize("engine", ENGINES)
def test_a_reply_line_ends_at_cr_lf_only(scripted, engine: str) -> None:
    """Of 20 pipelined puts, every other one is answered `INSERTED 1` LF `2` CR LF: one line,
    not two, and an error (a bare line feed ends no line)."""
    script = Script([b"INSERTED 1\r\n", b"INSERTED 1\n2\r\n"], [], [])
    port = scripted(script)
    code, result, err = _bench(port, engine, "-w", "put", "--pipeline", "4", "-n", "20")
    assert code == 1, err
    assert (result["ops"]["put"]["count"], result["ops"]["put"]["errors"]) == (10, 10)
    shown = {"c": "'INSERTED 1\\x0a2'", "python": "b'INSERTED 1\\n2'"}[engine]
    assert f"put: {shown}" in result["error_samples"]  # a control character, escaped


@pytest.mark.parametrize("engine", ENGINES)
def test_an_id_past_a_u64_is_an_error(scripted, engine: str) -> None:
    """Pingpong, 2 cycles: the second RESERVED names a 21-digit id (no u64 has one): an
    error, and no delete follows it."""
    bad = b"RESERVED %s %d\r\n%s\r\n" % (b"9" * 21, SIZE, GOOD_BODY)
    script = Script([b"INSERTED 7\r\n"], [_reserved(GOOD_BODY), bad], [b"DELETED\r\n"])
    port = scripted(script)
    code, result, err = _bench(port, engine, "-w", "pingpong", "-n", "2")
    assert code == 1, err
    ops = result["ops"]
    assert (ops["put"]["count"], ops["put"]["errors"]) == (2, 0)
    assert (ops["reserve"]["count"], ops["reserve"]["errors"]) == (1, 1)
    assert (ops["delete"]["count"], ops["delete"]["errors"]) == (1, 0)
    assert "9" * 21 in " ".join(result["error_samples"])


@pytest.mark.parametrize("engine", ENGINES)
def test_a_connection_the_server_closes_is_an_error(scripted, engine: str) -> None:
    """The server closes every connection after its fifth put: the run ends early with one
    connection error per connection, and the five answered puts each count."""
    script = Script([b"INSERTED 1\r\n"], [], [])
    script.close_after = 5
    port = scripted(script)
    code, result, err = _bench(port, engine, "-w", "put", "-c", "2", "-d", "20")
    assert code == 1, err
    assert result["ops"]["put"]["count"] == 10
    assert result["errors"] == 2
    assert result["elapsed_s"] < 20


class BadSetup(Script):
    """Answers every command, `use` included, with BAD_FORMAT."""

    def reply(self, verb: bytes, args: list[bytes]) -> bytes:
        return b"BAD_FORMAT\r\n"


def test_a_wrong_setup_reply_stops_the_core_before_the_clock(scripted) -> None:
    """`use` answered with something else than USING: the core says so and the run fails."""
    port = scripted(BadSetup([], [], []))
    code, result, err = _bench(port, "c", "-w", "put", "-d", "1")
    assert code == 1
    assert "setup answered 'BAD_FORMAT'" in err


def test_the_core_holds_the_backlog_bound(scripted) -> None:
    """Mixed, with a server whose queue stays empty (every reserve TIMED_OUT, not an error):
    the producers put exactly --backlog jobs (puts issued and not deleted, as bload counts
    them) and then wait; nothing else is put."""
    script = Script([b"INSERTED 1\r\n"], [b"TIMED_OUT\r\n"], [])
    port = scripted(script)
    code, result, err = _bench(port, "c", "-w", "mixed", "-c", "4", "--backlog", "10", "-d", "1")
    assert code == 0, err
    assert result["ops"]["put"]["count"] == 10
    assert "reserve" not in result["ops"] and result["timed_out"] > 0
