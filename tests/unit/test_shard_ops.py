"""The shard ops' declarations (processes/shard/ops.py) and what is derived from them."""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import pytest

from shardq.cluster import wire
from shardq.cluster.wire import Reply, Request
from shardq.engine.engine import FINAL
from shardq.processes.shard import ops
from shardq.processes.shard.core import Outbox, ShardCore
from shardq.processes.shard.optable import OPS
from shardq.processes.shard.server import ShardServer
from shardq.protocol import proto


def test_every_op_is_declared_once_with_one_handler() -> None:
    for number, op in ops.OPS.items():
        assert op.number == number and getattr(ops, op.name) == number
        assert (op.engine is None) != (op.core is None), op.name


PACKAGE = Path(ops.__file__).resolve().parents[2]
DERIVED = {"NO_REPLY", "PIPELINED"}  #: ops.py's tables derived from the declarations


def declared_in(path: Path) -> dict[str, int]:
    """``NAME = declare(number, "NAME", ...)`` at the top of a module, as its source says."""
    found = {}
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            call = node.value
            if isinstance(call.func, ast.Name) and call.func.id == "declare":
                (target,) = node.targets
                number, name = call.args[:2]
                assert isinstance(target, ast.Name) and isinstance(name, ast.Constant)
                assert isinstance(number, ast.Constant) and target.id == name.value
                found[target.id] = number.value
    return found


def test_the_table_is_exactly_what_ops_py_declares() -> None:
    """One block in ops.py per op, and nothing else: no op declared in another module, no
    op number written by hand beside the declarations, every handler, argument shape and
    `held` (the tubes it takes from) defined in its op's block."""
    source = Path(ops.__file__)
    declared = declared_in(source)
    assert declared == {op.name: number for number, op in OPS.items()}
    assert sorted(declared.values()) == list(range(1, len(declared) + 1))
    constants = {
        t.id
        for node in ast.parse(source.read_text()).body
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name) and t.id.isupper()
    }
    assert constants - DERIVED == set(declared)
    for op in OPS.values():
        handler = op.engine if op.engine is not None else op.core
        assert handler is not None and handler.__module__ == ops.__name__, op.name
        assert op.shape.__module__ == ops.__name__, op.name
        assert op.held is None or op.held.__module__ == ops.__name__, op.name
    elsewhere = [p for p in PACKAGE.rglob("*.py") if p != source and declared_in(p)]
    assert elsewhere == []


def test_what_the_serving_process_reads_is_derived_from_the_declarations() -> None:
    assert {
        ops.ACCEPT,
        ops.DECLINE,
        ops.DISCONNECT,
        ops.REASSERT,
        ops.RESET,
        ops.MOVE_REF,
        ops.SETTLED,
        ops.UNHOLD,
    } == ops.NO_REPLY
    assert {
        ops.PUT,
        ops.DELETE,
        ops.RELEASE,
        ops.BURY,
        ops.TOUCH,
        ops.PEEK,
        ops.KICK_JOB,
        ops.STATS_JOB,
        ops.PEEK_READY,
        ops.PEEK_DELAYED,
        ops.PEEK_BURIED,
        ops.KICK,
        ops.STATS_TUBE,
        ops.PAUSE_TUBE,
    } == ops.PIPELINED
    held = {ops.RESERVE, ops.RESERVE_JOB, ops.RESERVE_BETTER}
    assert {n for n, op in ops.OPS.items() if op.held} == held


def test_a_request_travels_as_a_list_and_is_read_back_by_name() -> None:
    args = ops.PutArgs(5, 9, "t", 1, 0, 60, b"body")
    (raw,) = wire.unpack(wire.pack([Request(ops.PUT, 3, 77, args)]))
    assert raw == [ops.PUT, 3, 77, [5, 9, "t", 1, 0, 60, b"body"]]
    req = Request._make(raw)
    assert ops.PutArgs._make(req.args) == args
    (answer,) = wire.unpack(wire.pack([Reply(3, wire.Answer(b"INSERTED 5\r\n"))]))
    rid, payload = answer
    assert rid == 3 and wire.Answer._make(payload).value == b"INSERTED 5\r\n"


@pytest.mark.parametrize(
    ("op", "failed"),
    [
        (ops.PEEK, [proto.INTERNAL_ERROR]),
        (ops.TOUCH, ops.Touched(proto.INTERNAL_ERROR, 0)),
        (ops.RESERVE_JOB, [FINAL, proto.INTERNAL_ERROR]),
        (ops.RESERVE, [FINAL, proto.INTERNAL_ERROR]),
    ],
)
def test_a_malformed_request_is_answered_in_its_op_s_reply_shape(
    op: int, failed: list[object], caplog: pytest.LogCaptureFixture
) -> None:
    core = ShardCore(0, owns_default=True)
    with caplog.at_level(logging.CRITICAL):  # its traceback is logged: not shown here
        reply = core.handle(b"peer", Request(op, 4, 7, [1, 2, 3, 4, 5]), 1)  # too many args
    assert reply == Reply(4, failed)
    ok = core.handle(b"peer", Request(ops.PEEK, 5, 7, ops.JobArg(1)), 1)
    assert ok == Reply(5, [proto.NOT_FOUND])  # and the shard goes on


def test_a_request_that_is_not_a_request_is_dropped_and_the_shard_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = ShardServer.__new__(ShardServer)  # its loop's handling, without a socket
    server.core = ShardCore(0, owns_default=True)
    out: Outbox = {}
    peek = [ops.PEEK, 5, 7, [1]]
    with caplog.at_level(logging.WARNING):
        server.handle([(b"peer", [[ops.PEEK, 4], peek])], 1, out)
    assert out == {b"peer": [Reply(5, [proto.NOT_FOUND])]}
    assert "dropped a malformed request" in caplog.text
