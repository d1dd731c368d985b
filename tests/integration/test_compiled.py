"""The compiled build and the pure one (shardq/compiled.py): which one a test run and the
servers it starts use, that no compiled module is older than its source, and the switch.

`make test` runs the suite with SHARDQ_BUILD=compiled and again, with SHARDQ_PURE=1
SHARDQ_BUILD=pure, the differential suite, the client matrix, the invariant checker and the
concurrency and crash tests (the Makefile's PURE_TESTS); each run checks here that it ran
what it says.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shardq.compiled import COMPILED, PURE_ENV, is_compiled, source_path

ROOT = Path(__file__).resolve().parents[2]
BUILD = os.environ.get("SHARDQ_BUILD")  # set by `make test` for each of its runs


def source(name: str) -> Path:
    return ROOT / source_path(name)


def built(name: str) -> list[Path]:
    src = source(name)
    return sorted(src.parent.glob(src.stem + ".*.so"))


def test_every_compiled_module_exists() -> None:
    for name in COMPILED:
        assert source(name).is_file(), name


def declarations(name: str) -> list[Path]:
    """The module's .pxd (its C types) and the .pxd files of the modules it cimports from:
    a change to any of them changes what the module compiles to."""
    pxd = source(name).with_suffix(".pxd")
    if not pxd.is_file():
        return []
    found = [pxd]
    for line in pxd.read_text().splitlines():
        words = line.split()
        if len(words) > 3 and words[0] == "from" and words[2] == "cimport":
            if not words[1].startswith("shardq."):
                continue  # Cython's own (libc, posix): no source of ours
            module = source(f"{words[1]}.{words[3]}").with_suffix(".pxd")  # a module cimported
            found.append(module if module.is_file() else source(words[1]).with_suffix(".pxd"))
    return found


def test_no_compiled_module_is_older_than_its_source() -> None:
    """A module built before its source (or a .pxd it reads) last changed would run old
    code in place of the new (Python imports the extension first): `make compiled` builds
    it again."""
    stale = [
        str(so.relative_to(ROOT))
        for name in COMPILED
        for so in built(name)
        for src in [source(name), *declarations(name)]
        if so.stat().st_mtime < src.stat().st_mtime
    ]
    assert not stale, f"stale compiled modules (run `make compiled`): {stale}"


def test_every_declared_module_is_compiled() -> None:
    """A .pxd beside a module that is not compiled would say nothing: the module's types
    would be lost without a sign."""
    compiled = {source(name).with_suffix(".pxd") for name in COMPILED}
    declared = set((ROOT / "shardq").rglob("*.pxd"))
    assert declared <= compiled, sorted(str(p) for p in declared - compiled)


@pytest.mark.skipif(BUILD is None, reason="SHARDQ_BUILD is set by `make test` only")
def test_this_run_uses_the_build_it_says() -> None:
    """In this process: every listed module compiled (SHARDQ_BUILD=compiled), or none."""
    want = BUILD == "compiled"
    assert BUILD in ("compiled", "pure")
    assert bool(os.environ.get(PURE_ENV)) is not want
    for name in COMPILED:
        assert is_compiled(importlib.import_module(name)) is want, name


def _report(env: dict[str, str]) -> dict[str, bool]:
    code = (
        "import importlib, json; from shardq.compiled import COMPILED, is_compiled;"
        "print(json.dumps({n: is_compiled(importlib.import_module(n)) for n in COMPILED}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_shardq_pure_loads_every_module_from_its_source() -> None:
    """SHARDQ_PURE=1 in the environment: the modules come from their .py files, built or
    not (a process started from there inherits it: the servers of the pure run)."""
    env = {**os.environ, PURE_ENV: "1"}
    assert not any(_report(env).values())


@pytest.mark.skipif(BUILD != "compiled", reason="the compiled run of `make test`")
def test_a_server_started_by_the_suite_runs_the_compiled_modules(shardq_server) -> None:
    """The serving processes of a server the tests start map the extension modules: what the
    suite measured is the compiled build."""
    env = {k: v for k, v in os.environ.items() if k != PURE_ENV}
    assert all(_report(env).values())
    srv = shardq_server()
    pids = srv.wait_all_children()
    serving = [pid for role, pid in pids.items() if role.startswith("serving")]
    assert serving
    for pid in serving:
        maps = Path(f"/proc/{pid}/maps").read_text()
        assert "home.cpython-" in maps and ".so" in maps, pid
