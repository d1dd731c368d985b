"""Which modules are compiled, and the switch that runs the pure build instead.

The modules below (the serving path and the engine) are compiled by Cython as they are
written: plain, mypy-checked Python, Python's semantics (`annotation_typing` off, so an
annotation never becomes a type check). Where a `.pxd` lies beside a module it gives the
compiled build C types: a class's state as a C struct (`cdef class`, the attributes its
`__slots__` or `__init__` names), a hot function's arguments and locals typed (in the
.pxd, or by ``@cython.locals`` where the function is a method of a plain class), so that
reading a connection's, a job's or the process's state is a field access, not a lookup by
name. The pure build reads neither. `make` builds them in place (`tools/build_compiled.py`:
one extension module beside each .py, which Python imports first), and the same tree runs
uncompiled where they are not built, or when ``SHARDQ_PURE=1`` is in the environment:
`use_pure` then makes every shardq module load from its source, in this process and in
every process it starts. `make test` runs the suite compiled and a second time pure what
compiling must not change: the differential suite, the client matrix, the invariant checker,
the concurrency and crash tests (`tests/integration/test_compiled.py` checks which build ran).

What pays (docs/BENCHMARKS.md, "Compiling the serving path" and "Typed state"): the fast
path, the turn and the general path of the serving process and the hosted shard's shell
(`bload -w mixed -c 50`: +9.5 % as written); then the state typed. The engine compiled as
written measured slower (3.89 -> 4.22 µs a put/reserve/delete cycle: its attributes looked
up by name cost more from C than in the interpreter); with its state typed (`EngineCore`,
`Job`, `Tube` as C structs, the hot methods' locals typed with ``@cython.locals``:
shardq/nocython.py) the cycle takes 4.35 -> 3.01 µs (`tools/engine_cycle.py --backlog
1000`) and 48.5k -> 31.8k instructions; with its steps as cpdef methods, 25.9k
("The fast path's calls as C calls").
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.machinery import SOURCE_SUFFIXES, FileFinder, ModuleSpec, SourceFileLoader

#: the environment variable that runs the pure build
PURE_ENV = "SHARDQ_PURE"

#: the modules `make` compiles (dotted names)
COMPILED = (
    "shardq.protocol.lines",
    "shardq.protocol.parser",
    "shardq.protocol.replies",
    "shardq.cluster.routing",
    "shardq.cluster.wire",
    "shardq.processes.common.clock",
    "shardq.processes.common.heads",
    "shardq.processes.common.links",
    "shardq.processes.common.poller",
    "shardq.processes.common.sockio",
    "shardq.processes.shard.closing",
    "shardq.processes.shard.core",
    "shardq.processes.shard.direct",
    "shardq.processes.shard.optable",
    "shardq.processes.shard.server",
    "shardq.processes.serving.clients",
    "shardq.processes.serving.conn",
    "shardq.processes.serving.outgoing",
    "shardq.processes.serving.cross",
    "shardq.processes.serving.handlers",
    "shardq.processes.serving.home",
    "shardq.processes.serving.ids",
    "shardq.processes.serving.loop",
    "shardq.processes.serving.peers",
    "shardq.processes.serving.state",
    "shardq.engine.packed",
    "shardq.engine.ready",
    "shardq.engine.job",
    "shardq.engine.holders",
    "shardq.engine.jobtable",
    "shardq.engine.tube",
    "shardq.engine.core",
    "shardq.engine.reserve",
    "shardq.engine.engine",
    "shardq.engine.timers",
    "shardq.processes.serving.waiting",
)


class PureFinder:
    """Finds shardq's modules as source (or its cached bytecode) only, never as an
    extension module built beside it."""

    @classmethod
    def find_spec(
        cls, fullname: str, path: Sequence[str] | None = None, target: object = None
    ) -> ModuleSpec | None:
        if not fullname.startswith("shardq.") or not path:
            return None
        for entry in path:
            spec = FileFinder(entry, (SourceFileLoader, SOURCE_SUFFIXES)).find_spec(fullname)
            if spec is not None:
                return spec
        return None


def use_pure() -> None:
    """Load every shardq module imported from now on from its source (idempotent)."""
    if PureFinder not in sys.meta_path:
        sys.meta_path.insert(0, PureFinder)


def source_path(name: str) -> str:
    """The source file of a listed module, relative to the checkout's root."""
    return "/".join(name.split(".")) + ".py"


def is_compiled(module: object) -> bool:
    """Was this module loaded from an extension module (not from its source)?"""
    return not str(getattr(module, "__file__", "")).endswith((".py", ".pyc"))
