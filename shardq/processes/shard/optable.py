"""The table of shard ops (`OPS`) and how an op is declared into it (`declare`, `Op`).

The declarations themselves are all in processes/shard/ops.py, one block per op; this
module is only the table they fill and what `ShardCore.apply` calls through it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from shardq.engine.engine import FINAL, Engine

if TYPE_CHECKING:
    from shardq.processes.shard.core import ShardCore

Payload = Sequence[Any]  #: a reply's payload, named by the op's reply shape
EngineHandler = Callable[[Engine, int, Any, int], Payload | None]
Takes = Callable[[Engine, Any], Sequence[str]]  #: the tubes a request would take a job from
CoreHandler = Callable[["ShardCore", bytes, int, int, Any, int], Payload | None]


def answer(reply: bytes) -> Payload:
    """The payload of a failed request of most ops: the client's reply (`wire.Answer`)."""
    return [reply]


def final(reply: bytes) -> Payload:
    """A failed reserve's payload: FINAL and the client's reply (engine `Final`)."""
    return [FINAL, reply]


class Op:
    """One shard op, as `declare` made it (a plain slotted class: a dataclass would bring
    `dataclasses` into every start, docs/BENCHMARKS.md "Start-up")."""

    __slots__ = (
        "number",
        "name",
        "shape",
        "make",
        "engine",
        "core",
        "replies",
        "pipelined",
        "held",
        "fail",
    )

    def __init__(
        self,
        number: int,
        name: str,
        shape: type,
        handlers: tuple[EngineHandler | None, CoreHandler | None],
        properties: tuple[bool, bool, Takes | None],
        fail: Callable[[bytes], Payload],
    ) -> None:
        self.number = number
        self.name = name
        self.shape = shape  #: the shape of its arguments (a NamedTuple class)
        #: the shape's _make (from a list off the wire)
        self.make: Callable[[Sequence[Any]], Any] = shape._make  # type: ignore[attr-defined]
        #: applies it to the engine alone, or to the whole core
        self.engine, self.core = handlers
        #: answered (False: fire-and-forget); answered at once and in order (a connection
        #: may pipeline it); hands out a job: held while a restarted shard settles
        #: (settling.py), and while a close holds a tube it would take from (closing.py):
        #: these tubes (None: never held)
        self.replies, self.pipelined, self.held = properties
        self.fail = fail  #: its payload when it raised (INTERNAL_ERROR...)

    def __repr__(self) -> str:
        return f"Op({self.number}, {self.name!r})"

    def apply(
        self, core: ShardCore, peer: bytes, rid: int, conn: int, args: Sequence[Any], now: int
    ) -> Payload | None:
        """Apply the request `rid` of `conn` from `peer`; `args` in its shape already (the
        hosting serving process's direct call) or as a list off the wire."""
        if type(args) is not self.shape:
            args = self.make(args)
        if self.core is not None:
            return self.core(core, peer, rid, conn, args, now)
        assert self.engine is not None
        return self.engine(core.engine, conn, args, now)


OPS: dict[int, Op] = {}  #: op number -> its declaration (filled by ops.py)


def declare(
    number: int,
    name: str,
    args: type,
    engine: EngineHandler | None = None,
    core: CoreHandler | None = None,
    replies: bool = True,
    pipelined: bool = False,
    held: Takes | None = None,
    fail: Callable[[bytes], Payload] = answer,
) -> int:
    """Declare an op (one handler: `engine` or `core`); its number, for the senders."""
    assert number not in OPS and (engine is None) != (core is None), name
    OPS[number] = Op(number, name, args, (engine, core), (replies, pipelined, held), fail)
    return number
