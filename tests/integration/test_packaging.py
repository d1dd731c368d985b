"""config/shardq.service and the Dockerfile, kept honest without systemd or a container engine.

The unit file: its ExecStart is run as systemd would run it (the installed paths mapped to
temporary ones, plus ``-p 0``), jobs survive a restart in its state directory, its
ExecReload is run as written and the server goes on serving, its KillSignal stops the
server within TimeoutStopSec, a bad config exits with the status RestartPreventExitStatus
names, and it serves with the kernel's W^X refusal (what MemoryDenyWriteExecute= asks).
The hardening options are checked to be present.

The Dockerfile: its CMD is run (the port and volume mapped), its HEALTHCHECK command passes
against it, and fails against a closed port and against a listener that does not speak the
beanstalk protocol.
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import REPO_ROOT, connect, read_replies, send, tube_on_shard

from shardq.bench.procs import free_port, kill_group, session_members, wait_listening
from shardq.processes.supervision.supervisor import STOP_GRACE_S
from shardq.start import EXIT_CONFIG

UNIT = REPO_ROOT / "config" / "shardq.service"
DOCKERFILE = REPO_ROOT / "Dockerfile"
DOCKERIGNORE = REPO_ROOT / ".dockerignore"
START_TIMEOUT = 20.0
PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN = 65, 1  # linux/prctl.h (Linux 6.3)

# --------------------------------------------------------------------------- parsing


def parse_unit(text: str) -> dict[str, dict[str, list[str]]]:
    """Section -> key -> every value given (systemd allows a key more than once)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith(("#", ";"))):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        assert current is not None, f"{line!r} before any [section]"
        key, sep, value = line.partition("=")
        assert sep, f"not a key=value line: {line!r}"
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def service() -> dict[str, list[str]]:
    return parse_unit(UNIT.read_text())["Service"]


def one(options: dict[str, list[str]], key: str) -> str:
    values = options.get(key)
    assert values is not None, f"{key}= is missing"
    assert len(values) == 1, f"{key}= is given {len(values)} times"
    return values[0]


def docker_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined and comment
    lines dropped, as Docker reads them."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    assert not pending, "the Dockerfile ends in a continuation line"
    return out


def final_stage() -> list[tuple[str, str]]:
    instructions = docker_instructions()
    last_from = max(i for i, (word, _) in enumerate(instructions) if word == "FROM")
    return instructions[last_from:]


def only(instructions: list[tuple[str, str]], word: str) -> str:
    found = [rest for w, rest in instructions if w == word]
    assert len(found) == 1, f"{word}: {found}"
    return found[0]


def exec_form(args: str) -> list[str]:
    """An exec-form (JSON array) argument list, as Docker parses it."""
    value = json.loads(args)
    assert isinstance(value, list) and all(isinstance(a, str) for a in value), args
    return value


def healthcheck() -> tuple[dict[str, str], list[str]]:
    """(--options, command) of the final stage's HEALTHCHECK."""
    options, _, command = only(final_stage(), "HEALTHCHECK").partition(" CMD ")
    flags = dict(re.findall(r"--([a-z-]+)=(\S+)", options))
    return flags, exec_form(command.strip())


def seconds(duration: str) -> float:
    match = re.fullmatch(r"(\d+)(ms|s|m)?", duration)
    assert match, duration
    return int(match[1]) * {"ms": 0.001, "s": 1.0, "m": 60.0, None: 1.0}[match[2]]


# --------------------------------------------------------------------------- running


@contextlib.contextmanager
def running(
    argv: list[str], cwd: Path, stderr_path: Path, prefix: list[str] | None = None
) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """Start a server with `argv` (``shardq ...`` of the unit or image, argv[0] replaced by
    this interpreter's ``-m shardq``); yield (proc, port); kill what is left at the end."""
    assert argv[0].endswith("shardq"), argv
    cmd = [*(prefix or []), sys.executable, "-m", "shardq", *argv[1:]]
    with open(stderr_path, "ab") as err:
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            start_new_session=True,
        )
    try:
        port, data = wait_listening(proc, START_TIMEOUT)
        assert port is not None, (
            f"no listening line within {START_TIMEOUT} s (exit {proc.poll()}): {data[:300]!r}"
            f"\nstderr:\n{stderr_path.read_text(errors='replace')[-3000:]}"
        )
        yield proc, port
    finally:
        kill_group(proc)  # whatever of its session is left (nothing, after a clean stop)
        if proc.stdout is not None:
            proc.stdout.close()


def command(port: int, line: bytes, units: int = 1) -> list[bytes]:
    sock = connect(port)
    try:
        send(sock, line)
        return read_replies(sock, units)
    finally:
        sock.close()


def unit_argv(tmp_path: Path) -> tuple[list[str], Path, Path]:
    """ExecStart's argv with /etc/shardq/shardq.yaml, the state and the runtime directory
    mapped under `tmp_path` (created as systemd creates them: mode 0700), plus ``-p 0``
    (the shipped config's 11300 may be taken here); (argv, state dir, run dir)."""
    options = service()
    argv = shlex.split(one(options, "ExecStart"))
    state = Path("/var/lib") / one(options, "StateDirectory")
    runtime = Path("/run") / one(options, "RuntimeDirectory")
    assert argv[:2] == ["/opt/shardq/bin/shardq", "serve"], argv
    assert argv[argv.index("--config") + 1] == "/etc/shardq/shardq.yaml"
    assert argv[argv.index("-b") + 1] == str(state), "the log must live in StateDirectory"
    assert argv[argv.index("--run-dir") + 1] == str(runtime), "sockets in RuntimeDirectory"
    config = tmp_path / "etc" / "shardq.yaml"
    config.parent.mkdir()
    shutil.copy(REPO_ROOT / "config" / "shardq.yaml", config)  # what README says to install
    mapping = {"/etc/shardq/shardq.yaml": config, str(state): tmp_path / "state"}
    mapping[str(runtime)] = tmp_path / "run"
    for path in (mapping[str(state)], mapping[str(runtime)]):
        path.mkdir(mode=0o700)
    return [str(mapping.get(a, a)) for a in argv] + ["-p", "0"], mapping[str(state)], config


# --------------------------------------------------------------------------- the unit


def test_unit_has_the_service_options_and_hardening() -> None:
    unit = parse_unit(UNIT.read_text())
    assert set(unit) == {"Unit", "Service", "Install"}
    assert one(unit["Install"], "WantedBy") == "multi-user.target"
    options = unit["Service"]
    expected = {
        "Type": "exec",
        "User": "shardq",
        "KillSignal": "SIGTERM",
        "KillMode": "mixed",
        "Restart": "on-failure",
        "RestartPreventExitStatus": str(EXIT_CONFIG),
        "RuntimeDirectoryMode": "0700",
        "StateDirectoryMode": "0700",
        "NoNewPrivileges": "yes",
        "CapabilityBoundingSet": "",
        "AmbientCapabilities": "",
        "ProtectSystem": "strict",
        "ProtectHome": "yes",
        "PrivateTmp": "yes",
        "PrivateDevices": "yes",
        "ProtectKernelTunables": "yes",
        "ProtectKernelModules": "yes",
        "ProtectKernelLogs": "yes",
        "ProtectControlGroups": "yes",
        "RestrictNamespaces": "yes",
        "RestrictRealtime": "yes",
        "RestrictSUIDSGID": "yes",
        "LockPersonality": "yes",
        "MemoryDenyWriteExecute": "yes",
        "SystemCallArchitectures": "native",
    }
    assert {key: options.get(key, ["<missing>"])[-1] for key in expected} == expected
    families = one(options, "RestrictAddressFamilies").split()
    assert sorted(families) == ["AF_INET", "AF_INET6", "AF_UNIX"]
    state = "/var/lib/" + one(options, "StateDirectory")
    assert state in one(options, "ReadWritePaths").split()
    assert "@system-service" in options["SystemCallFilter"]
    # systemd sends SIGKILL after TimeoutStopSec: the supervisor's grace fits, with room
    assert float(one(options, "TimeoutStopSec")) > 2 * STOP_GRACE_S
    # ExecReload: SIGHUP reads the config file again (tests/integration/test_reload.py)
    assert one(options, "ExecReload") == "/bin/kill -HUP $MAINPID"


def test_unit_exec_start_serves_reloads_stops_and_keeps_jobs(tmp_path: Path) -> None:
    argv, state, config = unit_argv(tmp_path)
    options = service()
    stderr = tmp_path / "stderr.log"
    work = tmp_path / "cwd"  # systemd's is /: no config/shardq.yaml there, --config is used
    work.mkdir()
    stop_timeout = float(one(options, "TimeoutStopSec"))
    kill_signal = signal.Signals[one(options, "KillSignal")]
    with running(argv, work, stderr) as (proc, port):
        assert command(port, b"use packaging\r\nput 0 0 60 4\r\nkept\r\n", 2)[1].startswith(
            b"INSERTED "
        )
        assert any(state.iterdir()), "nothing written to the state directory (-b)"
        assert any(p.is_socket() for p in (tmp_path / "run").rglob("*")), "no ipc sockets"

        reload = shlex.split(one(options, "ExecReload"))
        reload = [str(proc.pid) if a == "$MAINPID" else a for a in reload]
        assert Path(reload[0]).exists(), f"{reload[0]} (ExecReload) does not exist here"
        text = config.read_text()
        assert "\nverbose: 0\n" in text
        config.write_text(text.replace("\nverbose: 0\n", "\nverbose: 1\n"))  # a live change
        subprocess.run(reload, check=True, timeout=10)
        assert command(port, b"stats\r\n")[0].startswith(b"OK "), "not serving after reload"
        assert proc.poll() is None

        proc.send_signal(kill_signal)  # KillMode=mixed: to the main process only
        assert proc.wait(timeout=stop_timeout) == 0
        assert not session_members(proc.pid), "processes left after the stop"
    assert "SIGHUP: verbose 0 -> 1" in stderr.read_text(), "the reload was not even seen"

    with running(argv, work, stderr) as (proc, port):  # Restart=: the same directories
        replies = command(port, b"use packaging\r\npeek-ready\r\n", 2)
        assert replies[1].startswith(b"FOUND ") and replies[1].endswith(b"\r\nkept\r\n")


def test_unit_bad_config_exits_with_the_status_that_prevents_restart(tmp_path: Path) -> None:
    argv, _, config = unit_argv(tmp_path)
    config.write_text(config.read_text() + "\nno_such_key: 1\n")
    cmd = [sys.executable, "-m", "shardq", *argv[1:]]
    result = subprocess.run(cmd, cwd=tmp_path, capture_output=True, timeout=30)
    assert result.returncode == int(one(service(), "RestartPreventExitStatus"))
    assert b"no_such_key" in result.stderr


def mdwe_supported() -> bool:
    probe = "import ctypes,sys; sys.exit(ctypes.CDLL(None).prctl(%d, %d, 0, 0, 0) != 0)"
    code = probe % (PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN)
    return subprocess.run([sys.executable, "-c", code], timeout=30).returncode == 0


#: Sets the kernel's W^X refusal, proves it holds (a writable executable mapping is
#: refused), then execs the rest of its argv. Inherited by every process the server starts.
MDWE_WRAPPER = f"""
import ctypes, mmap, os, sys
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl({PR_SET_MDWE}, {PR_MDWE_REFUSE_EXEC_GAIN}, 0, 0, 0) == 0
try:
    mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
except PermissionError:
    os.execv(sys.argv[1], sys.argv[1:])
sys.exit("PR_SET_MDWE did not refuse a writable executable mapping")
"""


def test_unit_serves_with_memory_deny_write_execute(tmp_path: Path) -> None:
    if not sys.platform.startswith("linux") or not mdwe_supported():
        pytest.skip("PR_SET_MDWE needs Linux 6.3 or later")
    argv, _, _ = unit_argv(tmp_path)
    argv += ["--shards", "2", "--serving", "1"]  # a shard process of its own, under W^X too
    prefix = [sys.executable, "-c", MDWE_WRAPPER]
    with running(argv, tmp_path, tmp_path / "stderr.log", prefix) as (_, port):
        sock = connect(port)
        try:
            for tube in (tube_on_shard(0, 2), tube_on_shard(1, 2)) * 2:
                send(sock, b"use %s\r\nput 0 0 60 1\r\nx\r\n" % tube.encode())
                assert read_replies(sock, 2)[1].startswith(b"INSERTED ")
            send(sock, b"stats\r\n")
            assert b"\ncurrent-jobs-ready: 4\n" in read_replies(sock, 1)[0]
        finally:
            sock.close()


# --------------------------------------------------------------------------- the image


def test_dockerfile_builds_the_server_only_as_a_non_root_user() -> None:
    instructions = docker_instructions()
    assert only(instructions, "ARG") == "PYTHON_IMAGE=python:3.11-slim"
    assert all(rest.startswith("${PYTHON_IMAGE}") for w, rest in instructions if w == "FROM")
    installs = [rest for w, rest in instructions if w == "RUN" and "pip install" in rest]
    assert len(installs) == 1 and "pip install . " in installs[0] + " "
    assert "[" not in installs[0], "an extra (pyspark's `pipeline`) is not needed to serve"
    for word, rest in instructions:
        if word == "COPY" and not rest.startswith("--from"):
            for source in rest.split()[:-1]:
                assert (REPO_ROOT / source).exists(), source
    stage = final_stage()
    assert only(stage, "USER") not in ("root", "0")
    assert only(stage, "EXPOSE") == "11300"
    cmd = exec_form(only(stage, "CMD"))
    assert cmd[:2] == ["shardq", "serve"]
    assert cmd[cmd.index("-l") + 1] == "0.0.0.0"
    assert cmd[cmd.index("-p") + 1] == only(stage, "EXPOSE")
    assert cmd[cmd.index("-b") + 1] == only(stage, "VOLUME")
    ignored = DOCKERIGNORE.read_text().split()
    assert {".git", ".venv", "tests/clients/node/node_modules"} <= set(ignored)


def serve_cmd(tmp_path: Path) -> list[str]:
    """The image's CMD with the volume under `tmp_path`, the port 0 and loopback (a test
    does not listen on every interface)."""
    cmd = exec_form(only(final_stage(), "CMD"))
    volume = tmp_path / "data"
    volume.mkdir(mode=0o700)
    mapped = {"0.0.0.0": "127.0.0.1", "11300": "0", only(final_stage(), "VOLUME"): str(volume)}
    return [mapped.get(a, a) for a in cmd]


def run_healthcheck(port: int) -> subprocess.CompletedProcess[bytes]:
    flags, check = healthcheck()
    assert check[0] == "python", check  # the image's venv python is first on PATH
    assert check[1] == "-c" and check[2].count("11300") == 1, check
    code = check[2].replace("11300", str(port))
    timeout = seconds(flags["timeout"])
    return subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=timeout)


def test_dockerfile_cmd_serves_and_passes_its_healthcheck(tmp_path: Path) -> None:
    stop_signal = signal.Signals[only(final_stage(), "STOPSIGNAL")]
    with running(serve_cmd(tmp_path), tmp_path, tmp_path / "stderr.log") as (proc, port):
        result = run_healthcheck(port)
        assert result.returncode == 0, result.stderr
        proc.send_signal(stop_signal)
        assert proc.wait(timeout=10) == 0  # docker stop's default grace: 10 s
    assert any((tmp_path / "data").iterdir()), "nothing written to the volume"


def test_healthcheck_fails_on_a_closed_port() -> None:
    assert run_healthcheck(free_port()).returncode != 0


def test_healthcheck_fails_on_a_server_that_does_not_answer_stats() -> None:
    """A listener that answers something else (an HTTP server, say) is not healthy."""
    with socket.create_server(("127.0.0.1", 0)) as listener:

        def answer_wrongly() -> None:
            conn, _ = listener.accept()
            with conn:
                conn.recv(64)
                conn.sendall(b"HTTP/1.0 400 Bad Request\r\n\r\n")

        thread = threading.Thread(target=answer_wrongly, daemon=True)
        thread.start()
        result = run_healthcheck(listener.getsockname()[1])
        thread.join(timeout=5)
    assert result.returncode != 0
    assert not thread.is_alive(), "the health check never connected"
