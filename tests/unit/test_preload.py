"""What the supervisor does before its first fork (`children.preload`), which decides how
soon a fresh server answers (issue 22, item 9): it imports what the roles that will run
need and nothing else, and keeps the garbage collector off until a child runs, which turns
it on again (`collector.tune`).

Each check runs in a fresh interpreter: what a process has imported is process-wide.
"""

from __future__ import annotations

import json
import subprocess
import sys

from helpers import REPO_ROOT

PROBE = """
import gc, json, sys
from shardq.processes.common import collector
from shardq.processes.supervision.children import preload
preload(ROLES)
seen = {"modules": sorted(m for m in sys.modules if m.startswith("shardq.processes")),
        "gc_after_preload": gc.isenabled()}
collector.tune()
seen["gc_in_child"] = gc.isenabled()
seen["thresholds"] = list(gc.get_threshold())
print(json.dumps(seen))
"""


def preloaded(roles: list[str]) -> dict[str, object]:
    code = PROBE.replace("ROLES", repr(roles))
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    result: dict[str, object] = json.loads(out.stdout)
    return result


def test_only_the_roles_that_run_are_imported() -> None:
    seen = preloaded(["coordinator", "serving", "shard", "metrics"])
    modules = seen["modules"]
    assert isinstance(modules, list)
    for needed in (
        "shardq.processes.coordinator",
        "shardq.processes.serving.loop",
        "shardq.processes.shard.process",
    ):
        assert needed in modules
    others = ("shardq.processes.frontends", "shardq.processes.metrics")
    off = [m for m in modules if m.startswith(others)]
    assert off == [], "front-ends that are off, and the metrics process, import their own"


def test_a_front_end_that_is_on_is_preloaded() -> None:
    modules = preloaded(["serving", "kestrel", "workq"])["modules"]
    assert isinstance(modules, list)
    assert "shardq.processes.frontends.kestrel.loop" in modules
    assert "shardq.processes.frontends.workq.loop" in modules


def test_collection_is_off_while_starting_and_on_in_every_child() -> None:
    seen = preloaded(["coordinator"])
    assert seen["gc_after_preload"] is False
    assert seen["gc_in_child"] is True
    assert seen["thresholds"][0] > 700  # tuned: not Python's default  # type: ignore[index]


START_PATH = """
import json, sys
before = set(sys.modules)
import shardq.dropin
bind = set(sys.modules) - before
import shardq.start
from shardq.processes.supervision import supervisor
from shardq.processes.supervision.children import preload
preload(["coordinator", "serving", "shard"])
start = set(sys.modules) - before
print(json.dumps({"bind": sorted(bind), "start": sorted(start)}))
"""


def start_imports() -> dict[str, list[str]]:
    """What `shardqd` imports before it binds, and before its first fork (default layout):
    the modules each step adds to what Python and `site` imported."""
    out = subprocess.run(
        [sys.executable, "-c", START_PATH],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    result: dict[str, list[str]] = json.loads(out.stdout)
    return result


def test_a_default_server_imports_before_its_first_fork_only_what_it_uses() -> None:
    """How soon a fresh server answers is mostly what it imports (docs/BENCHMARKS.md,
    "Start-up"): ssl only where TLS is configured (≈ 10 ms), tempfile only to check a
    directory that is given (≈ 5 ms); before the bind, neither pathlib nor typing, nor
    getopt's gettext, nor `socket` (its enums: `_socket` binds)."""
    seen = start_imports()
    before_bind = ("pathlib", "typing", "ssl", "getopt", "gettext", "socket")
    assert [m for m in seen["bind"] if m in before_bind] == []
    # dataclasses: building them is ≈ 0.5-1.5 ms a class, and the module imports inspect
    unused = ("ssl", "_ssl", "tempfile", "dataclasses", "inspect", "getopt", "gettext")
    assert [m for m in seen["start"] if m in unused] == []
    assert "shardq.processes.serving.loop" in seen["start"]  # the probe did preload


def test_commands_are_records_with_a_dataclasss_methods() -> None:
    """The 26 command classes are plain slotted classes (`record.Record`: building them
    as dataclasses took ≈ 8 ms of every start), with a dataclass's equality, hash, repr
    and positional `match`."""
    from shardq.protocol import commands as c

    put = c.Put(1, 2, 3, b"x")
    assert put == c.Put(1, 2, 3, b"x", None) and put != c.Put(1, 2, 3, b"y")
    assert hash(put) == hash(c.Put(1, 2, 3, b"x"))
    assert c.Delete(7) != c.Touch(7) and c.Delete(7) == c.Delete(7) != c.Delete(8)
    assert c.Reserve() == c.Reserve() and c.Reserve() != c.Stats()
    assert repr(c.Release(1, 2, 3)) == "Release(id=1, pri=2, delay=3)"
    assert repr(c.ErrorReply(b"X\r\n")) == "ErrorReply(reply=b'X\\r\\n', stat=None)"
    assert not hasattr(put, "__dict__")
    match c.PauseTube("t", 5):
        case c.PauseTube(tube, delay):
            assert (tube, delay) == ("t", 5)
