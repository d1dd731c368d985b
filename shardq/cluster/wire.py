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

Times (timeout_at, soon_at, deadlines) are CLOCK_MONOTONIC nanoseconds, which every
process on the machine shares. Bump WIRE_VERSION on any change of shape.
"""

from __future__ import annotations

from typing import Any

import msgpack

WIRE_VERSION = 1

LEASE, STATS, LIST_TUBES, BLOCKS = 30, 31, 32, 33

_packer = msgpack.Packer(use_bin_type=True)


def pack(batch: list[Any]) -> bytes:
    return _packer.pack(batch)


def unpack(data: bytes) -> list[Any]:
    return msgpack.unpackb(data, raw=False, use_list=True, strict_map_key=False)
