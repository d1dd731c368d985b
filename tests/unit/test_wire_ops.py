"""A request's op read by its field's name, as decoded off the wire or as `Unread`."""

from __future__ import annotations

from shardq.cluster import wire
from shardq.processes.shard import ops


def test_op_of_reads_a_decoded_request_and_an_unread_one() -> None:
    batch = wire.pack([wire.Request(ops.COUNTS, 7, 3, []), wire.Request(ops.PUT, 8, 3, [])])
    decoded = wire.unpack_requests(batch)
    assert [wire.op_of(raw) for raw in decoded] == [ops.COUNTS, ops.PUT]
    assert wire.op_of(wire.Unread(ops.DELETE, 9)) == ops.DELETE
    assert wire.op_of(wire.Unread(None, 9)) is None  # a reply that could not be decoded
