"""Each process's one ZeroMQ context, with the reconnect timing every socket of it gets.

The processes of a server start side by side, so a socket often connects to an ipc path
its peer has not bound yet. libzmq then tries again after ZMQ_RECONNECT_IVL, 100 ms by
default: one such miss made the first answer of a fresh server 0.1 s late (seen with strace:
the `stats` of a client that connected at once waited for a serving process to reach
another one's hosted shard). Here the first retry comes after 2 ms and the interval doubles
up to 100 ms while the peer stays away (a shard being restarted), as libzmq does with
ZMQ_RECONNECT_IVL_MAX set.
"""

from __future__ import annotations

import zmq

RECONNECT_IVL_MS = 2  #: first retry after a failed or lost connection
RECONNECT_IVL_MAX_MS = 100  #: the retry interval doubles up to this


def context() -> zmq.Context[zmq.Socket[bytes]]:
    """This process's context (`zmq.Context.instance`); sockets made from it afterwards
    retry connections as described above."""
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    ctx.setsockopt(zmq.RECONNECT_IVL, RECONNECT_IVL_MS)
    ctx.setsockopt(zmq.RECONNECT_IVL_MAX, RECONNECT_IVL_MAX_MS)
    return ctx
