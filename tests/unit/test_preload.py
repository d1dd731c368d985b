"""What the supervisor does before its first fork (`children.preload`), which decides how
soon a fresh server answers (issue 22, item 9): it imports what the roles that will run
need and nothing else, and keeps the garbage collector off until a child runs, which turns
it on again (`child.tune_gc`).

Each check runs in a fresh interpreter: what a process has imported is process-wide.
"""

from __future__ import annotations

import json
import subprocess
import sys

from helpers import REPO_ROOT

PROBE = """
import gc, json, sys
from shardq.processes.supervision import child
from shardq.processes.supervision.children import preload
preload(ROLES)
seen = {"modules": sorted(m for m in sys.modules if m.startswith("shardq.processes")),
        "gc_after_preload": gc.isenabled()}
child.tune_gc()
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
