"""The layers of shardq/ import only downwards (docs/ARCHITECTURE.md, "Layers").

Every `import` and `from ... import` in every module (lazy ones inside functions too) is
read with `ast`; a module may import from its own layer or any layer below it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "shardq"

#: top-level room -> layer; higher layers may import lower ones, never the reverse
LAYERS: dict[str, int] = {
    "__init__": 0,  # the version string
    "log": 0,  # logging set-up, used by every process
    "compiled": 0,  # which modules are compiled, and the switch to the pure build
    "nocython": 0,  # Cython's decorators as no-ops, for the pure build
    "protocol": 0,  # sans-IO beanstalk protocol
    "engine": 1,  # pure job engine with an injected clock
    "cluster": 2,  # routing rules and inter-process messages
    "storage": 2,  # write-ahead log, event log
    "config": 2,  # the validated configuration
    "metrics": 2,  # the metrics endpoint's pure parts: exposition, dashboard JSON and page
    "processes": 3,  # the process loops
    "flags": 4,  # the command line's flag names and exit statuses (data, no imports)
    "start": 4,  # config + checks + bind + exec into the supervisor, no CLI library
    "dropin": 4,  # shardqd: beanstalkd's command line
    "opts": 4,  # getopt without gettext, for shardqd
    "cli": 4,
    "usage": 4,  # what `serve` says about an unknown flag
    "__main__": 4,
    "bench": 4,
    "pipeline": 4,
}


def room(module: str) -> str:
    """'shardq.engine.job' -> 'engine'; 'shardq' -> '__init__'."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts.pop()
        found.append((".".join(parts), path))
    return found


def imported(module: str, path: Path) -> list[str]:
    """Every shardq module the file imports, as absolute dotted names."""
    is_package = path.name == "__init__.py"
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join(anchor + ([base] if base else []))
            if base == "shardq":  # `from shardq import x`: x is a module or a name of shardq
                names += [f"shardq.{a.name}" for a in node.names]
            else:
                names.append(base)
    return [n for n in names if n == "shardq" or n.startswith("shardq.")]


def test_every_room_has_a_layer() -> None:
    rooms = {room(m) for m, _ in modules()}
    assert rooms <= set(LAYERS), f"modules in rooms with no layer: {rooms - set(LAYERS)}"


@pytest.mark.parametrize(("module", "path"), modules(), ids=[m for m, _ in modules()])
def test_imports_go_only_downwards(module: str, path: Path) -> None:
    mine = LAYERS[room(module)]
    upward = [n for n in imported(module, path) if LAYERS.get(room(n), 0) > mine]
    assert not upward, f"{module} (layer {mine}) imports from a layer above: {upward}"


#: processes/ by role: the rooms of processes/ each may import from (besides the layers
#: below processes/). A front-end stands on the shared plumbing alone; the shard never sees
#: the serving process; only the child entry point (`supervision.child`) imports the roles.
ROLE_IMPORTS: dict[str, set[str]] = {
    "common": {"common"},
    "shard": {"common", "shard"},
    "serving": {"common", "shard", "serving"},
    "coordinator": {"common", "shard", "coordinator"},
    "metrics": {"common", "shard", "metrics"},
    "frontends": {"common", "frontends"},
    "supervision": {"common", "supervision"},
}
ENTRY_POINT = "shardq.processes.supervision.child"


def role(module: str) -> str | None:
    """'shardq.processes.shard.core' -> 'shard'; None outside processes/ (or its face)."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "processes" else None


PROCESS_MODULES = [(m, p) for m, p in modules() if role(m) is not None]


def test_processes_has_one_folder_per_role() -> None:
    """Nothing at the top of processes/ but the package face and the coordinator."""
    tops = {p.name for p in (PACKAGE / "processes").glob("*.py")}
    assert tops == {"__init__.py", "coordinator.py"}
    assert {role(m) for m, _ in PROCESS_MODULES} == set(ROLE_IMPORTS)


@pytest.mark.parametrize(("module", "path"), PROCESS_MODULES, ids=[m for m, _ in PROCESS_MODULES])
def test_roles_import_only_what_they_stand_on(module: str, path: Path) -> None:
    mine = role(module)
    assert mine is not None
    if module == ENTRY_POINT:
        return
    others = {role(n) for n in imported(module, path)} - {None}
    assert others <= ROLE_IMPORTS[mine], f"{module} imports from {others - ROLE_IMPORTS[mine]}"


def test_the_role_check_sees_a_front_end_reaching_into_the_shard(tmp_path: Path) -> None:
    fake = tmp_path / "x.py"
    fake.write_text("from shardq.processes.shard.core import ShardCore\n")
    found = {role(n) for n in imported("shardq.processes.frontends.x", fake)}
    assert not found <= ROLE_IMPORTS["frontends"]


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    """The walk finds a lazy upward import inside a function (the test can fail)."""
    fake = tmp_path / "x.py"
    fake.write_text("def f():\n    from shardq.processes import shard\n")
    found = imported("shardq.engine.x", fake)
    assert found == ["shardq.processes"]
    assert LAYERS[room(found[0])] > LAYERS[room("shardq.engine.x")]
