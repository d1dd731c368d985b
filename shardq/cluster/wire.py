"""The messages between shardq's processes, and their one encoding (msgpack).

Every ZeroMQ message is a batch: a list of requests, or a list of replies. A request is
``[op, rid, conn, *args]``; a reply is ``[rid, *payload]`` and goes back to the peer
that sent the request. `rid` is chosen by the sender and unique among its requests in
flight; a waiting reserve is answered later under the rid it came with. Ops marked
"no reply" are fire-and-forget.

Shard ops, their arguments and answers: shardq/processes/shard_ops.py.

Coordinator ops (acceptor -> coordinator): LEASE(shard) -> [block];
BLOCKS -> [[[block, shard], ...]] (every block leased so far, from its fsynced table);
STATS(acceptor fields dict) -> [reply]; LIST_TUBES -> [reply].

A connection handed from one serving process to another (`Handoff`) travels as one
datagram on the receiver's unix socket, its file descriptor attached (SCM_RIGHTS).

Times (timeout_at, soon_at, deadlines) are CLOCK_MONOTONIC nanoseconds, which every
process on the machine shares. Bump WIRE_VERSION on any change of shape.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import msgpack

WIRE_VERSION = 1

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


def pack_handoff(handoff: Handoff) -> bytes:
    return _packer.pack(list(handoff))


def unpack_handoff(data: bytes) -> Handoff:
    return Handoff._make(msgpack.unpackb(data, raw=False, use_list=True))


def pack(batch: list[Any]) -> bytes:
    return _packer.pack(batch)


def unpack(data: bytes) -> list[Any]:
    return msgpack.unpackb(data, raw=False, use_list=True, strict_map_key=False)
