"""The compiled load core (loadcore.c): built with the C compiler on first use, driven over
its stdin and stdout.

`shardq bench --engine c` (the default) runs the load in these processes instead of the
Python load loop (`shardq.bench.loadgen`, `--engine python`): the same roles, requests and
reply checks at about a tenth of the CPU per operation, so one load process keeps a fast
server busy on a 2-core machine where Python load processes would take the cores the server
needs. The binary goes to ``build/shardq-loadcore`` of the checkout (`make loadcore`), or to
``$XDG_CACHE_HOME/shardq`` when the package is not in a writable checkout; it is rebuilt when
loadcore.c is newer. ``SHARDQ_LOADCORE`` names a binary to use instead.

    python -m shardq.bench.core    # build it (if needed) and print its path
"""

from __future__ import annotations

import json
import logging
import os
import select
import shutil
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

from shardq.bench.workloads import ConnPlan, Spec

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("loadcore.c")
NAME = "shardq-loadcore"
CFLAGS = ("-O2", "-Wall", "-Wextra", "-Wno-unused-parameter")


class CoreError(RuntimeError):
    """The core could not be built, or a core process failed before or during its run."""


def _build_dir() -> Path:
    checkout = SOURCE.parents[2]
    if (checkout / "pyproject.toml").exists() and os.access(checkout, os.W_OK):
        return checkout / "build"
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "shardq"


def binary() -> Path:
    """The core's executable, compiled first when missing or older than loadcore.c."""
    given = os.environ.get("SHARDQ_LOADCORE")
    if given:
        return Path(given)
    out = _build_dir() / NAME
    if out.exists() and out.stat().st_mtime >= SOURCE.stat().st_mtime:
        return out
    return build(out)


def build(out: Path) -> Path:
    """Compile loadcore.c into `out` (atomically: a half-written binary is never run)."""
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if not cc:
        raise CoreError(
            "the compiled load core needs a C compiler (apt-get install gcc);"
            " or run the Python load loop: --engine python"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{NAME}.{os.getpid()}")
    cmd = [cc, *CFLAGS, "-o", str(tmp), str(SOURCE)]
    log.info("building the load core: %s", " ".join(cmd))
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise CoreError(f"building the load core failed:\n{done.stderr.strip()}")
    tmp.replace(out)
    return out


def plan_line(p: ConnPlan) -> str:
    """One connection for the core: `ROLE USE WATCH,...` ("-" for none)."""
    return f"{p.role} {p.use or '-'} {','.join(p.watch) or '-'}\n"


def command(spec: Spec, quota: int | None, seconds: float, backlog: int) -> list[str]:
    args = [
        str(binary()),
        f"--host={spec.host}",
        f"--port={spec.port}",
        f"--workload={spec.workload}",
        f"--pipeline={spec.pipeline}",
        f"--size={spec.size}",
        f"--ttr={spec.ttr}",
        f"--duration={seconds}",
        f"--backlog={backlog}",
    ]
    return args + ([f"--quota={quota}"] if quota is not None else [])


class CoreProcess:
    """One running core: its connections are set up when `ready` returns; `go` starts the
    clock; `result` waits for the figures (loadgen.Result.to_dict's layout)."""

    def __init__(
        self, spec: Spec, plans: list[ConnPlan], quota: int | None, seconds: float, backlog: int
    ) -> None:
        self.proc = subprocess.Popen(
            command(spec, quota, seconds, backlog),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.stdin: IO[str] = self._pipe(self.proc.stdin)
        self.stdout: IO[str] = self._pipe(self.proc.stdout)
        self.stdin.write("".join(map(plan_line, plans)) + "end\n")
        self.stdin.flush()

    @staticmethod
    def _pipe(pipe: IO[str] | None) -> IO[str]:
        if pipe is None:  # never: Popen was asked for pipes
            raise CoreError("no pipe to the load core")
        return pipe

    def _failed(self) -> CoreError:
        self.proc.wait(timeout=10)
        err = self.proc.stderr.read().strip() if self.proc.stderr else ""
        return CoreError(err.removeprefix("loadcore: ") or f"exit status {self.proc.returncode}")

    def ready(self) -> None:
        """Wait until every connection of this core is connected and set up."""
        if self.stdout.readline() != "ready\n":
            raise self._failed()

    def answered(self, timeout: float) -> bool:
        """Whether the result (or the end of the output) can be read, waiting `timeout` s."""
        readable, _, _ = select.select([self.stdout], [], [], timeout)
        return bool(readable)

    def go(self) -> None:
        self.stdin.write("go\n")
        self.stdin.flush()

    def result(self) -> dict[str, Any]:
        line = self.stdout.readline()
        if not line:
            raise self._failed()
        self.proc.wait(timeout=10)
        out: dict[str, Any] = json.loads(line)
        return out

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


def main() -> None:
    sys.stdout.write(f"{binary()}\n")


if __name__ == "__main__":
    main()
