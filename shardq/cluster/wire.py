"""The messages between shardq's processes, and their one encoding (msgpack).

Every ZeroMQ message is a batch: a list of requests, or a list of replies. A request is
``[op, rid, conn, *args]``; a reply is ``[rid, *payload]`` and goes back to the peer
that sent the request. `rid` is chosen by the sender and unique among its requests in
flight; a waiting reserve is answered later under the rid it came with. Ops marked
"no reply" are fire-and-forget.

Shard ops, their arguments and answers: shardq/processes/shard/ops.py.

Coordinator ops (serving process -> coordinator): LEASE(shard) -> [block];
BLOCKS -> [[[block, shard], ...]] (every block leased so far, from its fsynced table);
STATS(serving process fields dict) -> [reply]; LIST_TUBES -> [reply].

A connection handed from one serving process to another (`Handoff`) travels as one
datagram on the receiver's unix socket, its file descriptor attached (SCM_RIGHTS); the
receiver answers on the sender's socket, TAKEN or REFUSED with the sender's `ticket`
(`pack_answer`), and only then does the sender let the connection go or serve it again.

Times (timeout_at, soon_at, deadlines) are CLOCK_MONOTONIC nanoseconds, which every
process on the machine shares. Bump WIRE_VERSION on any change of shape.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

import msgpack

from shardq.cluster import msgspan

WIRE_VERSION = 2

LEASE, STATS, LIST_TUBES, BLOCKS = 30, 31, 32, 33

_packer = msgpack.Packer(use_bin_type=True)


class Handoff(NamedTuple):
    """A client connection moving to the serving process that hosts its tubes: what the
    new owner needs to go on exactly where the old one stopped."""

    use: str  #: the used tube
    watch: list[str]  #: the watch list, in order
    producer: bool  #: counted in current-producers
    worker: bool  #: counted in current-workers
    pending: bytes  #: bytes read from the client and not yet parsed
    origin: int  #: the index of the serving process it comes from
    counted: bool  #: its tube references are held (under `origin`); else take them anew
    moves: int  #: how many times it has moved
    ticket: int  #: what the answer names it by (the sender's connection id)


HANDOFF, TAKEN, REFUSED = 0, 1, 2  #: what a handoff datagram is: a connection, or an answer


def pack_handoff(handoff: Handoff) -> bytes:
    return _packer.pack([HANDOFF, *handoff])


def pack_answer(kind: int, ticket: int) -> bytes:
    """TAKEN or REFUSED, for the handover that carried `ticket`."""
    return _packer.pack([kind, ticket])


def unpack_handoff(data: bytes | memoryview) -> Handoff | tuple[int, int]:
    """A handed-over connection's state, or an answer: (TAKEN or REFUSED, ticket)."""
    kind, *rest = msgpack.unpackb(data, raw=False, use_list=True)
    if kind == HANDOFF:
        return Handoff._make(rest)
    if kind in (TAKEN, REFUSED) and len(rest) == 1 and isinstance(rest[0], int):
        return kind, rest[0]
    raise ValueError(f"not a handoff datagram: kind {kind!r}")


def pack(batch: list[Any]) -> bytes:
    return _packer.pack(batch)


def unpack(data: bytes | memoryview) -> list[Any]:
    return msgpack.unpackb(data, raw=False, use_list=True, strict_map_key=False)


class Unread(NamedTuple):
    """A request (or a reply) that could not be decoded for want of memory: its op (None
    for a reply) and rid, so that it is answered (OUT_OF_MEMORY) rather than lost."""

    op: int | None
    rid: int


def unpack_requests(data: bytes) -> list[list[Any] | Unread]:
    """A batch of requests, as `unpack` gives it. Out of memory (a put's body is the large
    part), each request is decoded on its own, and one that still cannot be comes as
    `Unread`: the others are served."""
    return unpack_each(data, True)


def unpack_replies(data: bytes) -> list[list[Any] | Unread]:
    """A batch of replies, as `unpack_requests` gives requests (`Unread` with op None)."""
    return unpack_each(data, False)


def unpack_each(data: bytes, requests: bool) -> list[list[Any] | Unread]:
    try:
        return unpack(data)
    except MemoryError:
        pass
    view = memoryview(data)
    out: list[list[Any] | Unread] = []
    for start, end in request_spans(data):
        try:
            out.append(unpack(view[start:end]))
        except MemoryError:
            _, at = msgspan.header(data, start)
            op = None
            if requests:
                op_at, at = at, msgspan.skip(data, at)
                op = one(view[op_at:at])
            out.append(Unread(op, one(view[at : msgspan.skip(data, at)])))
    return out


def one(data: memoryview) -> Any:
    """The one object packed in `data`."""
    return msgpack.unpackb(data, raw=False)


def request_spans(data: bytes) -> Iterator[tuple[int, int]]:
    """Where each request of a packed batch starts and ends, read from their headers (no
    request is built: see msgspan.py)."""
    count, start = msgspan.header(data, 0)
    for _ in range(count):
        end = msgspan.skip(data, start)
        yield start, end
        start = end
