"""The messages between shardq's processes, and their one encoding (msgpack).

Every ZeroMQ message is a batch: a list of requests, or a list of replies. A request is
``[op, rid, conn, *args]``; a reply is ``[rid, *payload]`` and goes back to the peer
that sent the request. `rid` is chosen by the sender and unique among its requests in
flight; a waiting reserve is answered later under the rid it came with. Ops marked
"no reply" are fire-and-forget.

Shard ops (acceptor or coordinator -> shard):

=============  =====================================  ==============================
op             args                                   reply payload
=============  =====================================  ==============================
PUT            id, seq, tube, pri, delay, ttr, body   [reply]
RESERVE        tubes, timeout_at, soon_at, offer      reserve payload (engine.py), or
                                                      nothing yet (a waiter)
CANCEL         target rid                             no reply
ACCEPT         job id                                 no reply
DECLINE        job id                                 no reply
RESERVE_JOB    job id                                 reserve payload
DELETE         job id                                 [reply]
RELEASE        job id, pri, delay                     [reply]
BURY           job id, pri                            [reply]
TOUCH          job id                                 [reply, new deadline]
PEEK           job id                                 [reply]
KICK_JOB       job id                                 [reply]
STATS_JOB      job id                                 [reply]
PEEK_READY     tube                                   [reply]
PEEK_DELAYED   tube                                   [reply]
PEEK_BURIED    tube                                   [reply]
KICK           tube, bound                            [reply]
STATS_TUBE     tube                                   [reply]
PAUSE_TUBE     tube, delay                            [reply]
REF            tube, d_using, d_watching              [] (an acknowledgement)
DISCONNECT     (none)                                 no reply
COUNTS         (none)                                 [counts dict, utime, stime]
LIST           (none)                                 [[order, name], ...]
REASSERT       job id, TTR deadline                   no reply (re-reserve after restart)
RESET          (none)                                 no reply (a new acceptor: forget
                                                      every connection of the old one)
=============  =====================================  ==============================

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

(
    PUT,
    RESERVE,
    CANCEL,
    ACCEPT,
    DECLINE,
    RESERVE_JOB,
    DELETE,
    RELEASE,
    BURY,
    TOUCH,
    PEEK,
    KICK_JOB,
    STATS_JOB,
    PEEK_READY,
    PEEK_DELAYED,
    PEEK_BURIED,
    KICK,
    STATS_TUBE,
    PAUSE_TUBE,
    REF,
    DISCONNECT,
    COUNTS,
    LIST,
    REASSERT,
    RESET,
) = range(1, 26)

LEASE, STATS, LIST_TUBES, BLOCKS = 30, 31, 32, 33

_packer = msgpack.Packer(use_bin_type=True)


def pack(batch: list[Any]) -> bytes:
    return _packer.pack(batch)


def unpack(data: bytes) -> list[Any]:
    return msgpack.unpackb(data, raw=False, use_list=True, strict_map_key=False)
