"""The messages between shardq's processes, and their one encoding (msgpack).

Every message between the processes (common/links.py) is a batch: a list of requests, or a
list of replies. A request is `Request` — ``[op, rid, conn, args]`` on the wire; a reply
is `Reply` — ``[rid, payload]`` — and goes back to the peer that sent the request. `rid`
is chosen by the sender and unique among its requests in flight; a waiting reserve is
answered later under the rid it came with. Ops that do not reply are fire-and-forget. The
wire carries lists (msgpack); what code reads is these named shapes, made with ``_make``
or unpacked by name, and an op's `args` and `payload` are named by that op's own shapes.

Shard ops, their arguments and answers: shardq/processes/shard/ops.py.

Coordinator ops (serving process -> coordinator): LEASE `Lease(shard)` -> `Answer(block)`;
BLOCKS -> `Answer([[block, shard], ...])` (every block leased so far, from its fsynced
table); STATS `Asked(serving process fields dict, every_key)` -> `Answer(reply)`;
LIST_TUBES -> `Answer(reply)`.

A connection handed from one serving process to another (`Handoff`) travels as one
datagram on the receiver's unix socket, its file descriptor attached (SCM_RIGHTS); the
receiver answers on the sender's socket, TAKEN or REFUSED with the sender's `ticket`
(`pack_answer`), and only then does the sender let the connection go or serve it again.

Times (timeout_at, soon_at, deadlines) are CLOCK_MONOTONIC nanoseconds, which every
process on the machine shares. There is no version number on the wire: every process of
a server is forked from one installed copy (supervision/forked.py), so the two ends of a
socket are always the same code.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple, cast

import msgpack

from shardq.cluster import msgspan

LEASE, STATS, LIST_TUBES, BLOCKS = 30, 31, 32, 33


class Request(NamedTuple):
    """One request of a batch."""

    op: int  #: a shard op (shard/ops.py) or a coordinator op (above)
    rid: int  #: the sender's request id (0: no answer is awaited)
    conn: int  #: the connection it is for (0: none; some ops: a serving process's index)
    args: Sequence[Any]  #: the op's arguments: named by the op's own shape (`_make`)


class Reply(NamedTuple):
    """One reply of a batch: the answer to the request `rid`, or an engine event for it."""

    rid: int
    payload: Sequence[Any]  #: named by the op's reply shape (`Answer`, engine.Reserved...)


class Answer(NamedTuple):
    """The payload of most replies: one value (a client's reply bytes, a block...)."""

    value: Any


class Lease(NamedTuple):
    """LEASE's arguments."""

    shard: int


class Asked(NamedTuple):
    """STATS's arguments: the asking serving process's fields (its part of `stats`), and
    whether every limit-* key is shown (the metrics process) or only those set."""

    fields: dict[str, Any]
    every_key: bool


_packer = msgpack.Packer(use_bin_type=True)


class Handoff(NamedTuple):
    """A client connection moving to the serving process that hosts its tubes: what the
    new owner needs to go on exactly where the old one stopped."""

    use: str  #: the used tube
    watch: list[str]  #: the watch list, in order
    producer: bool  #: counted in current-producers
    worker: bool  #: counted in current-workers
    pending: bytes  #: bytes read from the client and not yet parsed
    output: bytes  #: replies not written yet: the new owner writes them (handoff.py)
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


def pack(batch: Sequence[Request] | Sequence[tuple[int, Sequence[Any]]]) -> bytes:
    """A batch of requests, or of replies (`Reply`s, or the (rid, payload) pairs a shard
    builds)."""
    return _packer.pack(batch)


def unpack(data: bytes | memoryview) -> Sequence[Sequence[Any]]:
    """A batch as lists: each read back as a `Request` or a `Reply` with ``_make``."""
    batch = msgpack.unpackb(data, raw=False, use_list=True, strict_map_key=False)
    if not isinstance(batch, list):
        raise ValueError("a batch is a list")
    return batch


class Unread(NamedTuple):
    """A request (or a reply) that could not be decoded for want of memory: its op (None
    for a reply) and rid, so that it is answered (OUT_OF_MEMORY) rather than lost."""

    op: int | None
    rid: int


#: where a decoded request (a list, as `unpack` gives it) holds its op
OP_FIELD = Request._fields.index("op")


def op_of(raw: Sequence[Any] | Unread) -> int | None:
    """The op of a request as it came off the wire (decoded, or `Unread`), read by its
    field's name without building the `Request`."""
    return raw.op if isinstance(raw, Unread) else cast(int | None, raw[OP_FIELD])


def unpack_requests(data: bytes | memoryview) -> list[Sequence[Any] | Unread]:
    """A batch of requests, as `unpack` gives it. Out of memory (a put's body is the large
    part), each request is decoded on its own, and one that still cannot be comes as
    `Unread`: the others are served."""
    return unpack_each(data, True)


def unpack_replies(data: bytes | memoryview) -> list[Sequence[Any] | Unread]:
    """A batch of replies, as `unpack_requests` gives requests (`Unread` with op None)."""
    return unpack_each(data, False)


def unpack_each(data: bytes | memoryview, requests: bool) -> list[Sequence[Any] | Unread]:
    try:
        return cast(list[Sequence[Any] | Unread], unpack(data))  # the batch itself, no copy
    except MemoryError:
        pass
    view = memoryview(data)
    out: list[Sequence[Any] | Unread] = []
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


def request_spans(data: bytes | memoryview) -> Iterator[tuple[int, int]]:
    """Where each request of a packed batch starts and ends, read from their headers (no
    request is built: see msgspan.py)."""
    count, start = msgspan.header(data, 0)
    for _ in range(count):
        end = msgspan.skip(data, start)
        yield start, end
        start = end
